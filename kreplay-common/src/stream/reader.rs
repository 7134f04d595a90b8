//! The chunk reader: an iterator of records that stops at the first damaged chunk and says
//! where, keeping everything before it. Memory: one chunk payload.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::codec::{self, Decoded};
use super::crc32::crc32;
use super::error::{DamageKind, StreamDamage, StreamError};
use super::header::StreamHeader;
use super::record::Record;
use super::{CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};

/// Reads a stream's records in file order.
///
/// Iteration ends at end of file or at the first damaged chunk (torn, corrupt, out of
/// sequence); [`StreamReader::damage`] then says which file, which byte offset and why.
pub struct StreamReader<R: Read> {
    src: R,
    path: PathBuf,
    header: StreamHeader,
    /// File offset of the next chunk header.
    offset: u64,
    next_seq: u64,
    payload: Vec<u8>,
    pos: usize,
    peeked: Option<Record>,
    damage: Option<StreamDamage>,
    done: bool,
    unknown_skipped: u64,
}

impl StreamReader<File> {
    /// Opens the stream file at `path` and checks its header.
    ///
    /// The file is read without a `BufReader`: a chunk is read whole into the payload buffer,
    /// two reads per chunk (its header, its payload). Through a buffer every byte would be
    /// copied twice, and the buffer's 64 KiB per stream would crowd the caches a many-stream
    /// merge needs.
    pub fn open(path: &Path) -> Result<Self, StreamError> {
        let file = File::open(path).map_err(|source| StreamError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::new(file, path)
    }
}

impl<R: Read> StreamReader<R> {
    /// Reads the header from `src`; `path` names the source in errors and damage reports.
    pub fn new(mut src: R, path: &Path) -> Result<Self, StreamError> {
        let (header, len) = StreamHeader::read(&mut src, path)?;
        Ok(Self {
            src,
            path: path.to_path_buf(),
            header,
            offset: len as u64,
            next_seq: 0,
            payload: Vec::new(),
            pos: 0,
            peeked: None,
            damage: None,
            done: false,
            unknown_skipped: 0,
        })
    }

    /// The file header.
    pub fn header(&self) -> &StreamHeader {
        &self.header
    }

    /// The file (or label) this reader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where and why the readable part ended early, once iteration has reached it.
    pub fn damage(&self) -> Option<&StreamDamage> {
        self.damage.as_ref()
    }

    /// Complete chunks read so far.
    pub fn chunks_read(&self) -> u64 {
        self.next_seq
    }

    /// Records with tags this build does not know, skipped so far.
    pub fn unknown_skipped(&self) -> u64 {
        self.unknown_skipped
    }

    /// The next record without consuming it.
    pub fn peek(&mut self) -> Option<&Record> {
        if self.peeked.is_none() {
            self.peeked = self.read_record();
        }
        self.peeked.as_ref()
    }

    /// The next record's [`Record::timestamp`], the key of a k-way merge across streams.
    pub fn peek_timestamp(&mut self) -> Option<u64> {
        self.peek().map(Record::timestamp)
    }

    fn read_record(&mut self) -> Option<Record> {
        loop {
            if self.pos < self.payload.len() {
                match codec::decode(&self.payload, self.pos, self.header.version) {
                    Decoded::Record(rec, next) => {
                        self.pos = next;
                        // The next record is decoded at this stream's next turn, after every
                        // other stream's: ask for its bytes now.
                        prefetch_bytes(&self.payload, next);
                        return Some(rec);
                    }
                    Decoded::Unknown(_, next) => {
                        self.pos = next;
                        self.unknown_skipped += 1;
                        continue;
                    }
                    Decoded::Malformed => {
                        // The chunk checksummed, so the writer wrote this: stop here, keeping
                        // the records decoded before it.
                        let chunk_start =
                            self.offset - (CHUNK_HEADER_LEN + self.payload.len()) as u64;
                        self.next_seq -= 1;
                        self.fail(chunk_start, DamageKind::BadRecord { at: self.pos });
                        return None;
                    }
                }
            }
            if self.done || !self.load_chunk() {
                return None;
            }
        }
    }

    /// Reads the next chunk into `payload`; false at end of file or damage.
    fn load_chunk(&mut self) -> bool {
        let start = self.offset;
        let mut head = [0u8; CHUNK_HEADER_LEN];
        let have = match read_full(&mut self.src, &mut head) {
            Ok(n) => n,
            Err(e) => return self.fail(start, DamageKind::Io(e.to_string())),
        };
        if have == 0 {
            self.done = true;
            return false;
        }
        if have < CHUNK_HEADER_LEN {
            return self.fail(start, DamageKind::TornChunkHeader { have: have as u64 });
        }
        let len = u32::from_le_bytes(head[0..4].try_into().expect("4-byte slice"));
        let stored = u32::from_le_bytes(head[4..8].try_into().expect("4-byte slice"));
        let seq = u64::from_le_bytes(head[8..16].try_into().expect("8-byte slice"));
        if len as usize > MAX_CHUNK_PAYLOAD {
            return self.fail(start, DamageKind::BadLength { len });
        }
        self.payload.resize(len as usize, 0);
        let got = match read_full(&mut self.src, &mut self.payload) {
            Ok(n) => n,
            Err(e) => return self.fail(start, DamageKind::Io(e.to_string())),
        };
        if got < len as usize {
            return self.fail(
                start,
                DamageKind::TornPayload {
                    expected: len,
                    have: got as u64,
                },
            );
        }
        let computed = crc32(&self.payload);
        if computed != stored {
            return self.fail(start, DamageKind::ChecksumMismatch { stored, computed });
        }
        if seq != self.next_seq {
            let expected = self.next_seq;
            return self.fail(
                start,
                DamageKind::SequenceGap {
                    expected,
                    found: seq,
                },
            );
        }
        self.next_seq += 1;
        self.offset = start + (CHUNK_HEADER_LEN + len as usize) as u64;
        self.pos = 0;
        true
    }

    fn fail(&mut self, offset: u64, kind: DamageKind) -> bool {
        self.payload.clear();
        self.pos = 0;
        self.done = true;
        self.damage = Some(StreamDamage {
            path: self.path.clone(),
            offset,
            chunks_kept: self.next_seq,
            kind,
        });
        false
    }
}

impl<R: Read> Iterator for StreamReader<R> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        // Tested first: `take` alone would copy the whole (empty) slot out for every record.
        if self.peeked.is_some() {
            return self.peeked.take();
        }
        self.read_record()
    }
}

/// Bytes of `payload` from `at` asked for ahead of use: a full-form `ApiCall` (135 bytes)
/// spans at most three cache lines.
const PREFETCH_BYTES: usize = 192;

/// Asks the CPU to bring `payload[at..at + PREFETCH_BYTES]` into its caches (a hint: no effect
/// on what the program computes).
#[inline(always)]
fn prefetch_bytes(payload: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let end = payload.len().min(at.saturating_add(PREFETCH_BYTES));
        for line in (at..end).step_by(64) {
            // SAFETY: SSE, which the intrinsic needs, is part of every x86_64 CPU; a prefetch
            // reads nothing the program sees and never faults (the address is inside
            // `payload` anyway).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(payload.as_ptr().add(line).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (payload, at);
}

/// Reads until `buf` is full or end of file; returns the bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
