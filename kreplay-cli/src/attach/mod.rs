//! Giving a running process kreplay-tool's work without a restart (`docs/attach.md`): the
//! tool is loaded with [`crate::inject`] (or found loaded by an earlier session), its
//! `kreplay_attach` entry is called in the process with the path of a Unix socket this module
//! listens on, and the settings go over that socket ([`kreplay_common::control`]). The session
//! lasts as long as the socket: [`Session::end`] closes it and waits for the tool's `done`;
//! kreplay's exit or death closes it too, and the tool stops on its own.

mod channel;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kreplay_common::control::{self, entry};
use kreplay_common::replay_config::ReplaySettings;

pub use channel::{Heard, Session};

use crate::inject::{self, InjectError};

/// How long the tool has to connect after its entry was called.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the tool has to answer the settings (it loads CUPTI meanwhile).
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the tool has to stop and flush once the session ends.
pub const DONE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a session could not be opened, or ended badly: one line each.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// Loading the tool, or calling its entry, failed.
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// A local operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another kreplay has a session with this process.
    #[error("process {pid}: another kreplay is attached to it (one session at a time)")]
    Busy {
        /// The target process.
        pid: i32,
    },
    /// The tool's entry refused for another reason.
    #[error(
        "process {pid}: kreplay-tool's {} returned {code} ({why})",
        control::ENTRY
    )]
    Entry {
        /// The target process.
        pid: i32,
        /// What it returned.
        code: i32,
        /// What that means.
        why: &'static str,
    },
    /// The tool did not connect, or did not answer, in time.
    #[error("process {pid}: kreplay-tool did not {what} within {} ms", .ms)]
    Timeout {
        /// The target process.
        pid: i32,
        /// What was waited for.
        what: &'static str,
        /// The limit.
        ms: u128,
    },
    /// The tool refused the settings.
    #[error("process {pid}: kreplay-tool refused: {reason}")]
    Refused {
        /// The target process.
        pid: i32,
        /// Its reason.
        reason: String,
    },
    /// An HSA process started without the tool: ROCR offers a tool its API table only at
    /// `hsa_init`.
    #[error(
        "process {pid} uses ROCm (HSA), whose runtime loads tools only at hsa_init: kreplay-tool can join only a process started with HSA_TOOLS_LIB={} KREPLAY_ATTACH=1",
        .tool.display()
    )]
    HsaNeedsOptIn {
        /// The target process.
        pid: i32,
        /// The tool it must be started with.
        tool: PathBuf,
    },
    /// The tool's answer made no sense.
    #[error("process {pid}: unexpected answer from kreplay-tool: {line:?}")]
    Protocol {
        /// The target process.
        pid: i32,
        /// What it said.
        line: String,
    },
}

/// What opening a session took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opened {
    /// True when the tool was loaded now (false: an earlier session loaded it).
    pub loaded_now: bool,
    /// How long the process's thread was held for the `dlopen` (when loaded now).
    pub load_pause: Duration,
    /// How long it was held for the entry call.
    pub entry_pause: Duration,
    /// The process's pid in its own pid namespace (the tool's stream is `tool-NSPID.krs`).
    pub nspid: u32,
}

/// The process's pid in its own pid namespace (`NSpid`'s last field), and its effective uid
/// and gid.
fn identity(pid: i32) -> Result<(u32, u32, u32), AttachError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| InjectError::ProcessGone { pid })?;
    parse_identity(&status).ok_or_else(|| AttachError::Io {
        what: format!("reading /proc/{pid}/status"),
        source: std::io::Error::other("no NSpid, Uid or Gid line"),
    })
}

/// [`identity`] from the text of `/proc/PID/status`.
fn parse_identity(status: &str) -> Option<(u32, u32, u32)> {
    let field = |name: &str, n: Option<usize>| {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let mut it = line[name.len()..].split_whitespace();
        let v = match n {
            Some(i) => it.nth(i)?,
            None => it.last()?,
        };
        v.parse::<u32>().ok()
    };
    Some((
        field("NSpid:", None)?,
        field("Uid:", Some(1))?,
        field("Gid:", Some(1))?,
    ))
}

/// True when one of the mappings is a file whose name starts with `prefix`.
fn maps_file(maps: &[inject::target::Mapping], prefix: &str) -> bool {
    maps.iter().any(|m| {
        Path::new(&m.path)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix))
    })
}

/// True when the mappings hold the HSA runtime and no CUDA driver.
fn hsa_only(maps: &[inject::target::Mapping]) -> bool {
    maps_file(maps, "libhsa-runtime64.so") && !maps_file(maps, "libcuda.so")
}

