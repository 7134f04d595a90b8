//! The fixed file header: who wrote the stream, with which clock, and when.

use std::io::Read;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::crc32::crc32;
use super::error::StreamError;

/// The first eight bytes of every stream file.
pub const MAGIC: [u8; 8] = *b"KRPLSTRM";
/// The format version this build writes (and the newest it reads; it reads every older one).
/// 2: the tool's `Snapshot`/`Restore`/`ReplayPass` carry pid and tid, and `ToolWindow` exists.
/// 3: `Restore` counts the regions whose write-back failed.
/// 4: `ApiCall` is written packed, its zero words left out (tag 15).
/// 5: user annotations (roctx, NVTX: `Annotation`, tag 16).
/// 6: `Dispatch` carries its group and private segment sizes; GPU copies and memsets
/// (`GpuCopy`, tag 17).
/// 7: GPU descriptions (`GpuDevice`, tag 18): runtime, ordinal, name, what queue ids hold.
/// 8: `ReplayPass` carries the GPU's own time of the pass (`gpu_ns`).
pub const FORMAT_VERSION: u16 = 8;
/// Bytes of a version-1 to -8 header; a newer header may be longer (its length field says).
pub const HEADER_LEN: usize = 40;
/// `clock_id` value for CLOCK_MONOTONIC (Linux's clockid 1), the clock of every timestamp.
pub const CLOCK_MONOTONIC_ID: u16 = 1;

/// Which program produced a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// The injected tool (`tool-<pid>.krs`).
    Tool,
    /// The CLI's BPF probes (`probes-<pid>.krs`).
    Probes,
    /// A kind a newer writer knows; its records are still readable.
    Other(u16),
}

impl StreamKind {
    fn code(self) -> u16 {
        match self {
            Self::Tool => 1,
            Self::Probes => 2,
            Self::Other(c) => c,
        }
    }

    fn from_code(c: u16) -> Self {
        match c {
            1 => Self::Tool,
            2 => Self::Probes,
            c => Self::Other(c),
        }
    }

    /// The conventional file name of this kind's stream for process `pid`.
    pub fn file_name(self, pid: u32) -> String {
        match self {
            Self::Tool => format!("tool-{pid}.krs"),
            Self::Probes => format!("probes-{pid}.krs"),
            Self::Other(c) => format!("kind{c}-{pid}.krs"),
        }
    }
}

/// The decoded file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    /// Format version the file was written with.
    pub version: u16,
    /// The producer.
    pub kind: StreamKind,
    /// The producer's process id.
    pub pid: u32,
    /// Clock of every timestamp ([`CLOCK_MONOTONIC_ID`]).
    pub clock_id: u16,
    /// CLOCK_MONOTONIC ns when the file was created.
    pub created_monotonic_ns: u64,
    /// Wall-clock ns since the Unix epoch at the same moment (to place the run in real time).
    pub created_realtime_ns: u64,
}

impl StreamHeader {
    /// A header for a stream `kind` of process `pid`, stamped now.
    pub fn new(kind: StreamKind, pid: u32) -> Self {
        Self {
            version: FORMAT_VERSION,
            kind,
            pid,
            clock_id: CLOCK_MONOTONIC_ID,
            created_monotonic_ns: monotonic_ns(),
            created_realtime_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        }
    }

    /// The header's bytes, its CRC-32 last.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10..12].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        b[12..14].copy_from_slice(&self.kind.code().to_le_bytes());
        b[14..16].copy_from_slice(&self.clock_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.pid.to_le_bytes());
        b[20..28].copy_from_slice(&self.created_monotonic_ns.to_le_bytes());
        b[28..36].copy_from_slice(&self.created_realtime_ns.to_le_bytes());
        let crc = crc32(&b[..HEADER_LEN - 4]);
        b[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks a header from the start of `src`; returns it and its length in bytes.
    pub fn read(src: &mut impl Read, path: &Path) -> Result<(Self, usize), StreamError> {
        let read_err = |needed: usize, source| StreamError::ReadHeader {
            path: path.to_path_buf(),
            needed,
            source,
        };
        let bad = |what: String| StreamError::BadHeader {
            path: path.to_path_buf(),
            what,
        };
        let mut fixed = [0u8; 12];
        src.read_exact(&mut fixed)
            .map_err(|e| read_err(HEADER_LEN, e))?;
        let magic: [u8; 8] = fixed[0..8].try_into().expect("8-byte slice");
        if magic != MAGIC {
            return Err(StreamError::BadMagic {
                path: path.to_path_buf(),
                found: magic,
            });
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version == 0 || version > FORMAT_VERSION {
            return Err(StreamError::UnsupportedVersion {
                path: path.to_path_buf(),
                version,
                supported: FORMAT_VERSION,
            });
        }
        let len = usize::from(u16::from_le_bytes([fixed[10], fixed[11]]));
        if len < HEADER_LEN {
            return Err(bad(format!("header length {len} < {HEADER_LEN}")));
        }
        let mut b = vec![0u8; len];
        b[..12].copy_from_slice(&fixed);
        src.read_exact(&mut b[12..]).map_err(|e| read_err(len, e))?;
        let stored = u32::from_le_bytes(b[len - 4..].try_into().expect("4-byte slice"));
        let computed = crc32(&b[..len - 4]);
        if stored != computed {
            return Err(bad(format!(
                "checksum {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8-byte slice"));
        let header = Self {
            version,
            kind: StreamKind::from_code(u16_at(12)),
            clock_id: u16_at(14),
            pid: u32::from_le_bytes(b[16..20].try_into().expect("4-byte slice")),
            created_monotonic_ns: u64_at(20),
            created_realtime_ns: u64_at(28),
        };
        // Every consumer compares times across streams: a stream on another clock would be
        // placed at meaningless offsets, so it is refused rather than read.
        if header.clock_id != CLOCK_MONOTONIC_ID {
            return Err(StreamError::UnsupportedClock {
                path: path.to_path_buf(),
                clock_id: header.clock_id,
                known: CLOCK_MONOTONIC_ID,
            });
        }
        Ok((header, len))
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_MONOTONIC always exists on Linux;
    // clock_gettime writes only through the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
