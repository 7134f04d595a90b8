//! The tool's stream file and the process-wide recorder: where merged rows go, the
//! background thread that flushes them on a size threshold or a timer, and the process
//! lifecycle hooks that protect them: a last flush at exit, no recording (and no lock taken)
//! in a forked child, whose inherited locks may be held by threads that do not exist there,
//! and the cached process id, which a forked child reads afresh.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use kreplay_common::stream::{ProcessName, StreamError, StreamHeader, StreamKind, StreamWriter};

use super::config::{ENV_OUTPUT_DIR, RecorderConfig};
use super::lock;
use super::recorder::{FlushStats, Recorder};
use super::thread_buffer::forget_cached_tid;

/// Writes one recorder's merged rows to `<dir>/tool-<pid>.krs`, creating the file on the
/// first flush (and a new one if the process forked since).
pub struct StreamSink {
    dir: Option<PathBuf>,
    open: Option<(u32, StreamWriter<File>)>,
}

impl StreamSink {
    /// A sink writing under `dir`; with `None`, flushes discard the merged rows.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir, open: None }
    }

    /// A sink writing under `$KREPLAY_OUTPUT_DIR`.
    pub fn from_env() -> Self {
        Self::new(std::env::var_os(ENV_OUTPUT_DIR).map(PathBuf::from))
    }

    /// The file this process writes to, if a directory is set.
    pub fn path(&self) -> Option<PathBuf> {
        let pid = std::process::id();
        self.dir
            .as_ref()
            .map(|d| d.join(StreamKind::Tool.file_name(pid)))
    }

    /// Merges `rec` and writes its rows; without a directory, merges and discards them.
    pub fn flush(&mut self, rec: &Recorder) -> Result<FlushStats, StreamError> {
        let pid = std::process::id();
        let Some(path) = self.path() else {
            rec.merge();
            let (rows, correlations) = rec.take_merged();
            let records = (rows.len() + correlations.len()) as u64;
            return Ok(FlushStats {
                records,
                dropped: 0,
            });
        };
        if self.open.as_ref().is_none_or(|(p, _)| *p != pid) {
            if let Some(dir) = &self.dir {
                std::fs::create_dir_all(dir).map_err(|source| StreamError::Create {
                    path: dir.clone(),
                    source,
                })?;
            }
            let mut w = StreamWriter::create(&path, &StreamHeader::new(StreamKind::Tool, pid))?;
            let name = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
            w.push(
                &ProcessName {
                    pid,
                    name: name.trim_end().to_owned(),
                }
                .into(),
            )?;
            for d in super::devices::known() {
                w.push(&d.into())?;
            }
            // No tracing during the exit flush: the subscriber's thread-locals may be gone.
            if !exiting() {
                tracing::debug!(path = %path.display(), "opened tool stream");
            }
            self.open = Some((pid, w));
        }
        let (_, w) = self.open.as_mut().expect("opened above");
        rec.flush_to(w)
    }
}

static GLOBAL: OnceLock<Recorder> = OnceLock::new();
static GLOBAL_SINK: OnceLock<Mutex<StreamSink>> = OnceLock::new();
static FLUSHER_STARTED: AtomicBool = AtomicBool::new(false);

/// The tool's process-wide recorder, configured from the environment on first use.
pub fn global() -> &'static Recorder {
    GLOBAL.get_or_init(|| {
        install_fork_guard();
        Recorder::new(RecorderConfig::from_env())
    })
}

/// The global recorder if something already made it (never makes it: no lock, no alloc).
pub(super) fn global_if_started() -> Option<&'static Recorder> {
    GLOBAL.get()
}

fn global_sink() -> &'static Mutex<StreamSink> {
    GLOBAL_SINK.get_or_init(|| Mutex::new(StreamSink::from_env()))
}

/// Flushes the global recorder to the tool's stream file now (on request, and at exit).
pub fn flush_global() -> Result<FlushStats, StreamError> {
    let mut sink = lock(global_sink());
    sink.flush(global())
}

/// Flushes what the global recorder holds to the current stream file, then sends later
/// flushes to `<dir>/tool-<pid>.krs` (nothing is written while `dir` is `None`). Used by a
/// session of `kreplay -p PID`, which names its own stream directory.
pub fn set_output_dir(dir: Option<PathBuf>) -> Result<FlushStats, StreamError> {
    let mut sink = lock(global_sink());
    let stats = sink.flush(global());
    *sink = StreamSink::new(dir);
    stats
}

