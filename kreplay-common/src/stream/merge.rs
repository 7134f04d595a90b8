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
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::{StreamDamage, StreamError};
use super::header::StreamHeader;
use super::reader::StreamReader;
use super::record::Record;

/// Records held per stream to restore timestamp order.
pub const DEFAULT_WINDOW: usize = 1024;
/// Records held per tool stream ([`super::StreamKind::Tool`]). CUPTI hands a process's GPU and
/// API records over in buffers of its own choosing, one application thread's after another's,
/// so the tool writes them up to about a buffer out of order (a 4 MiB buffer holds some 20000
/// records): 2^17 records cover several buffers, at about 25 MiB for the process's stream.
pub const TOOL_WINDOW: usize = 1 << 17;

/// How far ahead of the window's front its keys are prefetched: two 64-byte lines of 16-byte
/// keys.
const KEYS_AHEAD: usize = 8;

/// One input stream with its reorder window. The window's keys `(timestamp, tie rank, slot)`
/// are kept sorted, in file order among equal keys; the records stay put in `slots`. A stream is
/// nearly sorted already (only calls that enclose others arrive late, by their nesting depth),
/// so a key is inserted a step or two from the back and taken from the front: constant time
/// per record, where a heap over the whole window costs its logarithm, for the same order.
///
/// A record waits in its slot while the window's other records go by, so by its turn it has
/// left the CPU's caches: taking a key prefetches the record that is next, which is read
/// after the other streams have had their turns.
struct Input<R: Read> {
    reader: StreamReader<R>,
    keys: VecDeque<(u64, u8, u32)>,
    slots: Vec<Option<Record>>,
    free: Vec<u32>,
    /// The slot of the record last lent out by [`MergedStreams::next_ref`], freed at the
    /// stream's next turn.
    lent: Option<u32>,
    exhausted: bool,
    last_out: u64,
    /// Records held to reorder.
    window: usize,
}

impl<R: Read> Input<R> {
    fn new(reader: StreamReader<R>, window: usize) -> Self {
        Self {
            window,
            reader,
            keys: VecDeque::new(),
            slots: Vec::new(),
            free: Vec::new(),
            lent: None,
            exhausted: false,
            last_out: 0,
        }
    }

    fn fill(&mut self) {
        while !self.exhausted && self.keys.len() < self.window {
            let Some(record) = self.reader.next() else {
                self.exhausted = true;
                break;
            };
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
            // After every key at or before it: most often the back itself; else a binary search
            // (a tool stream's window is long, and a buffer's records come far from the back).
            let at = match self.keys.back() {
                Some(&(t, r, _)) if (t, r) > (ts, rank) => {
                    self.keys.partition_point(|&(t, r, _)| (t, r) <= (ts, rank))
                }
                _ => self.keys.len(),
            };
            if at == self.keys.len() {
                self.keys.push_back((ts, rank, slot));
            } else {
                self.keys.insert(at, (ts, rank, slot));
            }
        }
    }

    fn head_key(&self) -> Option<(u64, u8)> {
        self.keys.front().map(|&(ts, rank, _)| (ts, rank))
    }

    /// Takes the window's first record, leaving it in its slot (returned, with whether it is
    /// late) until the stream's next turn, and refills the window.
    fn take(&mut self) -> Option<(u32, bool)> {
        if let Some(old) = self.lent.take() {
            self.slots[old as usize] = None;
            self.free.push(old);
        }
        let (ts, _, slot) = self.keys.pop_front()?;
        self.lent = Some(slot);
        if let Some(&(_, _, next)) = self.keys.front() {
            prefetch(&self.slots[next as usize]);
        }
        // The keys a few turns ahead: the window's front walks through memory the other
        // streams' turns have pushed out of the caches.
        if let Some(ahead) = self.keys.get(KEYS_AHEAD) {
            prefetch(ahead);
        }
        let late = ts < self.last_out;
        self.last_out = self.last_out.max(ts);
        self.fill();
        Some((slot, late))
    }
}

