//! Rendering merged stream records as Perfetto tracks, slices, counters and markers.
//!
//! Probe records (`ApiCall`) become slices named after the API on their thread's track,
//! with the arguments that API has as debug annotations; allocations and frees drive a
//! per-process live-bytes counter; drop records become visible markers. Tool records
//! (dispatches, replay passes, snapshots, restores, declines) go on GPU queue tracks.
use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap},
    io::Write,
};

use kreplay_common::{
    api::{ApiKind, Geometry, Library, NO_ARG, spec_of},
    stream::{ApiCall, Record},
};

use crate::perfetto::{
    Annotation, AnnotationName, CounterUnit, EventArgs, Sequence, TraceWriter, Track, Value,
    WriterError,
};

/// Counts of what rendering did, for the end-of-run report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RenderStats {
    /// Slices written.
    pub slices: u64,
    /// Counter values written.
    pub counter_values: u64,
    /// Records that sorted before an earlier one of their stream (rendered on a side track).
    pub late: u64,
    /// Records that could not be placed on any track without breaking nesting (skipped,
    /// counted here and reported).
    pub unrenderable: u64,
    /// Events the capture reported lost.
    pub dropped: u64,
}

struct Names {
    ret: AnnotationName,
    size: AnnotationName,
    ptr: AnnotationName,
    result: AnnotationName,
    stream: AnnotationName,
    grid: AnnotationName,
    block: AnnotationName,
    args: [AnnotationName; 6],
    count: AnnotationName,
    source: AnnotationName,
}

/// A live-bytes change waiting for its time: (time, arrival order, pid, layer, delta).
type PendingDelta = (u64, u64, u32, Library, i64);

