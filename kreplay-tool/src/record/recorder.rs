//! The recorder: the per-thread and shared-mutex recording paths, the merge that pours the
//! thread buffers together off the hot path, clearing, and writing merged rows to a stream.

use std::io::Write;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kreplay_common::stream::{
    Correlation, Drops, Record, StreamError, StreamWriter, ThreadName, monotonic_ns,
};

use super::block_log::{BLOCK_LEN, Pushed};
use super::config::RecorderConfig;
use super::lock;
use super::thread_buffer::{ThreadBuffer, local_buffer};

/// Source names of the `Drops` records a flush writes.
pub const DROPS_PER_THREAD: &str = "tool/per-thread-buffer";
/// See [`DROPS_PER_THREAD`].
pub const DROPS_SHARED: &str = "tool/shared-buffer";

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `Recorder::mode` values.
const MODE_SHARED: u8 = 0;
const MODE_PER_THREAD: u8 = 1;
const MODE_OFF: u8 = 2;

/// Counters that show which path moved what since the last [`Recorder::clear`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Merged rows waiting to be written.
    pub rows: usize,
    /// Merged correlation records waiting to be written.
    pub correlations: usize,
    /// Thread buffers in the registry now.
    pub thread_buffers: usize,
    /// Thread buffers registered (the per-thread machinery touched).
    pub registrations: u64,
    /// Rows and correlations appended through the shared mutex.
    pub shared_appends: u64,
    /// Rows merged out of thread buffers.
    pub per_thread_rows: u64,
    /// Correlation records merged out of thread buffers.
    pub per_thread_correlations: u64,
    /// Records dropped at a cap (both paths; a thread buffer's drops count once merged).
    pub dropped: u64,
}

/// What one [`Recorder::flush_to`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Rows and correlation records written.
    pub records: u64,
    /// Drops reported in this flush.
    pub dropped: u64,
}

/// The merged view: the one list the stream writer reads. In shared mode every thread
/// appends here directly, under this one mutex (the baseline).
#[derive(Default)]
struct Merged {
    rows: Vec<Record>,
    correlations: Vec<Correlation>,
    shared_appends: u64,
    shared_dropped: u64,
    per_thread_rows: u64,
    per_thread_correlations: u64,
    per_thread_dropped: u64,
    /// Drops not yet written as `Drops` records, per path.
    per_thread_unreported: u64,
    shared_unreported: u64,
}

/// The thread buffers, touched only at registration, merge and clear.
#[derive(Default)]
struct Registry {
    buffers: Vec<Arc<ThreadBuffer>>,
    registrations: u64,
    /// Threads whose name no flush has written yet.
    unannounced: Vec<ThreadName>,
    /// Drops already counted per buffer (index-aligned with `buffers`).
    dropped_seen: Vec<u64>,
}

/// Records rows and correlation ids from many threads; see the module docs.
pub struct Recorder {
    id: u64,
    /// `MODE_SHARED`, `MODE_PER_THREAD` or `MODE_OFF`; read (never written) per record.
    mode: AtomicU8,
    config: RecorderConfig,
    merged: Mutex<Merged>,
    registry: Mutex<Registry>,
    flush_wanted: AtomicBool,
    on_flush_wanted: Mutex<Option<std::thread::Thread>>,
}

