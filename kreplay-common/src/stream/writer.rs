//! The chunk writer: encodes records into a pending chunk and appends each chunk whole.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::codec;
use super::crc32::crc32;
use super::error::StreamError;
use super::header::StreamHeader;
use super::record::Record;
use super::{CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};

/// Default payload size at which [`StreamWriter::push`] writes the pending chunk.
pub const DEFAULT_CHUNK_THRESHOLD: usize = 256 * 1024;

/// Writes a stream: the header at creation, then chunks of records.
///
/// Each chunk (header and payload) goes out in one `write_all` of one buffer, so a process
/// killed between chunks leaves only whole chunks, and one killed inside a `write()` leaves a
/// torn last chunk that the reader detects.
pub struct StreamWriter<W: Write> {
    out: W,
    /// Chunk header space followed by the pending payload.
    buf: Vec<u8>,
    threshold: usize,
    /// The format version in the header: which encoding each record gets.
    version: u16,
    next_seq: u64,
    records_pending: u64,
    records_written: u64,
}

impl StreamWriter<File> {
    /// Creates (truncating) the file at `path` and writes `header` to it.
    pub fn create(path: &Path, header: &StreamHeader) -> Result<Self, StreamError> {
        let file = File::create(path).map_err(|source| StreamError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Self::new(file, header)
    }

    /// Reopens the stream at `path`, written before by a writer that had written `chunks`
    /// chunks (its [`StreamWriter::chunks_written`]) and was flushed and dropped, and appends
    /// after them, in its header's format version: the file reads as if that writer had never
    /// been closed.
    pub fn append(path: &Path, chunks: u64) -> Result<Self, StreamError> {
        let mut head = File::open(path).map_err(|source| StreamError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let (header, _) = StreamHeader::read(&mut head, path)?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|source| StreamError::Create {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self {
            out: file,
            buf: vec![0; CHUNK_HEADER_LEN],
            threshold: DEFAULT_CHUNK_THRESHOLD,
            version: header.version,
            next_seq: chunks,
            records_pending: 0,
            records_written: 0,
        })
    }
}

impl<W: Write> StreamWriter<W> {
    /// Writes `header` to `out` and returns a writer appending chunks after it, encoding
    /// records as `header.version` has them (an older version for older readers).
    pub fn new(mut out: W, header: &StreamHeader) -> Result<Self, StreamError> {
        out.write_all(&header.encode())
            .and_then(|()| out.flush())
            .map_err(|source| StreamError::Write {
                what: "header".into(),
                source,
            })?;
        Ok(Self {
            out,
            buf: vec![0; CHUNK_HEADER_LEN],
            threshold: DEFAULT_CHUNK_THRESHOLD,
            version: header.version,
            next_seq: 0,
            records_pending: 0,
            records_written: 0,
        })
    }

    /// Sets the payload size at which a chunk is written (clamped to 1..=MAX_CHUNK_PAYLOAD/2).
    pub fn with_chunk_threshold(mut self, bytes: usize) -> Self {
        self.threshold = bytes.clamp(1, MAX_CHUNK_PAYLOAD / 2);
        self
    }

    /// Adds `rec` to the pending chunk; writes the chunk once it reaches the size threshold.
    pub fn push(&mut self, rec: &Record) -> Result<(), StreamError> {
        codec::encode_version(rec, self.version, &mut self.buf);
        self.records_pending += 1;
        if self.buf.len() - CHUNK_HEADER_LEN >= self.threshold {
            self.write_chunk()?;
        }
        Ok(())
    }

    /// Writes the pending chunk, if any, and flushes `out`.
    pub fn flush(&mut self) -> Result<(), StreamError> {
        self.write_chunk()?;
        self.out.flush().map_err(|source| StreamError::Write {
            what: "flush".into(),
            source,
        })
    }

    /// Records written in complete chunks so far.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }

    /// Chunks written so far.
    pub fn chunks_written(&self) -> u64 {
        self.next_seq
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W, StreamError> {
        self.flush()?;
        Ok(self.out)
    }

    fn write_chunk(&mut self) -> Result<(), StreamError> {
        let payload_len = self.buf.len() - CHUNK_HEADER_LEN;
        if payload_len == 0 {
            return Ok(());
        }
        let crc = crc32(&self.buf[CHUNK_HEADER_LEN..]);
        self.buf[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        self.buf[8..16].copy_from_slice(&self.next_seq.to_le_bytes());
        let seq = self.next_seq;
        // Whatever happens, the pending records leave the buffer: a failed chunk is not retried
        // (a retry after a partial write would put a second copy after a torn one).
        let result = self.out.write_all(&self.buf);
        self.buf.truncate(CHUNK_HEADER_LEN);
        let records = std::mem::take(&mut self.records_pending);
        result.map_err(|source| StreamError::Write {
            what: format!("chunk {seq}"),
            source,
        })?;
        self.next_seq += 1;
        self.records_written += records;
        Ok(())
    }
}
