//! The streaming k-way merge of many stream readers by [`Record::timestamp`]: the one merge
//! the CLI's `kreplay merge`, `kreplay trace` and `kreplay replay` share.
//!
//! Memory is bounded by the number of streams: each holds one chunk (its reader) plus a
//! reorder window of at most [`DEFAULT_WINDOW`] records, whatever the streams' length.
//!
//! The window exists because a probe stream holds a thread's calls in the order they
//! *returned*: a call that encloses others (hipMalloc around hsa_amd_memory_pool_allocate)
//! arrives after them but sorts before them by entry time. Nesting on one thread is shallow,
//! so a window of a few records restores entry order exactly; a record that sorts before one
//! its stream already delivered (further out of order than the window) is still delivered,
//! flagged [`Merged::late`], so nothing is lost.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::error::{StreamDamage, StreamError};
use super::header::StreamHeader;
use super::reader::StreamReader;
use super::record::Record;

/// Records held per stream to restore timestamp order.
pub const DEFAULT_WINDOW: usize = 1024;

/// One input stream with its reorder window. The heap orders small keys
/// `(timestamp, tie rank, arrival, slot)`; the records stay put in `slots`, so a heap
/// operation moves a few words instead of a whole record.
struct Input<R: Read> {
    reader: StreamReader<R>,
    window: BinaryHeap<Reverse<(u64, u8, u64, u32)>>,
    slots: Vec<Option<Record>>,
    free: Vec<u32>,
    arrivals: u64,
    exhausted: bool,
    last_out: u64,
}

impl<R: Read> Input<R> {
    fn new(reader: StreamReader<R>) -> Self {
        Self {
            reader,
            window: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            arrivals: 0,
            exhausted: false,
            last_out: 0,
        }
    }

    fn fill(&mut self, limit: usize) {
        while !self.exhausted && self.window.len() < limit {
            match self.reader.next() {
                Some(record) => {
                    let (ts, rank) = (record.timestamp(), record.tie_rank());
                    let slot = match self.free.pop() {
                        Some(s) => {
                            self.slots[s as usize] = Some(record);
                            s
                        }
                        None => {
                            self.slots.push(Some(record));
                            (self.slots.len() - 1) as u32
                        }
                    };
                    self.window.push(Reverse((ts, rank, self.arrivals, slot)));
                    self.arrivals += 1;
                }
                None => self.exhausted = true,
            }
        }
    }

    fn head_key(&self) -> Option<(u64, u8)> {
        self.window
            .peek()
            .map(|Reverse((ts, rank, _, _))| (*ts, *rank))
    }

    fn pop(&mut self, limit: usize) -> Option<(Record, bool)> {
        let Reverse((ts, _, _, slot)) = self.window.pop()?;
        let record = self.slots[slot as usize].take()?;
        self.free.push(slot);
        let late = ts < self.last_out;
        self.last_out = self.last_out.max(ts);
        self.fill(limit);
        Some((record, late))
    }
}

/// A merged record and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// The record.
    pub record: Record,
    /// Index of its input stream.
    pub stream: usize,
    /// True when the record sorts before one already delivered from its stream.
    pub late: bool,
}

/// Yields the records of all readers, smallest timestamp first (ties: the tool's spans of its
/// own work first ([`Record::tie_rank`]), then lower stream index, then file order), each
/// stream reordered within its window.
pub struct MergedStreams<R: Read> {
    inputs: Vec<Input<R>>,
    /// `(timestamp, tie rank, stream index)` of each stream's next record.
    heads: BinaryHeap<Reverse<(u64, u8, usize)>>,
    window: usize,
}

impl MergedStreams<BufReader<File>> {
    /// Opens every file. A file that cannot be opened at all (missing, bad header) is an error
    /// naming it; damage later in a file is reported by [`MergedStreams::damages`].
    pub fn open(paths: &[PathBuf]) -> Result<Self, StreamError> {
        let readers = paths
            .iter()
            .map(|p| StreamReader::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(readers))
    }
}

impl<R: Read> MergedStreams<R> {
    /// Merges `readers` (each positioned at its first record) with the default window.
    pub fn new(readers: Vec<StreamReader<R>>) -> Self {
        Self::with_window(readers, DEFAULT_WINDOW)
    }

    /// Merges `readers`, holding up to `window` (at least 1) records per stream to reorder.
    pub fn with_window(readers: Vec<StreamReader<R>>, window: usize) -> Self {
        let window = window.max(1);
        let mut inputs: Vec<Input<R>> = readers.into_iter().map(Input::new).collect();
        let mut heads = BinaryHeap::with_capacity(inputs.len());
        for (i, input) in inputs.iter_mut().enumerate() {
            input.fill(window);
            if let Some((ts, rank)) = input.head_key() {
                heads.push(Reverse((ts, rank, i)));
            }
        }
        Self {
            inputs,
            heads,
            window,
        }
    }

    /// Number of inputs.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// True when there are no inputs.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// The header of input `i`.
    pub fn header(&self, i: usize) -> &StreamHeader {
        self.inputs[i].reader.header()
    }

    /// The path (or label) of input `i`.
    pub fn path(&self, i: usize) -> &Path {
        self.inputs[i].reader.path()
    }

    /// Damaged tails met so far, one per damaged stream, in input order.
    pub fn damages(&self) -> Vec<StreamDamage> {
        self.inputs
            .iter()
            .filter_map(|i| i.reader.damage().cloned())
            .collect()
    }
}

impl<R: Read> Iterator for MergedStreams<R> {
    type Item = Merged;

    fn next(&mut self) -> Option<Merged> {
        let Reverse((_, _, i)) = self.heads.pop()?;
        let input = &mut self.inputs[i];
        let (record, late) = input.pop(self.window)?;
        if let Some((ts, rank)) = input.head_key() {
            self.heads.push(Reverse((ts, rank, i)));
        }
        Some(Merged {
            record,
            stream: i,
            late,
        })
    }
}
