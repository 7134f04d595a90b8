//! Rendering the tool's GPU records: dispatches on queue tracks, copies and memsets on copy
//! tracks, replay passes, snapshots and restores nested under dispatches, declines and
//! nondeterminism as instants, and the per-GPU busy share ([`super::gpu_time`]).
//!
//! Tracks ([`tracks`]): one device track per (process, agent) — agent handles are per-process
//! pointers — under the process's track, with a child track per queue (stream) and one for the
//! copies of each copy engine, named after the runtime the tool described the device with;
//! work that overlaps on one track goes on overflow lanes (`TraceWriter::lane`). Kernels are
//! named by their demangled name. Everything but the busy counters is written on one sequence,
//! but for work that comes after later work was written there (below).
//!
//! Order: a `Dispatch` is merged at its `submit_ns` but its slice begins at `start_ns`, so it
//! is held in a min-heap by start until the merge time reaches that start. Any later record
//! has a merge time at or after the current one, and a dispatch submitted later starts later,
//! so the sequence stays monotonic; a record further out of order than the merge's reorder
//! window (CUPTI hands records over in buffers) goes on a late sequence instead, one that is
//! not past its time, and on an overflow lane of its track. Replay records (merged at their start) then find their
//! dispatch already placed and nest on its lane when they lie inside it; otherwise they go on
//! the queue's "replay" track. Placed dispatches are forgotten [`FORGET_AFTER_NS`] after their
//! end: memory is bounded by the dispatches in flight, not by the trace's length.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::FastMap;
use std::io::Write;

use std::rc::Rc;

use kreplay_common::stream::{Dispatch, GpuCopy, GpuDevice};

mod copies;
pub mod tracks;

pub use super::gpu_names::GpuNames;
use super::gpu_time::{Busy, KernelTimes};
use crate::perfetto::{Annotation, EventArgs, Sequence, TraceWriter, Track, Value, WriterError};

/// How long after a dispatch's end its declines and nondeterminism reports are still placed
/// on its queue (they come after the passes); later ones go on the process's replay track.
pub const FORGET_AFTER_NS: u64 = 1_000_000_000;

/// GPU work held until the merge reaches its start.
enum Work {
    Kernel(Dispatch),
    Copy(GpuCopy),
}

/// A dispatch or copy waiting for the merge to reach its start.
struct HeldDispatch {
    order: u64,
    pid: u32,
    work: Work,
    /// Its device's track group and key.
    device: (Track, u64),
    /// The queue or copy track it goes on.
    queue: Track,
    flow: Option<u64>,
    external: Option<u64>,
}

/// Where a dispatch goes (from when it is merged) and, once written, its lane.
struct Placed {
    device: Track,
    agent: u64,
    queue: Track,
    queue_handle: u64,
    lane: Option<Track>,
    start: u64,
    end: u64,
    /// The hold order of the dispatch this entry is for.
    order: u64,
}

/// A replay record's span and what it shows.
pub struct Child<'a> {
    /// Process of the tool stream.
    pub pid: u32,
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// Slice name.
    pub name: &'a str,
    /// The name differs from record to record (`pass N`): written in the slice rather than
    /// interned, so the writer's name tables do not grow with every pass.
    pub inline_name: bool,
    /// Start.
    pub start: u64,
    /// End.
    pub end: u64,
    /// Annotations: (name, value) pairs from [`GpuNames`].
    pub args: &'a [Annotation<'a>],
}

/// An instant about a dispatch (a decline, a nondeterminism report).
pub struct Mark<'a> {
    /// Process of the tool stream.
    pub pid: u32,
    /// The dispatch's correlation id.
    pub correlation: u64,
    /// Instant name.
    pub name: &'a str,
    /// When.
    pub ts: u64,
    /// Annotations.
    pub args: &'a [Annotation<'a>],
}