/// True when process `pid` maps the CUDA driver.
pub fn maps_cuda(pid: i32) -> Result<bool, AttachError> {
    Ok(maps_file(&inject::target::maps(pid)?, "libcuda.so"))
}

/// The socket's path in the target's view and in ours (through `/proc/PID/root`).
fn socket_paths(pid: i32, nspid: u32) -> (PathBuf, PathBuf) {
    let nonce = {
        let mut b = [0u8; 8];
        // SAFETY: fills `b`.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
        if n == 8 {
            u64::from_ne_bytes(b)
        } else {
            u64::from(std::process::id()) << 32 | u64::from(nspid)
        }
    };
    let there = Path::new("/tmp").join(control::socket_name(nspid, nonce));
    let here =
        PathBuf::from(format!("/proc/{pid}/root")).join(there.strip_prefix("/").expect("absolute"));
    (there, here)
}

/// Opens a session: loads `tool` into `pid` unless an earlier session did, starts the tool's
/// session thread and hands it `settings`.
pub fn open(
    pid: i32,
    tool: &Path,
    settings: &ReplaySettings,
) -> Result<(Session, Opened), AttachError> {
    let loaded = inject::entry::loaded(pid, tool)?.is_some();
    if !loaded && hsa_only(&inject::target::maps(pid)?) {
        return Err(AttachError::HsaNeedsOptIn {
            pid,
            tool: tool.canonicalize().unwrap_or_else(|_| tool.to_path_buf()),
        });
    }
    let (nspid, uid, gid) = identity(pid)?;
    let (there, here) = socket_paths(pid, nspid);
    let listener = channel::Listener::bind(&here, uid, gid)?;
    let mut opened = Opened {
        nspid,
        ..Default::default()
    };
    if !loaded {
        let loaded = inject::load(pid, tool)?;
        opened.loaded_now = true;
        opened.load_pause = loaded.pause;
        tracing::info!(pid, pause = ?loaded.pause, "kreplay-tool loaded");
    } else {
        tracing::info!(
            pid,
            "kreplay-tool is loaded already (an earlier session): reusing it"
        );
    }
    use std::os::unix::ffi::OsStrExt;
    let call = inject::entry::call(pid, tool, control::ENTRY, there.as_os_str().as_bytes())?;
    opened.entry_pause = call.pause;
    match call.result {
        entry::STARTED => {}
        entry::BUSY => return Err(AttachError::Busy { pid }),
        code => {
            let why = match code {
                entry::BAD_PATH => "bad socket path",
                entry::NO_THREAD => "no thread could be started",
                entry::PANICKED => "it panicked",
                _ => "unknown result",
            };
            return Err(AttachError::Entry { pid, code, why });
        }
    }
    let session = listener.accept(pid, CONNECT_TIMEOUT)?;
    let session = session.configure(settings, READY_TIMEOUT)?;
    Ok((session, opened))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_innermost_pid_and_the_effective_ids() {
        let status = "Name:\tpython3\nUid:\t1000\t1001\t1000\t1000\nGid:\t50\t51\t50\t50\n\
                      NSpid:\t81234\t17\n";
        assert_eq!(parse_identity(status), Some((17, 1001, 51)));
        assert_eq!(parse_identity("Uid:\t0\t0\t0\t0\n"), None);
    }

    #[test]
    fn only_an_hsa_process_without_a_cuda_driver_needs_the_opt_in() {
        let maps = |paths: &[&str]| -> Vec<inject::target::Mapping> {
            let text: String = paths
                .iter()
                .map(|p| format!("7f0000000000-7f0000001000 r-xp 00000000 08:01 42 {p}\n"))
                .collect();
            inject::target::parse_maps(&text)
        };
        assert!(hsa_only(&maps(&[
            "/opt/rocm/lib/libhsa-runtime64.so.1.14.0"
        ])));
        assert!(!hsa_only(&maps(&[
            "/opt/rocm/lib/libhsa-runtime64.so.1",
            "/usr/lib/libcuda.so.580.1"
        ])));
        assert!(!hsa_only(&maps(&["/usr/local/nvidia/lib64/libcuda.so.1"])));
    }

    #[test]
    fn the_socket_lies_in_the_targets_tmp_seen_through_its_root() {
        let (there, here) = socket_paths(4321, 17);
        let name = there.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("kreplay-ctl-17-") && name.ends_with(".sock"),
            "{name}"
        );
        assert_eq!(there.parent(), Some(Path::new("/tmp")));
        assert_eq!(here, Path::new("/proc/4321/root/tmp").join(name));
    }
}
