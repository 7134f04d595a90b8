//! What `kreplay trace` was asked to do, checked before anything is loaded, attached or
//! started: exactly one kind of target, ring and slot sizes the kernel accepts, `--lib` files
//! that exist. Also where the trace and its stream files go.
use std::path::{Path, PathBuf};

/// Most `--thread-slots` accepted: 113 MiB of kernel memory.
pub const MAX_THREAD_SLOTS: u32 = 1 << 18;

/// Why a request cannot be traced; the text names the flags the user typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Neither `-p`, `--all` nor a command.
    #[error("say what to trace: -p PID, --all, or a command after --")]
    NoTarget,
    /// More than one of `-p`, `--all` and a command.
    #[error("give only one of -p PID, --all, or a command after --")]
    SeveralTargets,
    /// `--ringbuf-bytes` is not a power of two of at least a page.
    #[error("--ringbuf-bytes must be a power of two of at least 4096, got {0}")]
    RingbufBytes(u32),
    /// `--thread-slots` is 0 or above [`MAX_THREAD_SLOTS`].
    #[error(
        "--thread-slots must be between 1 and {MAX_THREAD_SLOTS} (432 bytes of kernel memory each), got {0}"
    )]
    ThreadSlots(u32),
    /// A `--lib` file does not exist.
    #[error("library not found: {}", .0.display())]
    LibraryNotFound(PathBuf),
    /// `--children` without `-p`.
    #[error(
        "--children adds the descendants of -p PID; a command after -- is followed with its children already (--no-children turns that off)"
    )]
    ChildrenWithoutPid,
    /// `--no-children` without a command.
    #[error(
        "--no-children applies to a command after --; -p PID follows no children unless --children"
    )]
    NoChildrenWithoutCommand,
}

/// The target-related arguments of `kreplay trace`, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `-p PID`, repeatable.
    pub pids: Vec<u32>,
    /// `--all`.
    pub all: bool,
    /// The command after `--`.
    pub command: Vec<String>,
    /// `--env KEY=VALUE` for the command.
    pub env: Vec<(String, String)>,
    /// `--lib PATH`, repeatable.
    pub libs: Vec<PathBuf>,
    /// `--ringbuf-bytes`.
    pub ringbuf_bytes: u32,
    /// `--thread-slots`.
    pub thread_slots: u32,
    /// `--children`: follow the `-p` processes' descendants, present and future.
    pub children: bool,
    /// `--no-children`: trace the started command alone, not the processes it starts.
    pub no_children: bool,
}

/// What is traced, as asked (a command has no pid until it is started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// These running processes.
    Pids(Vec<u32>),
    /// Every process that maps a runtime.
    All,
    /// A command to start, with the environment it gets beyond kreplay's.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
        /// `--env` pairs.
        env: Vec<(String, String)>,
    },
}

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What is traced.
    pub mode: Mode,
    /// Extra runtime libraries to probe (`--lib`).
    pub libs: Vec<PathBuf>,
    /// Bytes of each CPU's ring.
    pub ringbuf_bytes: u32,
    /// Slots for calls in flight.
    pub thread_slots: u32,
    /// Follow the targets' descendants: the probes are attached for every process and the
    /// programs record only the followed ones.
    pub follow: bool,
}

impl Plan {
    /// Checks `req`, in the order the errors are reported; `exists` says whether a file exists.
    pub fn check(req: Request, exists: impl Fn(&Path) -> bool) -> Result<Plan, PlanError> {
        let modes = [!req.pids.is_empty(), req.all, !req.command.is_empty()];
        match modes.iter().filter(|&&m| m).count() {
            0 => return Err(PlanError::NoTarget),
            1 => {}
            _ => return Err(PlanError::SeveralTargets),
        }
        if !req.ringbuf_bytes.is_power_of_two() || req.ringbuf_bytes < 4096 {
            return Err(PlanError::RingbufBytes(req.ringbuf_bytes));
        }
        if !(1..=MAX_THREAD_SLOTS).contains(&req.thread_slots) {
            return Err(PlanError::ThreadSlots(req.thread_slots));
        }
        if let Some(lib) = req.libs.iter().find(|l| !exists(l)) {
            return Err(PlanError::LibraryNotFound(lib.clone()));
        }
        if req.children && req.pids.is_empty() {
            return Err(PlanError::ChildrenWithoutPid);
        }
        if req.no_children && req.command.is_empty() {
            return Err(PlanError::NoChildrenWithoutCommand);
        }
        let follow = req.children || (!req.command.is_empty() && !req.no_children);
        let mode = if req.all {
            Mode::All
        } else if !req.command.is_empty() {
            Mode::Command {
                argv: req.command,
                env: req.env,
            }
        } else {
            Mode::Pids(req.pids)
        };
        Ok(Plan {
            mode,
            libs: req.libs,
            ringbuf_bytes: req.ringbuf_bytes,
            thread_slots: req.thread_slots,
            follow,
        })
    }

    /// The started command's program (its `argv[0]`), when one is traced.
    pub fn program(&self) -> Option<&str> {
        match &self.mode {
            Mode::Command { argv, .. } => argv.first().map(String::as_str),
            _ => None,
        }
    }
}

/// Where the stream files of a trace written to `output` go: `FILE.streams` beside it.
pub fn streams_dir(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!("{name}.streams"))
}

/// The trace file's name for local time `tm`: `kreplay-<date>-<time>.pftrace`.
pub fn dated_output(tm: &libc::tm) -> PathBuf {
    PathBuf::from(format!(
        "kreplay-{:04}{:02}{:02}-{:02}{:02}{:02}.pftrace",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// The default trace file: [`dated_output`] for now, in the current directory.
pub fn default_output() -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes into the tm it is given; both pointers are valid.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm
    };
    dated_output(&tm)
}

#[cfg(test)]
mod tests;
