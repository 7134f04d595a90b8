//! A streaming k-way merge of stream files by timestamp.
//!
//! Memory is bounded by the number of streams: each contributes one small reorder window.
//! The window exists because a probe stream holds a thread's calls in the order they
//! *returned*: a call that encloses others (hipMalloc around hsa_amd_memory_pool_allocate)
//! arrives after them but sorts before them by entry time. Nesting on one thread is shallow,
//! so a window of [`WINDOW`] records restores entry order exactly; a record later than that is
//! still delivered and flagged late.
use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    fs::File,
    io::BufReader,
    path::{Path, PathBuf},
};

use kreplay_common::stream::{Record, StreamDamage, StreamError, StreamHeader, StreamReader};

/// Records held per stream to restore timestamp order.
pub const WINDOW: usize = 1024;

/// One input stream with its reorder window.
struct Input {
    reader: StreamReader<BufReader<File>>,
    window: BinaryHeap<Reverse<(u64, u64, usize)>>,
    /// Records of the window, by slot.
    slots: Vec<Option<Record>>,
    free: Vec<usize>,
    next_seq: u64,
    exhausted: bool,
    last_out: u64,
}

impl Input {
    fn fill(&mut self) {
        while !self.exhausted && self.window.len() < WINDOW {
            match self.reader.next() {
                Some(rec) => {
                    let slot = self.free.pop().unwrap_or_else(|| {
                        self.slots.push(None);
                        self.slots.len() - 1
                    });
                    let ts = rec.timestamp();
                    self.slots[slot] = Some(rec);
                    self.window.push(Reverse((ts, self.next_seq, slot)));
                    self.next_seq += 1;
                }
                None => self.exhausted = true,
            }
        }
    }

    fn head_ts(&self) -> Option<u64> {
        self.window.peek().map(|Reverse((ts, _, _))| *ts)
    }

    fn pop(&mut self) -> Option<(Record, bool)> {
        let Reverse((ts, _, slot)) = self.window.pop()?;
        let rec = self.slots[slot].take().expect("slot holds a record");
        self.free.push(slot);
        let late = ts < self.last_out;
        self.last_out = self.last_out.max(ts);
        self.fill();
        Some((rec, late))
    }
}

/// A merged record and where it came from.
pub struct Merged {
    /// The record.
    pub record: Record,
    /// Index of its input stream.
    pub stream: usize,
    /// True when the record sorts before one already delivered from its stream.
    pub late: bool,
}

/// Merges many stream files into one timestamp-ordered sequence of records.
pub struct KWayMerge {
    inputs: Vec<Input>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl KWayMerge {
    /// Opens every file. A file that cannot be opened at all (missing, bad header) is an error
    /// naming it; damage later in a file is reported by [`KWayMerge::damage`] at the end.
    pub fn open(paths: &[PathBuf]) -> Result<KWayMerge, StreamError> {
        let mut inputs = Vec::with_capacity(paths.len());
        for p in paths {
            inputs.push(Input {
                reader: StreamReader::open(p)?,
                window: BinaryHeap::new(),
                slots: Vec::new(),
                free: Vec::new(),
                next_seq: 0,
                exhausted: false,
                last_out: 0,
            });
        }
        let mut heap = BinaryHeap::new();
        for (i, input) in inputs.iter_mut().enumerate() {
            input.fill();
            if let Some(ts) = input.head_ts() {
                heap.push(Reverse((ts, i)));
            }
        }
        Ok(KWayMerge { inputs, heap })
    }

    /// The header of input `i`.
    pub fn header(&self, i: usize) -> &StreamHeader {
        self.inputs[i].reader.header()
    }

    /// The path of input `i`.
    pub fn path(&self, i: usize) -> &Path {
        self.inputs[i].reader.path()
    }

    /// Number of inputs.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// True when there are no inputs.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Damage found in any input so far (torn tails, bad checksums), in input order.
    pub fn damage(&self) -> Vec<StreamDamage> {
        self.inputs
            .iter()
            .filter_map(|i| i.reader.damage().cloned())
            .collect()
    }
}

impl Iterator for KWayMerge {
    type Item = Merged;

    fn next(&mut self) -> Option<Merged> {
        let Reverse((_, i)) = self.heap.pop()?;
        let input = &mut self.inputs[i];
        let (record, late) = input.pop()?;
        if let Some(ts) = input.head_ts() {
            self.heap.push(Reverse((ts, i)));
        }
        Some(Merged {
            record,
            stream: i,
            late,
        })
    }
}