/// Turns merged records into a trace.
pub struct Renderer<W: Write> {
    w: TraceWriter<W>,
    names: Names,
    process_names: HashMap<u32, String>,
    thread_names: HashMap<(u32, u32), String>,
    threads: HashMap<(u32, u32), Track>,
    seqs: HashMap<usize, Sequence>,
    late_seqs: HashMap<usize, Sequence>,
    counter_seq: Sequence,
    counters: HashMap<(u32, Library), Track>,
    live: HashMap<(u32, Library, u64), u64>,
    live_bytes: HashMap<(u32, Library), i64>,
    /// Live-bytes changes not yet written: (time, order, pid, layer, delta). Allocation takes
    /// effect when the call returns, later than the entry time records are merged by.
    pending: BinaryHeap<Reverse<PendingDelta>>,
    pending_order: u64,
    marker_track: Option<Track>,
    /// What rendering did so far.
    pub stats: RenderStats,
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
        };
        let counter_seq = w.sequence();
        Renderer {
            w,
            names,
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
            threads: HashMap::new(),
            seqs: HashMap::new(),
            late_seqs: HashMap::new(),
            counter_seq,
            counters: HashMap::new(),
            live: HashMap::new(),
            live_bytes: HashMap::new(),
            pending: BinaryHeap::new(),
            pending_order: 0,
            marker_track: None,
            stats: RenderStats::default(),
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
        self.flush_counters(rec.timestamp())?;
        match rec {
            Record::ProcessName(p) => {
                self.process_names.insert(p.pid, p.name.clone());
            }
            Record::ThreadName(t) => {
                self.thread_names.insert((pid, t.tid), t.name.clone());
            }
            Record::ApiCall(c) => {
                let seq = if late {
                    self.stats.late += 1;
                    let w = &mut self.w;
                    *self.late_seqs.entry(stream).or_insert_with(|| w.sequence())
                } else {
                    let w = &mut self.w;
                    *self.seqs.entry(stream).or_insert_with(|| w.sequence())
                };
                match self.api_call(seq, c) {
                    Ok(()) => self.stats.slices += 1,
                    Err(WriterError::Io { call, source }) => {
                        return Err(WriterError::Io { call, source });
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "record skipped");
                        self.stats.unrenderable += 1;
                    }
                }
                self.account(c);
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
            _ => {}
        }
        Ok(())
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

    fn thread_track(&mut self, pid: u32, tid: u32) -> Result<Track, WriterError> {
        if let Some(&t) = self.threads.get(&(pid, tid)) {
            return Ok(t);
        }
        let pname = self
            .process_names
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| format!("pid {pid}"));
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

    fn api_call(&mut self, seq: Sequence, c: &ApiCall) -> Result<(), WriterError> {
        let track = self.thread_track(c.pid, c.tid)?;
        let Some(spec) = spec_of(c.api) else {
            self.stats.unrenderable += 1;
            return Ok(());
        };
        let name = self.w.event_name(spec.name);
        let n = &self.names;
        let arg = |i: u8| -> u64 {
            let i = i as usize;
            if i < 6 {
                c.args[i]
            } else {
                c.extra.get(i - 6).copied().unwrap_or(0)
            }
        };
        let mut ann: Vec<Annotation<'_>> = Vec::with_capacity(8);
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
        let grid_s;
        let block_s;
        if let Some((g, b)) = geometry {
            grid_s = format!("{}x{}x{}", g[0], g[1], g[2]);
            block_s = format!("{}x{}x{}", b[0], b[1], b[2]);
            ann.push(Annotation {
                name: n.grid,
                value: Value::Str(&grid_s),
            });
            ann.push(Annotation {
                name: n.block,
                value: Value::Str(&block_s),
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
        if spec.size_arg != NO_ARG {
            ann.push(Annotation {
                name: n.size,
                value: Value::Uint(arg(spec.size_arg)),
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
        let args = EventArgs {
            annotations: &ann,
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

    /// Queues the live-bytes change a successful allocation or free makes. Each runtime layer
    /// (HIP, HSA, CUDA) has its own counter: a HIP allocation is also an HSA allocation made
    /// on the application's behalf, and the HSA layer also holds the runtime's own memory.
    fn account(&mut self, c: &ApiCall) {
        let Some(spec) = spec_of(c.api) else { return };
        if c.ret as u32 != 0 {
            return;
        }
        let arg = |i: u8| {
            if (i as usize) < 6 {
                c.args[i as usize]
            } else {
                c.extra[i as usize - 6]
            }
        };
        let delta = match spec.kind {
            ApiKind::Alloc if c.out != 0 && spec.size_arg != NO_ARG => {
                let size = arg(spec.size_arg);
                if self
                    .live
                    .insert((c.pid, spec.library, c.out), size)
                    .is_some()
                {
                    return;
                }
                size as i64
            }
            ApiKind::Free if spec.ptr_arg != NO_ARG => {
                match self.live.remove(&(c.pid, spec.library, arg(spec.ptr_arg))) {
                    Some(size) => -(size as i64),
                    None => return,
                }
            }
            _ => return,
        };
        self.pending_order += 1;
        self.pending.push(Reverse((
            c.exit_ns,
            self.pending_order,
            c.pid,
            spec.library,
            delta,
        )));
    }

    /// Writes the live-bytes values whose time is at or before `now`.
    fn flush_counters(&mut self, now: u64) -> Result<(), WriterError> {
        while let Some(&Reverse((ts, _, pid, layer, delta))) = self.pending.peek() {
            if ts > now {
                break;
            }
            self.pending.pop();
            let live = self.live_bytes.entry((pid, layer)).or_default();
            *live += delta;
            let value = *live;
            let track = match self.counters.get(&(pid, layer)) {
                Some(&t) => t,
                None => {
                    let pname = self
                        .process_names
                        .get(&pid)
                        .cloned()
                        .unwrap_or_else(|| format!("pid {pid}"));
                    let parent = self.w.process_track(pid as i32, &pname)?;
                    let name = format!("live bytes ({})", layer_name(layer));
                    let t =
                        self.w
                            .counter_track(Some(parent), &name, CounterUnit::UnitSizeBytes)?;
                    self.counters.insert((pid, layer), t);
                    t
                }
            };
            self.w.counter(self.counter_seq, track, ts, value)?;
            self.stats.counter_values += 1;
        }
        Ok(())
    }

    /// Writes what is still pending and finishes the trace; returns the output and totals.
    pub fn finish(mut self) -> Result<(W, u64, RenderStats), WriterError> {
        self.flush_counters(u64::MAX)?;
        let bytes = self.w.bytes();
        let out = self.w.finish()?;
        Ok((out, bytes, self.stats))
    }

    /// Live bytes per (process, runtime layer) at the end of the rendered records.
    pub fn live_bytes(&self) -> &HashMap<(u32, Library), i64> {
        &self.live_bytes
    }
}

/// The name a runtime layer's counter carries.
pub fn layer_name(layer: Library) -> &'static str {
    match layer {
        Library::Hsa => "HSA",
        Library::Hip => "HIP",
        Library::Cuda => "CUDA driver",
        Library::CudaRt => "CUDA runtime",
        Library::User => "user",
    }
}
