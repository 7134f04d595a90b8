//! Rendering merged stream records as Perfetto tracks, slices, counters and markers.
//!
//! Probe records (`ApiCall`) become slices named after the API on their thread's track,
//! with the arguments that API has as debug annotations, launches with their kernel's name
//! (`kernel`, from `KernelName` records); allocations and frees drive a
//! per-process live-bytes counter; drop records become visible markers. Tool records
//! (dispatches, replay passes, snapshots, restores, declines, nondeterminism) go on GPU queue
//! tracks ([`super::gpu`]), named after the tool's description of their device (`GpuDevice`). A flow joins each launch slice to the dispatch it produced: the
//! dispatch's `submit_ns` lies inside the launch call on the same thread (or a `Correlation`
//! record names the call), and launch slices wait in [`super::holdback`] until every dispatch
//! they could have produced has been merged.
//!
//! kreplay's own runtime calls (made while it snapshots, replays and restores, inside the
//! tool's windows on the same thread: [`super::own_calls`]) go on a child track of their
//! thread named [`OWN_TRACK`], not on the thread's own track, and count in neither the
//! application's live bytes nor its calls. A separate track rather than an annotation on the
//! thread's track: a reader sees at a glance which slices the application made, and queries
//! over the thread's slices (Perfetto's `thread_slice`) leave kreplay's out without knowing
//! about it.
mod annotations;
mod gpu_records;

use std::{collections::VecDeque, io::Write, rc::Rc};

use kreplay_common::{
    api::{ApiKind, Geometry, Library, NO_ARG, spec_of},
    stream::{ApiCall, Record},
};

use super::FastMap;
use super::gpu::{Child, FORGET_AFTER_NS, Gpu, Mark, soft};
use super::holdback::{HeldCall, Holdback, Offer};
pub use super::labels::layer_name;
use super::labels::process_label;
use super::live_bytes::LiveBytes;
use super::own_calls::OwnCalls;
use super::scratch::{Annotations, Dim3, stream_slot};
pub use super::stats::RenderStats;
use super::stats::call_record;
use super::user_ranges::UserRanges;
use crate::perfetto::{
    Annotation, AnnotationName, EventArgs, EventName, Sequence, TraceWriter, Track, Value,
    WriterError,
};
use crate::trace::summary::Summary;

/// The name of the child track of a thread that holds kreplay's own runtime calls.
pub const OWN_TRACK: &str = "kreplay (replay)";
/// The key of that child track under its thread track.
const OWN_TRACK_KEY: u64 = 0x6b72_6570_6c61_7900;

/// A launch's grid and block dimensions, and their `AxBxC` labels.
type Geometry3 = (([u64; 3], [u64; 3]), String, String);

pub(super) struct Names {
    ret: AnnotationName,
    size: AnnotationName,
    ptr: AnnotationName,
    result: AnnotationName,
    stream: AnnotationName,
    grid: AnnotationName,
    block: AnnotationName,
    args: [AnnotationName; 6],
    count: AnnotationName,
    pub(super) source: AnnotationName,
    external_id: AnnotationName,
    kernel: AnnotationName,
}

/// Turns merged records into a trace.
pub struct Renderer<W: Write> {
    pub(super) w: TraceWriter<W>,
    pub(super) names: Names,
    pub(super) process_names: FastMap<u32, String>,
    thread_names: FastMap<(u32, u32), String>,
    threads: FastMap<(u32, u32), Track>,
    /// Each input stream's sequence, and its sequence for late records, by stream index
    /// (made at the stream's first such record).
    late_seqs: Vec<Option<Sequence>>,
    /// The thread track of each sequence's last call, by `trusted_id`.
    last_track: Vec<Option<(u32, u32, Track)>>,
    counter_seq: Sequence,
    live: LiveBytes,
    pub(super) own: OwnCalls,
    /// The per-API summary of the application's calls (kreplay's own left out), when asked.
    app_summary: Option<Summary>,
    /// Whether that summary counts launches per kernel.
    count_launches: bool,
    marker_track: Option<Track>,
    pub(super) gpu: Gpu,
    pub(super) hold: Holdback,
    /// External ids by (pid, correlation), from `Correlation` records, until the dispatch comes.
    externals: FastMap<(u32, u64), (u32, u64, u64)>,
    /// `(ts, pid, correlation)` of `externals` entries in arrival order, to forget those whose
    /// dispatch never came ([`FORGET_AFTER_NS`] later): memory stays bounded by time, not trace
    /// length.
    externals_age: VecDeque<(u64, u32, u64)>,
    /// Slice names by API id, resolved once (a name lookup hashes the whole string).
    api_names: Vec<Option<EventName>>,
    /// Kernel names by (pid, handle), from `KernelName` records: launch slices carry them.
    kernel_names: FastMap<(u32, u64), Rc<str>>,
    /// The last launch's grid and block, and their labels: a program launches with the same
    /// geometry again and again, and formatting the labels per launch showed in the profile.
    dims: Option<Geometry3>,
    /// What rendering did so far.
    pub stats: RenderStats,
    /// The application's annotations ([`super::user_ranges`]).
    pub(super) ranges: UserRanges,
}

