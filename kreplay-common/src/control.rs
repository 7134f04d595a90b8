//! The control channel between `kreplay` and a kreplay-tool it loaded into a running process
//! (`docs/attach.md`): one Unix stream socket per session, which the CLI listens on and the
//! tool connects to from its own thread.
//!
//! Messages, in order: the CLI sends the settings, the [`crate::replay_config`] variables
//! `VAR=VALUE` as [`ReplaySettings::encode`] lists them, each ended by a NUL byte, the whole
//! ended by an empty entry (one more NUL): the one encoding of the settings, as in an
//! environment block. The tool answers one line: [`READY`], or `error: REASON`. Then the CLI
//! sends nothing more; during a replay session the tool sends a [`PROGRESS`] line when its
//! counters changed (at most twice a second, [`progress_line`]), and [`LIMIT`] once when the
//! session's `--max-dispatches` replays are all written. The CLI's end of the socket closing (its
//! `shutdown`, its exit, or its death by SIGKILL) is the signal to stop: the tool undoes what
//! it turned on, flushes its stream, answers [`DONE`] (when the CLI still listens) and becomes
//! inert.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::replay_config::{ConfigError, ReplaySettings};

/// The tool's line once the settings are in effect.
pub const READY: &str = "ready";
/// The tool's line once it stopped and its stream is flushed.
pub const DONE: &str = "done";
/// The tool's line once the session's `--max-dispatches` replays are written.
pub const LIMIT: &str = "limit";
/// The first word of the tool's progress line during a replay session:
/// `progress REPLAYED PASSES INSIDE_NS` (dispatches replayed, passes run, and nanoseconds the
/// process's threads spent inside kreplay, since the session began).
pub const PROGRESS: &str = "progress";
/// The exported tool function the CLI calls in the target (through ptrace) to start a
/// session: `int kreplay_attach(const char *socket_path)`.
pub const ENTRY: &str = "kreplay_attach";
/// The longest settings message accepted.
pub const MAX_MESSAGE: usize = 64 << 10;

/// What [`ENTRY`] returns.
pub mod entry {
    /// The control thread was started.
    pub const STARTED: i32 = 0;
    /// Another kreplay is attached.
    pub const BUSY: i32 = 1;
    /// The path argument was null or not a path.
    pub const BAD_PATH: i32 = 2;
    /// The thread could not be started.
    pub const NO_THREAD: i32 = 3;
    /// The tool caught a panic.
    pub const PANICKED: i32 = -1;
}

/// The settings message for `s`.
pub fn encode(s: &ReplaySettings) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in s.encode() {
        out.extend_from_slice(k.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out.push(0);
    out
}

/// Why a settings message was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    /// It ended before its closing empty entry.
    #[error("the settings message is incomplete")]
    Incomplete,
    /// An entry without `=`.
    #[error("a settings entry has no '='")]
    NoEquals,
    /// A setting the tool refuses.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The length of the first whole message in `buf` (with its closing NUL), if there is one.
pub fn message_len(buf: &[u8]) -> Option<usize> {
    if buf.first() == Some(&0) {
        return Some(1);
    }
    buf.windows(2).position(|w| w == [0, 0]).map(|i| i + 2)
}

/// The settings in message `msg` (as [`encode`] wrote it).
pub fn decode(msg: &[u8]) -> Result<ReplaySettings, MessageError> {
    let body = msg.strip_suffix(&[0]).ok_or(MessageError::Incomplete)?;
    let mut pairs = Vec::new();
    if !body.is_empty() {
        let body = body.strip_suffix(&[0]).ok_or(MessageError::Incomplete)?;
        for entry in body.split(|&b| b == 0) {
            let eq = entry
                .iter()
                .position(|&b| b == b'=')
                .ok_or(MessageError::NoEquals)?;
            pairs.push((
                OsStr::from_bytes(&entry[..eq]),
                OsStr::from_bytes(&entry[eq + 1..]),
            ));
        }
    }
    Ok(ReplaySettings::decode(pairs)?)
}

/// The socket's name inside the target's `/tmp`, for the target's own pid `nspid` (its pid in
/// its pid namespace) and a session `nonce`.
pub fn socket_name(nspid: u32, nonce: u64) -> String {
    format!("kreplay-ctl-{nspid}-{nonce:x}.sock")
}

/// The progress line for counters `c` (dispatches replayed, passes, nanoseconds inside).
pub fn progress_line(c: [u64; 3]) -> String {
    format!("{PROGRESS} {} {} {}", c[0], c[1], c[2])
}

/// The counters of a [`progress_line`], or `None` when `line` is not one.
pub fn parse_progress(line: &str) -> Option<[u64; 3]> {
    let mut words = line.strip_prefix(PROGRESS)?.strip_prefix(' ')?.split(' ');
    let mut c = [0u64; 3];
    for v in &mut c {
        *v = words.next()?.parse().ok()?;
    }
    words.next().is_none().then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_progress_line_reads_back_and_other_lines_are_not_one() {
        let c = [4, 12, 1_234_567_890];
        assert_eq!(progress_line(c), "progress 4 12 1234567890");
        assert_eq!(parse_progress(&progress_line(c)), Some(c));
        for other in [
            LIMIT,
            DONE,
            "progress",
            "progress 1 2",
            "progress 1 2 3 4",
            "progress 1 x 3",
            "progressive 1 2 3",
        ] {
            assert_eq!(parse_progress(other), None, "{other}");
        }
    }

    #[test]
    fn settings_round_trip_through_one_message_with_any_bytes_in_values() {
        let s = ReplaySettings {
            passes: Some(5),
            kernel: Some("gemm|a=b".into()),
            max_dispatches: Some(20),
            output_dir: Some(PathBuf::from("/t/x y\n.streams")),
            gpu_timeline: Some(true),
            ..Default::default()
        };
        let m = encode(&s);
        assert_eq!(
            m,
            b"KREPLAY_PASSES=5\0KREPLAY_KERNEL=gemm|a=b\0KREPLAY_MAX_DISPATCHES=20\0\
KREPLAY_OUTPUT_DIR=/t/x y\n.streams\0KREPLAY_GPU_TIMELINE=1\0\0"
        );
        assert_eq!(message_len(&[&m[..], b"junk"].concat()), Some(m.len()));
        assert_eq!(decode(&m), Ok(s));
        let empty = encode(&ReplaySettings::default());
        assert_eq!(empty, b"\0");
        assert_eq!(message_len(&empty), Some(1));
        assert_eq!(decode(&empty), Ok(ReplaySettings::default()));
    }

    #[test]
    fn broken_messages_are_refused_by_cause() {
        assert_eq!(message_len(b"KREPLAY_PASSES=5\0"), None);
        assert_eq!(decode(b"KREPLAY_PASSES=5"), Err(MessageError::Incomplete));
        assert_eq!(decode(b"KREPLAY_PASSES5\0\0"), Err(MessageError::NoEquals));
        assert_eq!(
            decode(b"KREPLAY_PASES=5\0\0"),
            Err(MessageError::Config(ConfigError::Unknown(
                "KREPLAY_PASES".into()
            )))
        );
        assert!(matches!(
            decode(b"KREPLAY_PASSES=0\0\0"),
            Err(MessageError::Config(ConfigError::Bad { .. }))
        ));
    }
}
