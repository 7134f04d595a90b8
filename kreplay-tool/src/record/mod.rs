//! Event recording inside the application: per-thread buffers (the default) or the
//! shared-mutex baseline, merged off the hot path and written to the tool's stream file.
//!
//! A thread records into its own [`block_log::BlockLog`]: plain stores into a 256-entry
//! block and a Release store of its length — no lock and no shared atomic write per record.
//! Each thread's buffer is registered once, in a registry behind a mutex taken only at
//! registration, merge and clear. A merge (at flush: on request, at exit, or when a buffer
//! passes the size threshold) moves every published record into one list; a thread that
//! exited leaves its buffer with the registry, so its rows are merged before it is freed.
//! `KREPLAY_PER_THREAD_BUFFER=0` selects the baseline instead: one `Vec` behind one `Mutex`.
//! Both paths are capped and count what they drop; a flush writes the counts as `Drops`.
//! The global recorder stops recording in a forked child (see `sink`). Each GPU the records
//! name is described once (`devices`), and again at the top of every stream file.

pub mod block_log;
mod config;
mod devices;
mod recorder;
mod sink;
mod thread_buffer;

#[cfg(test)]
mod tests;

pub use config::{ENV_OUTPUT_DIR, ENV_PER_THREAD, ENV_PER_THREAD_CAP, RecorderConfig};
pub use devices::describe_device_once;
pub use recorder::{DROPS_PER_THREAD, DROPS_SHARED, FlushStats, Recorder, RecorderStats};
pub use sink::{
    StreamSink, current_pid, enter_teardown, exiting, flush_global, global, install_exit_flush,
    pause_global_flusher, resume_global_flusher, set_output_dir, start_global_flusher,
};
pub use thread_buffer::current_tid;

/// Locks `m`, recovering from poisoning: every critical section in this module leaves its
/// state consistent, and code running inside someone else's process must not panic.
fn lock<G>(m: &std::sync::Mutex<G>) -> std::sync::MutexGuard<'_, G> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