impl<W: Write> Renderer<W> {
    /// A renderer writing to `w`.
    pub fn new(mut w: TraceWriter<W>) -> Self {
        let names = Names {
            ret: w.annotation_name("ret"),
            size: w.annotation_name("size"),
            ptr: w.annotation_name("ptr"),
            result: w.annotation_name("result"),
            stream: w.annotation_name("stream"),
            grid: w.annotation_name("grid"),
            block: w.annotation_name("block"),
            args: [
                w.annotation_name("arg0"),
                w.annotation_name("arg1"),
                w.annotation_name("arg2"),
                w.annotation_name("arg3"),
                w.annotation_name("arg4"),
                w.annotation_name("arg5"),
            ],
            count: w.annotation_name("count"),
            source: w.annotation_name("source"),
            external_id: w.annotation_name("external_id"),
            kernel: w.annotation_name("kernel"),
        };
        let counter_seq = w.sequence();
        let gpu = Gpu::new(&mut w);
        Renderer {
            w,
            names,
            process_names: FastMap::default(),
            thread_names: FastMap::default(),
            threads: FastMap::default(),
            late_seqs: Vec::new(),
            last_track: Vec::new(),
            counter_seq,
            live: LiveBytes::default(),
            own: OwnCalls::default(),
            app_summary: None,
            count_launches: false,
            marker_track: None,
            gpu,
            hold: Holdback::default(),
            externals: FastMap::default(),
            externals_age: VecDeque::new(),
            api_names: Vec::new(),
            kernel_names: FastMap::default(),
            dims: None,
            stats: RenderStats::default(),
            ranges: UserRanges::default(),
        }
    }