impl Recorder {
    /// A recorder with `config`.
    pub fn new(config: RecorderConfig) -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            mode: AtomicU8::new(if config.per_thread {
                MODE_PER_THREAD
            } else {
                MODE_SHARED
            }),
            config,
            merged: Mutex::new(Merged::default()),
            registry: Mutex::new(Registry::default()),
            flush_wanted: AtomicBool::new(false),
            on_flush_wanted: Mutex::new(None),
        }
    }

    /// Whether new records go to per-thread buffers (else to the shared mutex).
    #[inline]
    pub fn per_thread(&self) -> bool {
        self.mode.load(Ordering::Relaxed) == MODE_PER_THREAD
    }

    /// Whether records are kept at all (false after [`Recorder::disable`]).
    pub fn is_enabled(&self) -> bool {
        self.mode.load(Ordering::Relaxed) != MODE_OFF
    }

    /// Stops recording for good: later records are ignored and [`Recorder::set_per_thread`]
    /// no longer re-enables it. Touches no lock, so it is safe in a forked child.
    pub fn disable(&self) {
        self.mode.store(MODE_OFF, Ordering::Relaxed);
    }

    /// Switches path. Safe at any time: records already in thread buffers are merged by the
    /// next merge whatever the mode.
    pub fn set_per_thread(&self, on: bool) {
        let mode = if on { MODE_PER_THREAD } else { MODE_SHARED };
        let _ = self
            .mode
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                (m != MODE_OFF).then_some(mode)
            });
    }

    /// Records a row from the calling thread: the tool's one entry for rows.
    ///
    /// Always inlined, so that where a row is built and recorded at once its fields are stored
    /// straight into the thread buffer's slot. Built elsewhere and read back here, a row just
    /// written field by field stalls on store forwarding (wider loads spanning narrower stores
    /// still in the store buffer): perf put three quarters of an out-of-line `record`'s time
    /// on that reload. What stays inline is small: one relaxed load of the mode, one
    /// thread-local load, one load of the buffer's registration flag, the block log's push
    /// and its hand-off check; registering, the shared path and hand-offs are out of line.
    #[inline(always)]
    pub fn record(&self, row: Record) {
        self.record_kept(row);
    }

    /// [`Recorder::record`], saying whether the row was kept: false when it was dropped at a
    /// cap (counted) or recording is off. A caller whose later rows only make sense with this
    /// one (a range's end after its start) leaves those out too.
    #[inline(always)]
    pub fn record_kept(&self, row: Record) -> bool {
        match self.mode.load(Ordering::Relaxed) {
            MODE_PER_THREAD => {
                if let Some(buffer) = self.local_buffer() {
                    // SAFETY: `local_buffer` returns the calling thread's own buffer, alive
                    // for this call, so this thread is the only one pushing to its logs;
                    // `row` is valid, and forgotten below unless the log dropped it.
                    let pushed = unsafe { buffer.as_ref().rows.push_from(&row) };
                    let kept = pushed != Pushed::Dropped;
                    if kept {
                        std::mem::forget(row);
                    }
                    self.after_push(pushed);
                    return kept;
                }
            }
            MODE_SHARED => {}
            _ => return false,
        }
        self.push_shared(|m| m.rows.push(row), |m| m.rows.len())
    }

    /// Records the row `make` builds (not built at all when the thread's buffer is at its
    /// cap). `make` may record too.
    #[inline]
    pub fn record_with(&self, make: impl FnOnce() -> Record) {
        match self.mode.load(Ordering::Relaxed) {
            MODE_PER_THREAD => {
                if let Some(buffer) = self.local_buffer() {
                    // SAFETY: `local_buffer` returns the calling thread's own buffer, alive
                    // for this call, so this thread is the only one pushing to its logs.
                    let pushed = unsafe { buffer.as_ref().rows.push_with(make) };
                    self.after_push(pushed);
                    return;
                }
            }
            MODE_SHARED => {}
            _ => return,
        }
        let row = make();
        self.push_shared(|m| m.rows.push(row), |m| m.rows.len());
    }

    /// Records that the calling thread tied external id `external_id` to `correlation`.
    #[inline]
    pub fn record_correlation(&self, external_id: u64, correlation: u64) {
        let mode = self.mode.load(Ordering::Relaxed);
        if mode == MODE_OFF {
            return;
        }
        let tid = super::thread_buffer::current_tid();
        let rec = Correlation {
            tid,
            ts_ns: monotonic_ns(),
            external_id,
            correlation,
        };
        if mode == MODE_PER_THREAD
            && let Some(buffer) = self.local_buffer()
        {
            // SAFETY: as in `record_with`.
            let pushed = unsafe { buffer.as_ref().correlations.push(rec) };
            self.after_push(pushed);
        } else {
            self.push_shared(|m| m.correlations.push(rec), |m| m.correlations.len());
        }
    }

    /// The calling thread's buffer for this recorder, registered; `None` when thread-local
    /// storage is unavailable (the caller then takes the shared path).
    #[inline]
    fn local_buffer(&self) -> Option<NonNull<ThreadBuffer>> {
        local_buffer(
            self.id,
            || ThreadBuffer::for_current_thread(self.config.per_thread_cap),
            |b| self.register(b),
        )
    }

    #[inline]
    fn after_push(&self, pushed: Pushed) {
        if let Pushed::HandedOff(waiting) = pushed
            && waiting * BLOCK_LEN >= self.config.flush_threshold
        {
            self.request_flush();
        }
    }

    /// The baseline: one Vec behind one mutex, with a cap and counted drops. Out of line: it
    /// keeps the per-thread path's code (and stack frame) small.
    #[inline(never)]
    fn push_shared(&self, push: impl FnOnce(&mut Merged), len: impl Fn(&Merged) -> usize) -> bool {
        let mut m = lock(&self.merged);
        let n = len(&m);
        if n >= self.config.shared_cap {
            m.shared_dropped += 1;
            m.shared_unreported += 1;
            return false;
        }
        push(&mut m);
        m.shared_appends += 1;
        let want_flush = n + 1 == self.config.flush_threshold;
        drop(m);
        if want_flush {
            self.request_flush();
        }
        true
    }

    #[cold]
    fn register(&self, buffer: &Arc<ThreadBuffer>) {
        let mut reg = lock(&self.registry);
        if buffer.registered.load(Ordering::Relaxed) {
            return;
        }
        reg.buffers.push(Arc::clone(buffer));
        reg.dropped_seen
            .push(buffer.rows.dropped() + buffer.correlations.dropped());
        reg.registrations += 1;
        if !buffer.announced.swap(true, Ordering::Relaxed) {
            reg.unannounced.push(ThreadName {
                tid: buffer.tid,
                name: buffer.name.clone(),
            });
        }
        buffer.registered.store(true, Ordering::Relaxed);
    }

    /// Asks the thread set by [`Recorder::set_flush_waker`] to flush soon.
    pub fn request_flush(&self) {
        if !self.flush_wanted.swap(true, Ordering::AcqRel)
            && let Some(t) = lock(&self.on_flush_wanted).as_ref()
        {
            t.unpark();
        }
    }

    /// Takes (clears) the flush request flag.
    pub fn take_flush_request(&self) -> bool {
        self.flush_wanted.swap(false, Ordering::AcqRel)
    }

    /// Names the thread that [`Recorder::request_flush`] unparks.
    pub fn set_flush_waker(&self, thread: Option<std::thread::Thread>) {
        *lock(&self.on_flush_wanted) = thread;
    }

    /// Pours every thread buffer into the merged list and frees the buffers of exited
    /// threads; returns the rows and correlation records moved. Idempotent: a second merge
    /// with no recording in between moves nothing.
    pub fn merge(&self) -> usize {
        let mut reg = lock(&self.registry);
        let mut m = lock(&self.merged);
        let m = &mut *m;
        let mut moved = 0;
        let reg = &mut *reg;
        let mut i = 0;
        while i < reg.buffers.len() {
            let b = &reg.buffers[i];
            // Read `exited` before draining: everything the thread pushed before exiting is
            // then visible to the drain.
            let exited = b.exited.load(Ordering::Acquire);
            let rows = b.rows.drain(|r| m.rows.push(r));
            let corrs = b.correlations.drain(|c| m.correlations.push(c));
            m.per_thread_rows += rows as u64;
            m.per_thread_correlations += corrs as u64;
            moved += rows + corrs;
            let dropped = b.rows.dropped() + b.correlations.dropped();
            let new_drops = dropped - reg.dropped_seen[i];
            reg.dropped_seen[i] = dropped;
            m.per_thread_dropped += new_drops;
            m.per_thread_unreported += new_drops;
            if exited {
                b.registered.store(false, Ordering::Relaxed);
                reg.buffers.swap_remove(i);
                reg.dropped_seen.swap_remove(i);
            } else {
                i += 1;
            }
        }
        moved
    }

    /// Discards every recorded row and correlation record (merged or still in thread
    /// buffers), unregisters every thread buffer and zeroes the counters; the merged lists
    /// keep their capacity. A live thread registers again on its next record.
    pub fn clear(&self) {
        let mut reg = lock(&self.registry);
        for b in reg.buffers.drain(..) {
            b.rows.drain(drop);
            b.correlations.drain(drop);
            b.registered.store(false, Ordering::Relaxed);
        }
        reg.dropped_seen.clear();
        reg.registrations = 0;
        let mut m = lock(&self.merged);
        // Keep the lists' capacity, as a vector's clear does.
        let mut rows = std::mem::take(&mut m.rows);
        let mut correlations = std::mem::take(&mut m.correlations);
        rows.clear();
        correlations.clear();
        *m = Merged {
            rows,
            correlations,
            ..Merged::default()
        };
    }

    /// The counters and queue lengths.
    pub fn stats(&self) -> RecorderStats {
        let reg = lock(&self.registry);
        let m = lock(&self.merged);
        RecorderStats {
            rows: m.rows.len(),
            correlations: m.correlations.len(),
            thread_buffers: reg.buffers.len(),
            registrations: reg.registrations,
            shared_appends: m.shared_appends,
            per_thread_rows: m.per_thread_rows,
            per_thread_correlations: m.per_thread_correlations,
            dropped: m.shared_dropped + m.per_thread_dropped,
        }
    }

    /// Moves the merged rows and correlation records out (after a [`Recorder::merge`]).
    pub fn take_merged(&self) -> (Vec<Record>, Vec<Correlation>) {
        let mut m = lock(&self.merged);
        (
            std::mem::take(&mut m.rows),
            std::mem::take(&mut m.correlations),
        )
    }

    /// Merges, then writes to `w`: names of newly seen threads, the merged rows and
    /// correlation records sorted by timestamp, and a `Drops` record per buffer kind that
    /// dropped anything since the last flush. Ends with a chunk boundary.
    pub fn flush_to<W: Write>(&self, w: &mut StreamWriter<W>) -> Result<FlushStats, StreamError> {
        self.merge();
        let names = std::mem::take(&mut lock(&self.registry).unannounced);
        let (mut rows, correlations, drops) = {
            let mut m = lock(&self.merged);
            let drops = [
                (
                    DROPS_PER_THREAD,
                    std::mem::take(&mut m.per_thread_unreported),
                ),
                (DROPS_SHARED, std::mem::take(&mut m.shared_unreported)),
            ];
            (
                std::mem::take(&mut m.rows),
                std::mem::take(&mut m.correlations),
                drops,
            )
        };
        rows.extend(correlations.into_iter().map(Record::from));
        rows.sort_by_key(Record::timestamp);
        for name in names {
            w.push(&name.into())?;
        }
        for row in &rows {
            w.push(row)?;
        }
        let now = monotonic_ns();
        for (source, count) in drops {
            if count > 0 {
                w.push(
                    &Drops {
                        ts_ns: now,
                        source: source.into(),
                        count,
                    }
                    .into(),
                )?;
            }
        }
        w.flush()?;
        Ok(FlushStats {
            records: rows.len() as u64,
            dropped: drops.iter().map(|(_, n)| n).sum(),
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for b in &lock(&self.registry).buffers {
            b.orphaned.store(true, Ordering::Relaxed);
        }
    }
}