/// Set while the flusher sleeps without a timer (between attach sessions).
static FLUSHER_PAUSED: AtomicBool = AtomicBool::new(false);
static FLUSHER: OnceLock<std::thread::Thread> = OnceLock::new();

/// Makes the flusher thread sleep until [`resume_global_flusher`] (no timer wake-ups).
pub fn pause_global_flusher() {
    FLUSHER_PAUSED.store(true, Ordering::Release);
}

/// Wakes the flusher thread paused by [`pause_global_flusher`] (or starts nothing if none).
pub fn resume_global_flusher() {
    FLUSHER_PAUSED.store(false, Ordering::Release);
    if let Some(t) = FLUSHER.get() {
        t.unpark();
    }
}

/// Starts the background thread that flushes the global recorder every `interval`, or
/// sooner when a buffer passes the size threshold. Later calls do nothing.
pub fn start_global_flusher(interval: Duration) -> std::io::Result<()> {
    if FLUSHER_STARTED.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let handle = std::thread::Builder::new()
        .name("kreplay-flush".into())
        .spawn(move || {
            loop {
                if FLUSHER_PAUSED.load(Ordering::Acquire) {
                    std::thread::park();
                    continue;
                }
                std::thread::park_timeout(interval);
                global().take_flush_request();
                if let Err(e) = flush_global() {
                    tracing::warn!("kreplay: flushing the tool stream failed: {e}");
                }
            }
        });
    match handle {
        Ok(h) => {
            let _ = FLUSHER.set(h.thread().clone());
            global().set_flush_waker(Some(h.thread().clone()));
            Ok(())
        }
        Err(e) => {
            FLUSHER_STARTED.store(false, Ordering::Release);
            Err(e)
        }
    }
}

/// Registers, once, an `atexit` handler that flushes the global recorder; false if libc
/// refused it.
pub fn install_exit_flush() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    // SAFETY: `exit_flush` is an `extern "C" fn()` that never unwinds (it catches panics).
    *INSTALLED.get_or_init(|| unsafe { libc::atexit(exit_flush) } == 0)
}

/// Set once the exit flush starts: from then on nothing logs through `tracing` (the main
/// thread's thread-locals, the log subscriber's among them, are destroyed before `atexit`
/// handlers run, and a log event would panic and abandon the flush).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether the process is in its exit flush (or the tool is unloading): log nothing then.
pub fn exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// Marks the tool's teardown (`OnUnload`, often called from the application's exit path):
/// the flushes that follow log nothing through `tracing`.
pub fn enter_teardown() {
    EXITING.store(true, Ordering::Relaxed);
}

extern "C" fn exit_flush() {
    enter_teardown();
    let _ = std::panic::catch_unwind(|| {
        crate::fault::point("exit_flush");
        crate::warn_once::print_repeated_once();
        // In a forked child the recorder is disabled: its locks may be held by threads that
        // were not copied, so touch nothing.
        if global_if_started().is_some_and(|r| r.is_enabled())
            && let Err(e) = flush_global()
        {
            eprintln!("kreplay: the exit flush of the tool stream failed: {e}");
        }
    });
}

/// Registers, once, a fork handler that disables the global recorder in the child.
pub(super) fn install_fork_guard() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `in_forked_child` is an `extern "C" fn()` that never unwinds; no prepare or
        // parent handler is passed.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
        if rc != 0 {
            tracing::warn!("kreplay: pthread_atfork failed ({rc}); a forked child would record");
        }
    });
}

/// The process id once read (0: not read yet, or forgotten in a forked child).
static PID: AtomicU32 = AtomicU32::new(0);

/// The calling process's id, cached: `getpid` is a real system call, several times the whole
/// cost of recording a row (docs/bench/contention.md), and rows carry the pid.
#[inline]
pub fn current_pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => read_pid(),
        pid => pid,
    }
}

#[cold]
fn read_pid() -> u32 {
    // The fork handler forgets the cached value in a child; install it before caching.
    install_fork_guard();
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

extern "C" fn in_forked_child() {
    // Only atomics and thread-locals here: the child has one thread and maybe held locks.
    if let Some(r) = global_if_started() {
        r.disable();
    }
    PID.store(0, Ordering::Relaxed);
    forget_cached_tid();
}