    /// Renders one record of input `stream` (whose header names process `pid`).
    pub fn record(
        &mut self,
        stream: usize,
        pid: u32,
        rec: &Record,
        late: bool,
    ) -> Result<(), WriterError> {
        let now = rec.timestamp();
        self.advance(now)?;
        match rec {
            Record::ProcessName(p) => {
                self.process_names.insert(p.pid, p.name.clone());
            }
            Record::ThreadName(t) => {
                self.thread_names.insert((pid, t.tid), t.name.clone());
            }
            Record::KernelName(k) => {
                // The CLI's names are demangled already; kreplay-tool's (CUPTI's) are not.
                let name = crate::trace::kernels::demangle(&k.name);
                self.kernel_names.insert((k.pid, k.handle), Rc::from(name));
            }
            Record::ApiCall(c) => {
                let seq = if late {
                    self.stats.late += 1;
                    let w = &mut self.w;
                    *stream_slot(&mut self.late_seqs, stream).get_or_insert_with(|| w.sequence())
                } else {
                    // One sequence per thread: its annotations, from another stream (NVTX,
                    // the tool's), open and close slices around these calls on one track.
                    self.thread_seq(c.pid, c.tid)
                };
                self.ranges.latest = self.ranges.latest.max(c.exit_ns);
                let spec = spec_of(c.api);
                let launch = spec.is_some_and(|s| s.kind == ApiKind::Launch);
                let copy = spec.is_some_and(|s| s.kind == ApiKind::Copy);
                let own = self.own.is_own(c);
                if own {
                    let name = spec.map_or("?", |s| s.name);
                    *self.stats.own_calls.entry(name).or_default() += 1;
                } else {
                    self.live.account(c);
                    if let Some(s) = &mut self.app_summary {
                        s.add(&call_record(c));
                        if launch && self.count_launches {
                            let kernel = spec.filter(|s| s.kernel_arg != NO_ARG).and_then(|s| {
                                self.kernel_names.get(&(c.pid, c.word(s.kernel_arg)))
                            });
                            s.add_launch(kernel.map(|k| &**k));
                        }
                    }
                }
                if self.hold.offer_gpu_call(seq, c, launch, copy, own) == Offer::WriteNow {
                    self.write_call(seq, c, &[], None, own)?;
                }
                self.write_ready()?;
            }
            Record::Drops(d) => {
                self.stats.dropped += d.count;
                let track = self.marker_track()?;
                let seq = self.counter_seq;
                let name = self.w.event_name("events dropped");
                let ann = [
                    Annotation {
                        name: self.names.count,
                        value: Value::Uint(d.count),
                    },
                    Annotation {
                        name: self.names.source,
                        value: Value::Str(&d.source),
                    },
                ];
                let args = EventArgs {
                    annotations: &ann,
                    ..Default::default()
                };
                self.w.instant(seq, track, name, d.ts_ns, &args)?;
            }
            Record::Correlation(c) => {
                if !self
                    .hold
                    .annotate_external(pid, c.tid, c.ts_ns, c.external_id)
                {
                    tracing::debug!(pid, tid = c.tid, "correlation outside a launch call");
                }
                self.externals
                    .insert((pid, c.correlation), (c.tid, c.ts_ns, c.external_id));
                self.externals_age.push_back((c.ts_ns, pid, c.correlation));
            }
            Record::Dispatch(d) => self.dispatch(pid, d, now)?,
            Record::GpuCopy(c) => self.gpu_copy(pid, c, now)?,
            Record::GpuDevice(g) => self.gpu.describe(if g.pid == 0 { pid } else { g.pid }, g),
            Record::ToolWindow(w) => {
                self.own
                    .add_window(w.pid, w.tid, w.start_ns, w.end_ns, late);
                self.stats.late_windows = self.own.late_windows;
            }
            Record::ReplayPass(_)
            | Record::Snapshot(_)
            | Record::Restore(_)
            | Record::ReplayStep(_) => self.replay_slice(pid, rec, late)?,
            Record::Decline(r) => {
                let ann = self.gpu.names.decline_args(&r.reason, r.correlation);
                self.gpu_instant(pid, r.correlation, "replay declined", r.ts_ns, &ann)?;
            }
            Record::Annotation(a) => self.user_mark(a)?,
            Record::Nondeterministic(r) => {
                let ann =
                    self.gpu
                        .names
                        .nondeterministic_args(r.pass, r.region, r.offset, r.correlation);
                self.gpu_instant(pid, r.correlation, "nondeterministic", r.ts_ns, &ann)?;
            }
        }
        Ok(())
    }

    /// Brings the time-ordered outputs up to merge time `now`: live-bytes values, dispatches
    /// that have started, launch slices whose dispatches have all been merged.
    fn advance(&mut self, now: u64) -> Result<(), WriterError> {
        let c = &mut self.stats.counter_values;
        self.live
            .flush(&mut self.w, self.counter_seq, now, &self.process_names, c)?;
        self.gpu
            .advance(&mut self.w, now, &mut self.stats.unrenderable)?;
        self.stats.dispatches = self.gpu.dispatches;
        self.stats.copies = self.gpu.copies;
        self.hold.advance(now);
        self.own.forget(now);
        while let Some(&(ts, pid, corr)) = self.externals_age.front() {
            if ts.saturating_add(FORGET_AFTER_NS) >= now {
                break;
            }
            self.externals_age.pop_front();
            if self.externals.get(&(pid, corr)).is_some_and(|e| e.1 == ts) {
                self.externals.remove(&(pid, corr));
            }
        }
        self.write_ready()
    }

    pub(super) fn child(&mut self, c: &Child<'_>) -> Result<(), WriterError> {
        let names = &self.process_names;
        let pname = |pid: u32| process_label(names, pid);
        let r = self.gpu.child(&mut self.w, c, &pname);
        if r.is_ok() {
            self.stats.slices += 1;
        }
        soft(r, &mut self.stats.unrenderable)
    }