/// Asks the CPU to bring `value`'s cache lines in (a hint: no effect on what the program
/// computes).
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = (value as *const T).cast::<i8>();
        for line in (0..size_of::<T>()).step_by(64) {
            // SAFETY: SSE, which the intrinsic needs, is part of every x86_64 CPU; a prefetch
            // reads nothing the program sees and never faults, whatever the address (these are
            // inside `value` anyway).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The heap key of stream `i`'s next record: ordered by timestamp, then tie rank, then stream
/// index (fewer than 2^32 streams).
#[inline(always)]
fn head(ts: u64, rank: u8, i: usize) -> (u64, u64) {
    (ts, u64::from(rank) << 32 | i as u64)
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
    /// `(timestamp, tie rank << 32 | stream index)` of each stream's next record: two 64-bit
    /// words, since a heap writes an entry and reads it back at once and a read of a field
    /// written narrower (a `u8` and padding) stalls the CPU's store forwarding.
    heads: BinaryHeap<Reverse<(u64, u64)>>,
}

impl MergedStreams<File> {
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
    /// Merges `readers` (each positioned at its first record) with the default windows:
    /// [`TOOL_WINDOW`] for tool streams, [`DEFAULT_WINDOW`] for the others.
    pub fn new(readers: Vec<StreamReader<R>>) -> Self {
        Self::with_windows(readers, DEFAULT_WINDOW, TOOL_WINDOW)
    }

    /// Merges `readers`, holding up to `window` (at least 1) records per stream to reorder.
    pub fn with_window(readers: Vec<StreamReader<R>>, window: usize) -> Self {
        Self::with_windows(readers, window, window)
    }

    /// Merges `readers`, holding up to `tool_window` records of a tool stream and `window` of
    /// any other (each at least 1) to reorder.
    pub fn with_windows(readers: Vec<StreamReader<R>>, window: usize, tool_window: usize) -> Self {
        assert!(
            readers.len() <= u32::MAX as usize,
            "fewer than 2^32 streams"
        );
        let mut inputs: Vec<Input<R>> = readers
            .into_iter()
            .map(|r| {
                let w = match r.header().kind {
                    super::StreamKind::Tool => tool_window,
                    _ => window,
                };
                Input::new(r, w.max(1))
            })
            .collect();
        let mut heads = BinaryHeap::with_capacity(inputs.len());
        for (i, input) in inputs.iter_mut().enumerate() {
            input.fill();
            if let Some((ts, rank)) = input.head_key() {
                heads.push(Reverse(head(ts, rank, i)));
            }
        }
        Self { inputs, heads }
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

impl<R: Read> MergedStreams<R> {
    /// The next record, lent: [`Iterator::next`] without moving the record out of the merge
    /// (a record is large, and the merge's hot loop moved each one several times). The record
    /// stays valid until the next call.
    pub fn next_ref(&mut self) -> Option<MergedRef<'_>> {
        let (i, slot, late) = self.advance()?;
        let record = self.inputs[i].slots[slot as usize].as_ref()?;
        Some(MergedRef {
            record,
            stream: i,
            late,
        })
    }

    /// Takes the smallest head: its stream index, the record's slot there, and lateness.
    fn advance(&mut self) -> Option<(usize, u32, bool)> {
        // The stream with the smallest head gives its record; its new head replaces its key in
        // place (one sift down instead of a pop and a push).
        let mut top = self.heads.peek_mut()?;
        let Reverse((_, tie)) = *top;
        let i = (tie & u64::from(u32::MAX)) as usize;
        let input = &mut self.inputs[i];
        let Some((slot, late)) = input.take() else {
            PeekMut::pop(top);
            return None;
        };
        match input.head_key() {
            Some((ts, rank)) => *top = Reverse(head(ts, rank, i)),
            None => {
                PeekMut::pop(top);
            }
        }
        Some((i, slot, late))
    }
}

/// A merged record lent by [`MergedStreams::next_ref`].
#[derive(Clone, Copy, Debug)]
pub struct MergedRef<'a> {
    /// The record.
    pub record: &'a Record,
    /// Index of its input stream.
    pub stream: usize,
    /// True when the record sorts before one already delivered from its stream.
    pub late: bool,
}

impl<R: Read> Iterator for MergedStreams<R> {
    type Item = Merged;

    fn next(&mut self) -> Option<Merged> {
        let (i, slot, late) = self.advance()?;
        let input = &mut self.inputs[i];
        let record = input.slots[slot as usize].take()?;
        input.lent = None;
        input.free.push(slot);
        Some(Merged {
            record,
            stream: i,
            late,
        })
    }
}