/// State of the GPU half of the render.
pub struct Gpu {
    seq: Sequence,
    /// Sequences for work that reaches the merge after later work was written on `seq` (a
    /// tool stream out of order by more than the merge's window): each stays in time order.
    late: Vec<Sequence>,
    /// Names of GPU annotations.
    pub names: GpuNames,
    held: BinaryHeap<Reverse<(u64, u64)>>,
    held_by_order: FastMap<u64, HeldDispatch>,
    order: u64,
    devices: FastMap<(u32, u64), Track>,
    queues: FastMap<(u32, u64, u64), Track>,
    replay_tracks: FastMap<(u32, u64, u64), Track>,
    orphans: FastMap<u32, Track>,
    placed: FastMap<(u32, u64), Placed>,
    /// `(forget at, pid, correlation, hold order)` of written dispatches.
    expiry: BinaryHeap<Reverse<(u64, u32, u64, u64)>>,
    /// Dispatch slices written.
    pub dispatches: u64,
    /// Copy and memset slices written.
    pub copies: u64,
    /// Copy tracks by (pid, device, engine).
    copy_tracks: FastMap<(u32, u64, u64), Track>,
    /// The tool's descriptions of devices by (pid, device).
    descriptions: FastMap<(u32, u64), GpuDevice>,
    /// Descriptions that came after their device's tracks were named.
    pub late_descriptions: u64,
    /// Demangled kernel names by the name the tool recorded.
    demangled: FastMap<String, Rc<str>>,
    /// The per-GPU busy share.
    pub busy: Busy,
    /// GPU time per kernel.
    pub kernel_times: KernelTimes,
}

impl Gpu {
    /// GPU state writing on a new sequence of `w`.
    pub fn new<W: Write>(w: &mut TraceWriter<W>) -> Self {
        Self {
            seq: w.sequence(),
            late: Vec::new(),
            names: GpuNames::new(w),
            held: BinaryHeap::new(),
            held_by_order: FastMap::default(),
            order: 0,
            devices: FastMap::default(),
            queues: FastMap::default(),
            replay_tracks: FastMap::default(),
            orphans: FastMap::default(),
            placed: FastMap::default(),
            expiry: BinaryHeap::new(),
            dispatches: 0,
            copies: 0,
            copy_tracks: FastMap::default(),
            descriptions: FastMap::default(),
            late_descriptions: 0,
            demangled: FastMap::default(),
            busy: Busy::default(),
            kernel_times: KernelTimes::default(),
        }
    }

    /// Dispatches waiting for their start.
    pub fn held(&self) -> usize {
        self.held_by_order.len()
    }

    /// Dispatches whose tracks are remembered for later replay records and instants.
    pub fn remembered(&self) -> usize {
        self.placed.len()
    }

    /// Holds `h` (its `order` given here) until the merge reaches its GPU start, or its
    /// submission when it has no valid GPU times.
    fn push_held(&mut self, mut h: HeldDispatch) {
        self.order += 1;
        h.order = self.order;
        let (submit, start, end) = match &h.work {
            Work::Kernel(d) => (d.submit_ns, d.start_ns, d.end_ns),
            Work::Copy(c) => (c.submit_ns, c.start_ns, c.end_ns),
        };
        let at = if valid_times(submit, start, end) {
            start
        } else {
            submit
        };
        self.held.push(Reverse((at, self.order)));
        self.held_by_order.insert(self.order, h);
    }

    /// Takes a dispatch of process `pid` and makes its tracks; its slice is written once the
    /// merge reaches its start. Until then declines find its queue, and replay records that
    /// cannot nest go on the queue's replay track.
    pub fn hold<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        d: &Dispatch,
        flow: Option<u64>,
        external: Option<u64>,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<(), WriterError> {
        let device = self.device(w, pid, d.agent, process_name)?;
        let queue = self.queue(w, pid, d.agent, device, d.queue)?;
        self.push_held(HeldDispatch {
            order: 0,
            pid,
            work: Work::Kernel(d.clone()),
            device: (device, d.agent),
            queue,
            flow,
            external,
        });
        self.placed.insert(
            (pid, d.correlation),
            Placed {
                device,
                agent: d.agent,
                queue,
                queue_handle: d.queue,
                lane: None,
                start: d.start_ns,
                end: d.end_ns,
                order: self.order,
            },
        );
        Ok(())
    }

