//! Loading a shared library into a running process: ptrace one of its threads, make it call
//! its own `dlopen` on the library, and let it run on exactly as before (`docs/inject.md`).
mod error;

pub mod call;
pub mod entry;
pub mod ptrace;
pub mod symbols;
pub mod target;

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

pub use error::InjectError;

use self::{
    call::{FAULT_RETURN, Interrupted, frame, interrupted_syscall},
    ptrace::Tracee,
    symbols::{Loader, Resolved},
    target::Placement,
};

/// `RTLD_NOW`: resolve every symbol at load, so a missing one fails the load, not a later call.
const RTLD_NOW: u64 = 2;
/// How long the thread may take to stop after `PTRACE_INTERRUPT`.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the injected `dlopen` (with the library's constructors) may run.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `dlerror` message read back.
const MAX_MESSAGE: usize = 512;

/// A library loaded into a process by [`load`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The process.
    pub pid: i32,
    /// The thread that made the call.
    pub tid: i32,
    /// `dlopen`'s handle, an address in the target.
    pub handle: u64,
    /// The path `dlopen` was given, in the target's mount namespace.
    pub path: PathBuf,
    /// True when the library was copied there because the target could not see it.
    pub copied: bool,
    /// The loader function called.
    pub dlopen: Resolved,
    /// The system call the thread was stopped in, restarted when it resumed.
    pub interrupted: Interrupted,
    /// How long the thread was held (interrupt to detach).
    pub pause: Duration,
    /// Of the pause: from `PTRACE_INTERRUPT` until the thread stopped.
    pub stop_wait: Duration,
    /// Of the pause: the `dlopen` call, from resuming the thread until it returned.
    pub call: Duration,
}

/// Everything read before the attach: the checks that can refuse without touching the target.
#[derive(Debug, Clone)]
pub struct Plan {
    pid: i32,
    start_time: u64,
    library: PathBuf,
    placement: Placement,
    loader: Loader,
    call_timeout: Duration,
}

impl Plan {
    /// Checks that `library` can be loaded into `pid`: an x86_64 target, not already loaded,
    /// a `dlopen` found in its mappings, and a path to the library it can open.
    pub fn prepare(pid: i32, library: &Path) -> Result<Plan, InjectError> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            return Err(InjectError::Unsupported);
        }
        let library = library
            .canonicalize()
            .map_err(|source| InjectError::Library {
                what: "finding",
                path: library.to_path_buf(),
                source,
            })?;
        target::check_arch(pid)?;
        refuse_if_stopped(pid)?;
        let start_time = target::start_time(pid)?;
        let maps = target::maps(pid)?;
        let placement = target::place_library(pid, &library)?;
        refuse_if_loaded(pid, &maps, &library, &placement)?;
        let loader = symbols::find_loader(pid, &maps)?;
        Ok(Plan {
            pid,
            start_time,
            library,
            placement,
            loader,
            call_timeout: CALL_TIMEOUT,
        })
    }

    /// Sets how long `dlopen` and the library's constructors may run (default [`CALL_TIMEOUT`]).
    pub fn call_timeout(mut self, timeout: Duration) -> Plan {
        self.call_timeout = timeout;
        self
    }

    /// The path `dlopen` will be given, in the target's mount namespace.
    pub fn target_path(&self) -> &Path {
        &self.placement.path
    }

    /// Attaches, calls `dlopen`, restores and detaches.
    pub fn execute(self) -> Result<Loaded, InjectError> {
        let pid = self.pid;
        let mut _copy = None;
        if self.placement.needs_copy {
            target::copy_in(&self.library, &self.placement)?;
            _copy = Some(RemoveOnDrop(self.placement.here.clone()));
            tracing::info!(
                pid,
                "{} is not visible in the process's mount namespace: copied to {}",
                self.library.display(),
                self.placement.path.display()
            );
        }
        let (mut tracee, held, stop_wait) = stop_one_thread(pid, self.start_time)?;
        let tid = tracee.tid();
        // Another injector may have loaded it meanwhile; the maps are stable while we hold
        // this thread only against this thread's own loads, so this is a best-effort check.
        refuse_if_loaded(pid, &target::maps(pid)?, &self.library, &self.placement)?;
        let saved = tracee.save_regs()?;
        let interrupted = interrupted_syscall(saved.orig_rax, saved.rax);
        let mut data = self.placement.path.as_os_str().as_bytes().to_vec();
        data.push(0);
        let f = frame(saved.rsp, data.len());
        tracee.write_mem(f.rsp, &FAULT_RETURN.to_le_bytes())?;
        tracee.write_mem(f.data, &data)?;
        let call_start = Instant::now();
        let handle = call::run_call(
            &mut tracee,
            &saved,
            self.loader.dlopen.addr,
            &[f.data, RTLD_NOW],
            f.rsp,
            self.call_timeout,
        )?;
        let call = call_start.elapsed();
        let message = if handle == 0 {
            Some(self.dlerror(&mut tracee, &saved, f.rsp))
        } else {
            None
        };
        tracee.detach()?;
        let pause = held.elapsed();
        if let Some(message) = message {
            return Err(InjectError::DlopenFailed {
                pid,
                path: self.placement.path.clone(),
                message,
            });
        }
        tracing::debug!(
            pid,
            tid,
            ?interrupted,
            ?pause,
            "loaded {}",
            self.placement.path.display()
        );
        Ok(Loaded {
            pid,
            tid,
            handle,
            path: self.placement.path,
            copied: self.placement.needs_copy,
            dlopen: self.loader.dlopen,
            interrupted,
            pause,
            stop_wait,
            call,
        })
    }

    /// The target's `dlerror()` text after a failed `dlopen`, or why it is unknown.
    fn dlerror(&self, tracee: &mut Tracee, saved: &ptrace::Regs, rsp: u64) -> String {
        let Some(addr) = self.loader.dlerror else {
            return format!("{} returned NULL", self.loader.dlopen.symbol);
        };
        let text = tracee
            .write_mem(rsp, &FAULT_RETURN.to_le_bytes())
            .and_then(|()| call::run_call(tracee, saved, addr, &[], rsp, STOP_TIMEOUT))
            .and_then(|p| {
                if p == 0 {
                    return Ok(Vec::new());
                }
                read_c_string(tracee, p)
            });
        match text {
            Ok(t) if !t.is_empty() => String::from_utf8_lossy(&t).into_owned(),
            Ok(_) => "dlopen returned NULL and dlerror said nothing".into(),
            Err(e) => format!("dlopen returned NULL (reading dlerror: {e})"),
        }
    }
}

