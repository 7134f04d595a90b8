//! kreplay stream files: the versioned, crash-safe binary format the tool and the CLI write
//! and the CLI merges into one trace.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! file   = header chunk*
//! header = magic "KRPLSTRM" (8) | version u16 | header_len u16 | kind u16 | clock_id u16
//!        | pid u32 | created_monotonic_ns u64 | created_realtime_ns u64 | crc32 u32
//!          (40 bytes in versions 1 to 8; crc32 covers the header_len - 4 bytes before it)
//! chunk  = payload_len u32 | crc32(payload) u32 | seq u64 | payload
//!          (seq counts chunks from 0; payload_len <= MAX_CHUNK_PAYLOAD)
//! payload = record*
//! record = tag u8 | body_len u32 | body
//! ```
//!
//! Bodies are the record's fields in a fixed order (see [`codec`]); strings are `len u32`
//! plus UTF-8. A reader skips records whose tag it does not know and ignores bytes after the
//! fields it knows, so a newer writer can add record types and append fields.
//!
//! # Versions
//!
//! Version 2 appends `pid u32, tid u32` to `Snapshot`, `Restore` and `ReplayPass` (after every
//! field appended in version 1) and adds the `ToolWindow` record: the merge needs to know
//! which thread was inside kreplay's own work, and when. A version-2 body without them is
//! malformed; in a version-1 stream they are absent and read as 0 (not recorded), so a
//! version-1 stream still reads, with kreplay's own calls not told apart. Version 3 appends
//! `failed u64` to `Restore` (regions whose write-back failed, counted as skipped before);
//! older streams read it as 0. Version 4 writes `ApiCall` packed (tag 15): the fixed fields,
//! a mask of which of its 13 words (ret, 6 args, 5 extra, out) are nonzero, and only those,
//! 33 bytes for a call whose words are all zero instead of 135 (most of a long trace's disk);
//! the full form (tag 3) still reads in any version. Version 5 adds `Annotation` (tag 16), the
//! application's roctx and NVTX ranges and marks; the version changes so that an older reader
//! refuses the stream by name rather than drop every annotation as an unknown tag. Version 6
//! appends `group_segment u32, private_segment u32` to `Dispatch` (read as 0 from older
//! streams, required in version 6) and adds `GpuCopy` (tag 17): copies and memsets with their
//! GPU times, for the GPU timeline. Version 7 adds `GpuDevice` (tag 18): each GPU's runtime,
//! ordinal and name, and what its work records' queue field holds, so that a merge names a
//! CUDA device's tracks `GPU 0: NVIDIA H200` and `stream 7` rather than as HSA agents and
//! queues; a version-6 stream has none, and its GPU tracks keep the agent and queue names. A
//! version above [`FORMAT_VERSION`] is refused with a message naming the file and both
//! versions.
//!
//! # Crash safety
//!
//! The writer appends each chunk with one `write_all` of one buffer. A process killed at any
//! moment leaves every complete chunk intact; the reader checks each chunk's length, CRC-32
//! and sequence number, stops at the first that fails, and reports the file and byte offset
//! ([`StreamDamage`]) while keeping every record before it.
//!
//! # Time
//!
//! Every timestamp is CLOCK_MONOTONIC nanoseconds (the BPF clock). Within a chunk the tool
//! writes records sorted by [`Record::timestamp`]; [`MergedStreams`] merges many streams by
//! it in memory bounded by their number, reordering each stream within a small window (a
//! probe stream holds calls in return order). See
//! `docs/stream-format.md`.

pub mod codec;
mod crc32;
mod error;
mod gpu;
mod header;
mod merge;
mod reader;
mod record;
mod writer;

#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod packed_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod version_tests;

pub use crc32::crc32;
pub use error::{DamageKind, StreamDamage, StreamError};
pub use gpu::{UNKNOWN_ORDINAL, copy_kind, gpu_runtime, queue_ids};
pub use header::{
    CLOCK_MONOTONIC_ID, FORMAT_VERSION, HEADER_LEN, MAGIC, StreamHeader, StreamKind, monotonic_ns,
};
pub use merge::{DEFAULT_WINDOW, Merged, MergedRef, MergedStreams, TOOL_WINDOW};
pub use reader::StreamReader;
pub use record::{
    Annotation, ApiCall, Correlation, Decline, Dispatch, Drops, GpuCopy, GpuDevice, KernelName,
    Nondeterministic, ProcessName, Record, ReplayPass, ReplayStep, Restore, Snapshot, ThreadName,
    ToolWindow, annotation, replay_step, snapshot_mode,
};
pub use writer::{DEFAULT_CHUNK_THRESHOLD, StreamWriter};

/// Bytes of a chunk header: payload length, payload CRC-32, sequence number.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The largest payload a chunk may announce; a bigger length field means a corrupt header.
pub const MAX_CHUNK_PAYLOAD: usize = 16 * 1024 * 1024;