    /// Writes the held dispatches that start at or before `now` and forgets placed ones long
    /// past. Errors other than I/O are counted in `skipped` and do not stop the render.
    pub fn advance<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        now: u64,
        skipped: &mut u64,
    ) -> Result<(), WriterError> {
        while let Some(&Reverse((start, order))) = self.held.peek() {
            if start > now {
                break;
            }
            self.held.pop();
            let h = self
                .held_by_order
                .remove(&order)
                .expect("held entries have a dispatch");
            let r = match &h.work {
                Work::Kernel(_) => self.write_dispatch(w, &h),
                Work::Copy(_) => self.write_copy(w, &h),
            };
            soft(r, skipped)?;
        }
        self.busy.advance(w, now)?;
        while let Some(&Reverse((at, pid, corr, order))) = self.expiry.peek() {
            if at >= now {
                break;
            }
            self.expiry.pop();
            // A later dispatch with the same correlation id replaced the entry: keep that one.
            if self
                .placed
                .get(&(pid, corr))
                .is_some_and(|p| p.order == order)
            {
                self.placed.remove(&(pid, corr));
            }
        }
        Ok(())
    }

    /// The demangled name of kernel `raw` (its `.kd` suffix left out), cached.
    fn kernel_name(&mut self, raw: &str) -> Rc<str> {
        if let Some(n) = self.demangled.get(raw) {
            return n.clone();
        }
        let bare = raw.strip_suffix(".kd").unwrap_or(raw);
        let n: Rc<str> = crate::trace::kernels::demangle(bare).into();
        self.demangled.insert(raw.to_owned(), n.clone());
        n
    }

    fn write_dispatch<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        h: &HeldDispatch,
    ) -> Result<(), WriterError> {
        let Work::Kernel(d) = &h.work else {
            return Ok(());
        };
        let queue = h.queue;
        let kernel = self.kernel_name(&d.kernel);
        let n = &self.names;
        let grid = format!("{}x{}x{}", d.grid[0], d.grid[1], d.grid[2]);
        let wg = format!("{}x{}x{}", d.workgroup[0], d.workgroup[1], d.workgroup[2]);
        let mut ann = vec![
            Annotation {
                name: n.grid,
                value: Value::Str(&grid),
            },
            Annotation {
                name: n.workgroup,
                value: Value::Str(&wg),
            },
            Annotation {
                name: n.correlation,
                value: Value::Uint(d.correlation),
            },
            Annotation {
                name: n.kernel_object,
                value: Value::Pointer(d.kernel_object),
            },
            Annotation {
                name: n.group_segment,
                value: Value::Uint(u64::from(d.group_segment)),
            },
            Annotation {
                name: n.queue,
                value: Value::Pointer(d.queue),
            },
        ];
        if d.private_segment != 0 {
            ann.push(Annotation {
                name: n.private_segment,
                value: Value::Uint(u64::from(d.private_segment)),
            });
        }
        if let Some(ext) = h.external {
            ann.push(Annotation {
                name: n.external_id,
                value: Value::Uint(ext),
            });
        }
        let flows: Vec<u64> = h.flow.into_iter().collect();
        let args = EventArgs {
            annotations: &ann,
            terminating_flow_ids: &flows,
            ..Default::default()
        };
        let name = w.event_name(&kernel);
        if !valid_times(d.submit_ns, d.start_ns, d.end_ns) {
            // The GPU times are missing or inconsistent: mark the submission instead.
            let seq = self.seq_at(w, d.submit_ns);
            w.instant(seq, queue, name, d.submit_ns, &args)?;
            self.dispatches += 1;
            let forget_at = d.submit_ns.saturating_add(FORGET_AFTER_NS);
            self.expiry
                .push(Reverse((forget_at, h.pid, d.correlation, h.order)));
            return Ok(());
        }
        let lane = w.lane(queue, d.start_ns, d.end_ns)?;
        let seq = self.seq_at(w, d.start_ns);
        w.slice(seq, lane, name, d.start_ns, d.end_ns, &args)?;
        self.dispatches += 1;
        self.kernel_times.add(&kernel, d.end_ns - d.start_ns);
        self.busy
            .add(w, (h.pid, h.device.1), h.device.0, d.start_ns, d.end_ns)?;
        if let Some(p) = self.placed.get_mut(&(h.pid, d.correlation)) {
            p.lane = Some(lane);
        }
        let forget_at = d.end_ns.saturating_add(FORGET_AFTER_NS);
        self.expiry
            .push(Reverse((forget_at, h.pid, d.correlation, h.order)));
        Ok(())
    }

    /// Writes a replay record's slice: nested under its dispatch when it lies inside it, else
    /// on the queue's replay track (or the process's when the dispatch is unknown).
    pub fn child<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        c: &Child<'_>,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<(), WriterError> {
        let end = c.end.max(c.start);
        let inside = self.placed.get(&(c.pid, c.correlation)).and_then(|p| {
            let fits = p.start <= c.start && end <= p.end && (c.start < p.end || p.start == p.end);
            p.lane.filter(|_| fits)
        });
        let track = match inside {
            Some(lane) => lane,
            None => {
                let base = self.replay_base(w, c.pid, c.correlation, process_name)?;
                w.lane(base, c.start, end)?
            }
        };
        let args = EventArgs {
            annotations: c.args,
            ..Default::default()
        };
        let seq = self.seq_at(w, c.start);
        if c.inline_name {
            return w.slice_inline(seq, track, c.name, c.start, end, &args);
        }
        let name = w.event_name(c.name);
        w.slice(seq, track, name, c.start, end, &args)
    }

    /// An instant about dispatch `correlation` of `pid`: on its queue track while it is
    /// remembered, else on the process's replay track.
    pub fn instant<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        m: &Mark<'_>,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<(), WriterError> {
        let track = match self.placed.get(&(m.pid, m.correlation)) {
            Some(p) => p.queue,
            None => self.orphan(w, m.pid, process_name)?,
        };
        let name = w.event_name(m.name);
        let args = EventArgs {
            annotations: m.args,
            ..Default::default()
        };
        let seq = self.seq_at(w, m.ts);
        w.instant(seq, track, name, m.ts, &args)
    }

    /// The sequence for an event at `ts`: the GPU sequence unless it is past `ts` already,
    /// else the first late sequence that is not, else a new one.
    fn seq_at<W: Write>(&mut self, w: &mut TraceWriter<W>, ts: u64) -> Sequence {
        if w.last_ts(self.seq) <= ts {
            return self.seq;
        }
        if let Some(&s) = self.late.iter().find(|&&s| w.last_ts(s) <= ts) {
            return s;
        }
        let s = w.sequence();
        self.late.push(s);
        s
    }

    fn replay_base<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        correlation: u64,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<Track, WriterError> {
        let Some(p) = self.placed.get(&(pid, correlation)) else {
            return self.orphan(w, pid, process_name);
        };
        let (device, agent, queue) = (p.device, p.agent, p.queue_handle);
        self.replay_track(w, pid, agent, device, queue)
    }

    fn orphan<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<Track, WriterError> {
        if let Some(&t) = self.orphans.get(&pid) {
            return Ok(t);
        }
        let process = w.process_track(pid as i32, &process_name(pid))?;
        let t = w.child_track(process, u64::MAX, "kreplay replay")?;
        self.orphans.insert(pid, t);
        Ok(t)
    }
}

/// True when the GPU times are present and ordered (submit <= start <= end).
fn valid_times(submit: u64, start: u64, end: u64) -> bool {
    start != 0 && submit <= start && start <= end
}

/// Passes I/O errors on; counts any other writer error (a record that cannot be placed) in
/// `skipped`.
pub fn soft(r: Result<(), WriterError>, skipped: &mut u64) -> Result<(), WriterError> {
    match r {
        Ok(()) => Ok(()),
        Err(e @ WriterError::Io { .. }) => Err(e),
        Err(e) => {
            tracing::debug!(error = %e, "record skipped");
            *skipped += 1;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