/// Removes the library's copy in the target's `/tmp` when the injection ends: once mapped
/// (or failed) the name is no longer needed, and nothing is left behind there. The target's
/// maps keep the name, marked `(deleted)`.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            tracing::warn!("removing the copy {}: {e}", self.0.display());
        }
    }
}

/// Reads a NUL-terminated string of at most [`MAX_MESSAGE`] bytes, a page-safe chunk at a time.
fn read_c_string(tracee: &mut Tracee, mut addr: u64) -> Result<Vec<u8>, InjectError> {
    let mut out = Vec::new();
    while out.len() < MAX_MESSAGE {
        let to_page_end = (4096 - (addr % 4096)) as usize;
        let chunk = tracee.read_mem(addr, to_page_end.min(MAX_MESSAGE - out.len()))?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Ok(out);
        }
        addr += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn refuse_if_stopped(pid: i32) -> Result<(), InjectError> {
    match target::state(pid) {
        Some('T') => Err(InjectError::Stopped { pid }),
        _ => Ok(()),
    }
}

fn refuse_if_loaded(
    pid: i32,
    maps: &[target::Mapping],
    library: &Path,
    placement: &Placement,
) -> Result<(), InjectError> {
    match target::loaded_as(maps, library, placement) {
        Some(m) => Err(InjectError::AlreadyLoaded {
            pid,
            library: library.to_path_buf(),
            mapped: m.path.clone(),
        }),
        None => Ok(()),
    }
}

/// Seizes and stops one thread of `pid` (refusing a stopped process, and one whose start time
/// is no longer `start_time`: a reused pid); returns it, when the hold began, and how long the
/// stop took.
pub(crate) fn stop_one_thread(
    pid: i32,
    start_time: u64,
) -> Result<(Tracee, Instant, Duration), InjectError> {
    refuse_if_stopped(pid)?;
    let tid = pick_thread(pid)?;
    let mut tracee = Tracee::seize(pid, tid).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => InjectError::ProcessGone { pid },
        Some(libc::EPERM) if matches!(target::state(pid), None | Some('Z' | 'X')) => {
            InjectError::ProcessGone { pid }
        }
        Some(libc::EPERM) => InjectError::PtraceDenied {
            pid,
            reason: target::denied_reason(&target::DenialFacts::read(pid)),
        },
        _ => InjectError::Ptrace {
            call: "ptrace(PTRACE_SEIZE)",
            tid,
            source: e,
        },
    })?;
    let held = Instant::now();
    tracee.interrupt(STOP_TIMEOUT)?;
    let stop_wait = held.elapsed();
    // The pid may have been reused since the plan: the same process has the same start.
    if target::start_time(pid).ok() != Some(start_time) {
        return Err(InjectError::ProcessGone { pid });
    }
    Ok((tracee, held, stop_wait))
}

/// `futex`'s system call number on x86_64.
const SYS_FUTEX: i64 = 202;

/// The thread to make the call: one asleep in `futex` (an idle thread, or one waiting for a
/// lock: stopped at the system call it holds none of the C library's locks that `dlopen` and
/// `pthread_create` take, where a busy thread may be stopped inside `malloc` holding one),
/// else the main thread, else the first live one (a zombie leader whose other threads run).
fn pick_thread(pid: i32) -> Result<i32, InjectError> {
    let task =
        |tid: i32, file: &str| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/{file}"));
    let state = |tid: i32| {
        task(tid, "stat")
            .ok()
            .and_then(|s| s[s.rfind(')')? + 1..].trim_start().chars().next())
    };
    let live = |tid: i32| state(tid).is_some_and(|c| !matches!(c, 'Z' | 'X'));
    let in_futex = |tid: i32| {
        state(tid) == Some('S')
            && task(tid, "syscall")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok())
                == Some(SYS_FUTEX)
    };
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|_| InjectError::ProcessGone { pid })?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    if let Some(&t) = tids.iter().find(|&&t| in_futex(t)) {
        return Ok(t);
    }
    if live(pid) {
        return Ok(pid);
    }
    tids.into_iter()
        .find(|&tid| live(tid))
        .ok_or(InjectError::ProcessGone { pid })
}

/// Loads `library` into the running process `pid` with the process's own `dlopen(path,
/// RTLD_NOW)`, called in one of its threads, which then runs on as before.
pub fn load(pid: i32, library: &Path) -> Result<Loaded, InjectError> {
    Plan::prepare(pid, library)?.execute()
}
