//! The tool's stream file and the process-wide recorder: where merged rows go, and the
//! background thread that flushes them on a size threshold or a timer.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use kreplay_common::stream::{ProcessName, StreamError, StreamHeader, StreamKind, StreamWriter};

use super::config::{ENV_OUTPUT_DIR, RecorderConfig};
use super::lock;
use super::recorder::{FlushStats, Recorder};

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
            // No tracing during the exit flush: the subscriber's thread-locals may be gone.
            if !super::process_hooks::exiting() {
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
        super::process_hooks::install_fork_guard();
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
                std::thread::park_timeout(interval);
                global().take_flush_request();
                if let Err(e) = flush_global() {
                    tracing::warn!("kreplay: flushing the tool stream failed: {e}");
                }
            }
        });
    match handle {
        Ok(h) => {
            global().set_flush_waker(Some(h.thread().clone()));
            Ok(())
        }
        Err(e) => {
            FLUSHER_STARTED.store(false, Ordering::Release);
            Err(e)
        }
    }
}
