//! Errors of the stream writer and reader, and the description of a damaged tail.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A failure opening, creating or writing a stream file. A damaged *tail* is not an error:
/// the reader reports it through [`StreamDamage`] and keeps every record before it.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// `File::open` of a stream failed.
    #[error("open({path}) failed: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// `File::create` of a stream failed.
    #[error("create({path}) failed: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Reading the file header failed or hit end of file.
    #[error("{path}: read() of the {needed}-byte stream header failed: {source}")]
    ReadHeader {
        /// The file.
        path: PathBuf,
        /// Bytes the header needs.
        needed: usize,
        /// The OS error (`UnexpectedEof` when the file is shorter than a header).
        source: io::Error,
    },
    /// The file does not start with `KRPLSTRM`.
    #[error("{path}: not a kreplay stream (magic {found:02x?})")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The first eight bytes found.
        found: [u8; 8],
    },
    /// The header was written by a newer format this reader does not understand.
    #[error("{path}: stream format version {version}, this reader understands up to {supported}")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        version: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// The header names a clock other than CLOCK_MONOTONIC: its times cannot be placed beside
    /// the other streams'.
    #[error(
        "{path}: stream timestamps use clock id {clock_id}; this reader knows only {known} \
         (CLOCK_MONOTONIC)"
    )]
    UnsupportedClock {
        /// The file.
        path: PathBuf,
        /// The clock id in the header.
        clock_id: u16,
        /// The one clock id this build reads.
        known: u16,
    },
    /// The header's own length field or checksum is wrong.
    #[error("{path}: corrupt stream header: {what}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// `write()` of the header or of a chunk failed.
    #[error("write() of {what} failed: {source}")]
    Write {
        /// "header" or "chunk N".
        what: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Why the readable part of a stream ends before the end of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// Fewer bytes than a chunk header remain: the writer died mid-`write()`.
    TornChunkHeader {
        /// Bytes present.
        have: u64,
    },
    /// The chunk's payload is shorter than its length field: the writer died mid-`write()`.
    TornPayload {
        /// Payload length the chunk header announces.
        expected: u32,
        /// Payload bytes present.
        have: u64,
    },
    /// The length field exceeds [`super::MAX_CHUNK_PAYLOAD`]: the header is garbage.
    BadLength {
        /// The length found.
        len: u32,
    },
    /// The payload's CRC-32 does not match the chunk header's.
    ChecksumMismatch {
        /// CRC in the chunk header.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// The chunk's sequence number is not the one after the previous chunk's.
    SequenceGap {
        /// The sequence number expected.
        expected: u64,
        /// The sequence number found.
        found: u64,
    },
    /// The chunk checksums correctly but a record inside it is malformed (a writer bug).
    BadRecord {
        /// Offset of the record inside the chunk payload.
        at: usize,
    },
    /// `read()` failed.
    Io(String),
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TornChunkHeader { have } => {
                write!(f, "torn chunk header ({have} of 16 bytes)")
            }
            Self::TornPayload { expected, have } => {
                write!(f, "torn chunk payload ({have} of {expected} bytes)")
            }
            Self::BadLength { len } => write!(f, "impossible chunk length {len}"),
            Self::ChecksumMismatch { stored, computed } => write!(
                f,
                "chunk checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::SequenceGap { expected, found } => {
                write!(f, "chunk sequence {found}, expected {expected}")
            }
            Self::BadRecord { at } => write!(f, "malformed record at payload byte {at}"),
            Self::Io(e) => write!(f, "read() failed: {e}"),
        }
    }
}

/// Where and why a stream's readable part ends early; every record before `offset` was kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamDamage {
    /// The file (or the label the reader was given).
    pub path: PathBuf,
    /// Byte offset in the file of the first chunk that could not be read.
    pub offset: u64,
    /// Complete chunks read before it.
    pub chunks_kept: u64,
    /// What is wrong there.
    pub kind: DamageKind,
}

impl fmt::Display for StreamDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} at byte offset {}; kept the {} complete chunks before it",
            self.path.display(),
            self.kind,
            self.offset,
            self.chunks_kept
        )
    }
}
