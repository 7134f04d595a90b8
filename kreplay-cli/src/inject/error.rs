//! The refusals and failures of an injection, each one clear line naming what failed.
use std::path::PathBuf;

/// Why a library could not be loaded into a running process.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The process does not exist (or exited, or its pid now names another process).
    #[error("process {pid} is gone (exited before or during the injection)")]
    ProcessGone {
        /// The target process.
        pid: i32,
    },
    /// The process is stopped (SIGSTOP, a job-control stop): running one of its threads for
    /// the call would change that.
    #[error(
        "process {pid} is stopped (SIGSTOP or a job-control stop): continue it first (kill -CONT {pid})"
    )]
    Stopped {
        /// The target process.
        pid: i32,
    },
    /// The target's executable is not an x86_64 ELF program.
    #[error("process {pid} is not an x86_64 program ({what}): injection supports x86_64 only")]
    NotX86_64 {
        /// The target process.
        pid: i32,
        /// What its executable is instead.
        what: String,
    },
    /// `ptrace(PTRACE_SEIZE)` was refused.
    #[error("ptrace(PTRACE_SEIZE) of process {pid} was denied: {reason}")]
    PtraceDenied {
        /// The target process.
        pid: i32,
        /// The likely cause, from [`denied_reason`](super::target::denied_reason).
        reason: String,
    },
    /// The library is already mapped in the target.
    #[error("{library} is already loaded in process {pid} (mapped as {mapped})")]
    AlreadyLoaded {
        /// The target process.
        pid: i32,
        /// The library asked for.
        library: PathBuf,
        /// The path the target's mappings show for it.
        mapped: String,
    },
    /// The library whose function was to be called is not loaded.
    #[error("{library} is not loaded in process {pid}")]
    NotLoaded {
        /// The target process.
        pid: i32,
        /// The library.
        library: PathBuf,
    },
    /// The library has no such exported function.
    #[error("no {symbol} to call in process {pid}: {detail}")]
    NoEntry {
        /// The target process.
        pid: i32,
        /// The function.
        symbol: String,
        /// Why it was not found.
        detail: String,
    },
    /// Neither `dlopen` nor `__libc_dlopen_mode` was found in the target's mappings.
    #[error("no dlopen found in process {pid}: {detail}")]
    NoDlopen {
        /// The target process.
        pid: i32,
        /// Which libraries were searched.
        detail: String,
    },
    /// The library file cannot be used (missing, unreadable, or not copyable into the target).
    #[error("{what} {path}: {source}")]
    Library {
        /// The operation that failed.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Reading the target's `/proc` files failed.
    #[error("reading {path}: {source}")]
    Proc {
        /// The `/proc` file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A ptrace request or wait failed after the attach.
    #[error("{call} on thread {tid}: {source}")]
    Ptrace {
        /// The request, e.g. `ptrace(PTRACE_GETREGS)`.
        call: &'static str,
        /// The traced thread.
        tid: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// A stop did not come within its timeout.
    #[error("thread {tid}: timed out after {ms} ms waiting for {waiting_for}")]
    Timeout {
        /// The traced thread.
        tid: i32,
        /// The timeout.
        ms: u128,
        /// The stop being waited for.
        waiting_for: &'static str,
    },
    /// The injected call ended somewhere other than its fault return address.
    #[error("the dlopen call in thread {tid} {what}")]
    CallFailed {
        /// The traced thread.
        tid: i32,
        /// What happened instead.
        what: String,
    },
    /// `dlopen` returned NULL.
    #[error("dlopen({path}) in process {pid} failed: {message}")]
    DlopenFailed {
        /// The target process.
        pid: i32,
        /// The path given to dlopen, in the target's view.
        path: PathBuf,
        /// What `dlerror` said.
        message: String,
    },
    /// Not built for x86_64 Linux.
    #[error("injection is implemented for x86_64 Linux only")]
    Unsupported,
}
