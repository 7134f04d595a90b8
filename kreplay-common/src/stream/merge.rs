//! A streaming k-way merge of several stream readers by [`Record::timestamp`]: memory is one
//! chunk per stream plus a heap entry per stream, whatever the streams' length.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;

use super::error::StreamDamage;
use super::reader::StreamReader;
use super::record::Record;

/// Yields `(stream index, record)` from all readers, smallest timestamp first (ties: lower
/// stream index first). A stream whose records are out of order is merged as it comes: each
/// record is emitted when it reaches the head of its stream.
pub struct MergedStreams<R: Read> {
    readers: Vec<StreamReader<R>>,
    /// `(timestamp, stream index)` of each stream's next record.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
}

impl<R: Read> MergedStreams<R> {
    /// Merges `readers` (each positioned at its first record).
    pub fn new(mut readers: Vec<StreamReader<R>>) -> Self {
        let mut heads = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(ts) = r.peek_timestamp() {
                heads.push(Reverse((ts, i)));
            }
        }
        Self { readers, heads }
    }

    /// The readers, e.g. for their headers.
    pub fn readers(&self) -> &[StreamReader<R>] {
        &self.readers
    }

    /// Damaged tails met so far, one per damaged stream.
    pub fn damages(&self) -> impl Iterator<Item = &StreamDamage> {
        self.readers.iter().filter_map(StreamReader::damage)
    }
}

impl<R: Read> Iterator for MergedStreams<R> {
    type Item = (usize, Record);

    fn next(&mut self) -> Option<(usize, Record)> {
        let Reverse((_, i)) = self.heads.pop()?;
        let reader = &mut self.readers[i];
        let record = reader.next()?;
        if let Some(ts) = reader.peek_timestamp() {
            self.heads.push(Reverse((ts, i)));
        }
        Some((i, record))
    }
}