    fn gpu_instant(
        &mut self,
        pid: u32,
        correlation: u64,
        name: &str,
        ts: u64,
        ann: &[Annotation<'_>],
    ) -> Result<(), WriterError> {
        let names = &self.process_names;
        let pname = |pid: u32| process_label(names, pid);
        let m = Mark {
            pid,
            correlation,
            name,
            ts,
            args: ann,
        };
        let r = self.gpu.instant(&mut self.w, &m, &pname);
        soft(r, &mut self.stats.unrenderable)
    }

    /// Writes the held calls whose turn has come.
    fn write_ready(&mut self) -> Result<(), WriterError> {
        if !self.hold.has_ready() {
            return Ok(());
        }
        let mut ready = self.hold.take_ready();
        for HeldCall {
            seq,
            call,
            flows,
            external,
            own,
            annotation,
            ..
        } in ready.drain(..)
        {
            match annotation {
                Some(a) => self.write_user_mark(seq, &a)?,
                None => self.write_call(seq, &call, &flows, external, own)?,
            }
        }
        self.hold.recycle(ready);
        Ok(())
    }

    /// Writes one call's slice (kreplay's `own` on its thread's [`OWN_TRACK`]); a call that
    /// cannot be placed is counted, not fatal.
    fn write_call(
        &mut self,
        seq: Sequence,
        c: &ApiCall,
        flows: &[u64],
        external: Option<u64>,
        own: bool,
    ) -> Result<(), WriterError> {
        let r = self.api_call(seq, c, flows, external, own);
        if r.is_ok() {
            self.stats.slices += 1;
        }
        soft(r, &mut self.stats.unrenderable)
    }

    fn marker_track(&mut self) -> Result<Track, WriterError> {
        if let Some(t) = self.marker_track {
            return Ok(t);
        }
        let t = self
            .w
            .process_track(std::process::id() as i32, "kreplay (tracer)")?;
        self.marker_track = Some(t);
        Ok(t)
    }

    pub(super) fn thread_track(&mut self, pid: u32, tid: u32) -> Result<Track, WriterError> {
        if let Some(&t) = self.threads.get(&(pid, tid)) {
            return Ok(t);
        }
        let pname = process_label(&self.process_names, pid);
        self.w.process_track(pid as i32, &pname)?;
        let tname = self
            .thread_names
            .get(&(pid, tid))
            .cloned()
            .unwrap_or_else(|| format!("thread {tid}"));
        let t = self.w.thread_track(pid as i32, tid as i32, &tname)?;
        self.threads.insert((pid, tid), t);
        Ok(t)
    }

    fn api_call(
        &mut self,
        seq: Sequence,
        c: &ApiCall,
        flows: &[u64],
        external: Option<u64>,
        own: bool,
    ) -> Result<(), WriterError> {
        // A sequence's calls are mostly one thread's: its last track, before the map.
        let last = stream_slot(&mut self.last_track, seq.trusted_id() as usize);
        let mut track = match *last {
            Some((pid, tid, t)) if (pid, tid) == (c.pid, c.tid) => t,
            _ => {
                let t = self.thread_track(c.pid, c.tid)?;
                self.last_track[seq.trusted_id() as usize] = Some((c.pid, c.tid, t));
                t
            }
        };
        if own {
            track = self.w.child_track(track, OWN_TRACK_KEY, OWN_TRACK)?;
        }
        let Some(spec) = spec_of(c.api) else {
            self.stats.unrenderable += 1;
            return Ok(());
        };
        let name = match self.api_names.get(usize::from(c.api)).copied().flatten() {
            Some(n) => n,
            None => {
                let n = self.w.event_name(spec.name);
                let i = usize::from(c.api);
                if self.api_names.len() <= i {
                    self.api_names.resize(i + 1, None);
                }
                self.api_names[i] = Some(n);
                n
            }
        };
        let n = &self.names;
        let arg = |i: u8| c.word(i);
        let kernel = (spec.kernel_arg != NO_ARG)
            .then(|| {
                self.kernel_names
                    .get(&(c.pid, arg(spec.kernel_arg)))
                    .cloned()
            })
            .flatten();
        let mut ann = Annotations::new();
        if let Some(k) = &kernel {
            ann.push(Annotation {
                name: n.kernel,
                value: Value::Str(k),
            });
        }
        let geometry: Option<([u64; 3], [u64; 3])> = match spec.geometry {
            Geometry::None => None,
            Geometry::Dim3Pairs(i) => Some((
                [arg(i) & 0xffff_ffff, arg(i) >> 32, arg(i + 1) & 0xffff_ffff],
                [
                    arg(i + 2) & 0xffff_ffff,
                    arg(i + 2) >> 32,
                    arg(i + 3) & 0xffff_ffff,
                ],
            )),
            Geometry::Scalars(i) => Some((
                [arg(i), arg(i + 1), arg(i + 2)].map(|v| v & 0xffff_ffff),
                [arg(i + 3), arg(i + 4), arg(i + 5)].map(|v| v & 0xffff_ffff),
            )),
            Geometry::ConfigStruct => {
                let w = c.extra;
                Some((
                    [w[0] & 0xffff_ffff, w[0] >> 32, w[1] & 0xffff_ffff],
                    [w[1] >> 32, w[2] & 0xffff_ffff, w[2] >> 32],
                ))
            }
        };
        if let Some(key) = geometry
            && self.dims.as_ref().is_none_or(|d| d.0 != key)
        {
            let label = |v| Dim3::new(v).as_str().to_owned();
            self.dims = Some((key, label(key.0), label(key.1)));
        }
        if let Some((_, g, b)) = geometry.and(self.dims.as_ref()) {
            ann.push(Annotation {
                name: n.grid,
                value: Value::Str(g),
            });
            ann.push(Annotation {
                name: n.block,
                value: Value::Str(b),
            });
        }
        if spec.library == Library::User {
            for (i, &a) in c.args.iter().enumerate() {
                ann.push(Annotation {
                    name: n.args[i],
                    value: Value::Uint(a),
                });
            }
        }
        if let Some(bytes) = spec.bytes(arg) {
            ann.push(Annotation {
                name: n.size,
                value: Value::Uint(bytes),
            });
        }
        if spec.ptr_arg != NO_ARG {
            ann.push(Annotation {
                name: n.ptr,
                value: Value::Pointer(arg(spec.ptr_arg)),
            });
        }
        if spec.stream_arg != NO_ARG {
            ann.push(Annotation {
                name: n.stream,
                value: Value::Pointer(arg(spec.stream_arg)),
            });
        }
        if spec.out_arg != NO_ARG && c.out != 0 {
            ann.push(Annotation {
                name: n.result,
                value: Value::Pointer(c.out),
            });
        }
        ann.push(Annotation {
            name: n.ret,
            value: Value::Int(c.ret as u32 as i32 as i64),
        });
        if let Some(ext) = external {
            ann.push(Annotation {
                name: n.external_id,
                value: Value::Uint(ext),
            });
        }
        let args = EventArgs {
            annotations: ann.as_slice(),
            flow_ids: flows,
            ..Default::default()
        };
        self.w.slice(
            seq,
            track,
            name,
            c.enter_ns,
            c.exit_ns.max(c.enter_ns),
            &args,
        )
    }

    /// Writes what is still pending and finishes the trace; returns the output and totals.
    pub fn finish(mut self) -> Result<(W, u64, RenderStats), WriterError> {
        self.hold.drain();
        self.write_ready()?;
        self.advance(u64::MAX)?;
        self.finish_user_marks()?;
        self.stats.annotations = self.ranges.written;
        self.stats.unmatched_annotations = self.ranges.unmatched;
        self.stats.forced_launches = self.hold.forced;
        self.stats.counter_values += self.gpu.busy.values;
        self.stats.gpu_kernels = self.gpu.kernel_times.rows();
        let bytes = self.w.bytes();
        let out = self.w.finish()?;
        Ok((out, bytes, self.stats))
    }

    /// Also keeps the per-API summary of the application's probed calls (kreplay's own left
    /// out); off by default (it costs a histogram update per call).
    pub fn summarize_app(&mut self) {
        self.app_summary.get_or_insert_with(Summary::default);
    }

    /// The per-API summary also counts launches per kernel name (after
    /// [`Renderer::summarize_app`]).
    pub fn count_launches(&mut self) {
        self.count_launches = true;
    }

    /// Takes the per-API summary kept since [`Renderer::summarize_app`] (empty without it).
    pub fn take_app_summary(&mut self) -> Summary {
        self.app_summary.take().unwrap_or_default()
    }

    /// Live bytes per (process, runtime layer) at the end of the rendered records.
    pub fn live_bytes(&self) -> &FastMap<(u32, Library), i64> {
        self.live.totals()
    }
}
