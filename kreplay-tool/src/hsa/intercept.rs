//! Queue interception: `hsa_queue_create` becomes `hsa_amd_queue_intercept_create` plus a
//! handler (as rocprofiler does). The handler splits each batch into submissions at the
//! doorbell values the application wrote ([`super::submissions`]) and handles them in order:
//! a single-packet, single-dispatch submission of a selected kernel is replayed inside the
//! agent's replay window (after every earlier packet of the batch has been forwarded and has
//! completed: the window drains them); every other submission takes the normal path, its
//! dispatches holding the window shared until they complete (kreplay's completion signal,
//! forwarded to the application's). Multi-packet submissions — HIP graph launches, a barrier
//! packet with its dispatch, several dispatches rung with one doorbell — are not replayed; a
//! warning is given once per process.

use core::ffi::c_void;
use kreplay_common::stream::monotonic_ns as now_ns;
use std::sync::atomic::Ordering;

use kreplay_common::stream::{Dispatch, Record};

use super::backend::HsaDispatch;
use super::ffi::{
    hsa_agent_t, hsa_amd_queue_intercept_packet_writer, hsa_kernel_dispatch_packet_t,
    hsa_queue_error_callback, hsa_queue_t, hsa_signal_t, hsa_status_t, packet, status,
};
use super::hooks::{Forward, arm_forward};
use super::state::{Tool, tool};
use super::submissions::{Bounds, Origin, register};
use crate::amd_next;
use crate::engine::gate::DRAIN_LIMIT;
use crate::engine::replay::decline;
use crate::engine::state::{Marks, Ran};

struct QueueCtx {
    agent: u64,
    queue: u64,
    bounds: Bounds,
}

/// Wrapper of `hsa_queue_create`: an intercept queue with kreplay's handler.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn queue_create(
    agent: hsa_agent_t,
    size: u32,
    type_: u32,
    callback: hsa_queue_error_callback,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let create = amd_next!(t.backend.next(), hsa_amd_queue_intercept_create_fn);
    let register_handler = amd_next!(t.backend.next(), hsa_amd_queue_intercept_register_fn);
    let (Some(create), Some(register_handler)) = (create, register_handler) else {
        let Some(next) = t.backend.next().core.hsa_queue_create_fn else {
            return status::ERROR;
        };
        // SAFETY: the application's arguments, passed through.
        return unsafe {
            next(
                agent,
                size,
                type_,
                callback,
                data,
                private_segment_size,
                group_segment_size,
                queue,
            )
        };
    };
    // SAFETY: the application's arguments, creating an intercept queue instead.
    let st = unsafe {
        create(
            agent,
            size,
            type_,
            callback,
            data,
            private_segment_size,
            group_segment_size,
            queue,
        )
    };
    if st != status::SUCCESS || queue.is_null() {
        return st;
    }
    // SAFETY: the runtime wrote the new queue into *queue.
    let q = unsafe { *queue };
    // Described before any of its dispatches is recorded.
    let _ = crate::fault::guard(|| super::devices::announce(t.backend.next(), agent.handle));
    t.queues
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(q as u64);
    if let Some(tl) = t.timeline() {
        // SAFETY: q is the queue the runtime just created.
        let _ = crate::fault::guard(|| unsafe { tl.enable_queue(t.backend.next(), q) });
    }
    // SAFETY: the runtime returned a live queue; its doorbell handle is read once.
    let doorbell = unsafe { (*q).doorbell_signal.handle };
    // Leaked on purpose: queues may outlive any point where freeing it would be safe.
    let ctx: &'static QueueCtx = Box::leak(Box::new(QueueCtx {
        agent: agent.handle,
        queue: q as u64,
        bounds: Bounds::default(),
    }));
    // Registered before the handler, so no doorbell write of this queue goes unseen.
    let _ = crate::fault::guard(|| {
        crate::fault::point("hsa.queue_create");
        register(doorbell, &ctx.bounds)
    });
    // SAFETY: q is the new intercept queue; ctx lives as long as the process.
    let rst = unsafe { register_handler(q, Some(handler), ctx as *const QueueCtx as *mut c_void) };
    if rst != status::SUCCESS {
        tracing::warn!(
            "kreplay: intercept registration failed ({rst:#x}); this queue is not replayed"
        );
    }
    st
}

/// Wrapper of `hsa_queue_destroy`: the queue leaves the list an attach turns profiling on in.
///
/// # Safety
/// Called by the runtime (through its table) with the arguments of the wrapped function.
pub unsafe extern "C" fn queue_destroy(q: *mut hsa_queue_t) -> hsa_status_t {
    let Some(t) = tool() else {
        return status::ERROR_NOT_INITIALIZED;
    };
    let _ = crate::fault::guard(|| {
        t.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&x| x != q as u64);
    });
    let Some(next) = t.backend.next().core.hsa_queue_destroy_fn else {
        return status::ERROR;
    };
    // SAFETY: the application's argument, passed through.
    unsafe { next(q) }
}

fn packet_type(header: u16) -> u16 {
    header & 0xff
}

unsafe extern "C" fn handler(
    pkts: *const c_void,
    count: u64,
    user_idx: u64,
    data: *mut c_void,
    writer: hsa_amd_queue_intercept_packet_writer,
) {
    // Packets before `from` have run or were forwarded (`handle` says so as soon as they
    // have); on a panic the rest is forwarded untouched (as before a submission was judged on
    // its own), and none twice.
    let from = std::cell::Cell::new(0usize);
    let handled = crate::fault::guard(std::panic::AssertUnwindSafe(|| {
        crate::fault::point("hsa.dispatch");
        let (Some(t), false) = (tool(), data.is_null()) else {
            return false;
        };
        // SAFETY: data is the QueueCtx registered with this queue.
        let ctx = unsafe { &*(data as *const QueueCtx) };
        if t.passing_through() {
            // Waiting for a kreplay: the doorbell bookkeeping goes on, the packets go through
            // as the application wrote them.
            let _ = ctx.bounds.split(user_idx, count as usize);
            if let Some(w) = writer {
                // SAFETY: the runtime's own packets and count, forwarded unchanged.
                unsafe { w(pkts, count) };
                from.set(count as usize);
            }
            return true;
        }
        // SAFETY: the runtime hands count 64-byte packets at pkts.
        let batch = unsafe {
            std::slice::from_raw_parts(pkts as *const hsa_kernel_dispatch_packet_t, count as usize)
        };
        let subs = ctx.bounds.split(user_idx, batch.len());
        if subs.len() > 1 {
            tracing::debug!(
                "kreplay: batch of {} packets holds {} submissions",
                batch.len(),
                subs.len()
            );
        }
        for sub in subs {
            let end = sub.packets.end;
            handle(t, ctx, &batch[sub.packets], sub.origin, writer, &|| {
                from.set(end)
            });
            from.set(end);
        }
        true
    }));
    let from = from.get().min(count as usize);
    if !matches!(handled, Ok(true))
        && let Some(w) = writer
        && from < count as usize
    {
        // Forwarded untouched, these packets are not counted in the agent's gate: they must not
        // run inside another queue's replay window, whose restores would undo what they write.
        // A replay already past its start when the panic stopped replay ends in bounded time.
        let _ = crate::fault::guard(|| {
            if let (Some(t), false) = (tool(), data.is_null()) {
                // SAFETY: data is the QueueCtx registered with this queue.
                let ctx = unsafe { &*(data as *const QueueCtx) };
                t.engine.gate(ctx.agent).wait_open(DRAIN_LIMIT);
            }
        });
        // SAFETY: the packets not yet handled, forwarded as the runtime gave them (64 bytes each).
        unsafe {
            w(
                (pkts as *const u8).add(from * 64) as *const c_void,
                count - from as u64,
            )
        };
    }
}

/// Forwards, or replays, one submission; `ran` is called as soon as its packets have run or
/// were forwarded.
fn handle(
    t: &Tool,
    ctx: &QueueCtx,
    batch: &[hsa_kernel_dispatch_packet_t],
    origin: Option<Origin>,
    writer: hsa_amd_queue_intercept_packet_writer,
    ran: &dyn Fn(),
) {
    let dispatches = batch
        .iter()
        .filter(|p| packet_type(p.header) == packet::TYPE_KERNEL_DISPATCH)
        .count();
    if batch.len() == 1 && dispatches == 1 {
        let p = batch[0];
        let name = kernel_name(t, ctx.agent, p.kernel_object);
        let corr = t.engine.next_correlation();
        if t.engine.wants(&name) {
            replay_one(t, ctx, p, (name, corr), origin, writer, ran);
            return;
        }
        pass_through(t, ctx, batch, origin, writer, Some((name, corr)), ran);
        return;
    }
    if dispatches > 0
        && t.engine.replaying()
        && !t.engine.graph_warned.swap(true, Ordering::Relaxed)
    {
        tracing::warn!(
            "kreplay: multi-packet submissions (HIP graph launches, a barrier packet with its dispatch, several packets rung with one doorbell) are not replayed; they run once (warned once per process)"
        );
    }
    pass_through(t, ctx, batch, origin, writer, None, ran);
}

fn kernel_name(t: &Tool, agent: u64, object: u64) -> String {
    t.engine
        .kernel_name(object, || t.backend.kernel_name(agent, object))
}

/// The dispatch's record: submitted by the thread that rang the doorbell, when it rang (the
/// handler's thread and `submit` when the ring was not seen).
#[expect(
    clippy::too_many_arguments,
    reason = "the values of one record or call, as the caller has them"
)]
fn dispatch_record(
    ctx: &QueueCtx,
    p: &hsa_kernel_dispatch_packet_t,
    name: String,
    corr: u64,
    origin: Option<Origin>,
    submit: u64,
    start: u64,
    end: u64,
) -> Record {
    Dispatch {
        pid: crate::record::current_pid(),
        tid: origin.map_or_else(crate::record::current_tid, |o| o.tid),
        agent: ctx.agent,
        queue: ctx.queue,
        kernel: name,
        correlation: corr,
        kernel_object: p.kernel_object,
        grid: [p.grid_size_x, p.grid_size_y, p.grid_size_z],
        workgroup: [
            u32::from(p.workgroup_size_x),
            u32::from(p.workgroup_size_y),
            u32::from(p.workgroup_size_z),
        ],
        submit_ns: origin.map_or(submit, |o| o.ts_ns),
        start_ns: start,
        end_ns: end,
        group_segment: p.group_segment_size,
        private_segment: p.private_segment_size,
    }
    .into()
}

/// Forwards the batch; each dispatch in it holds the agent's window shared until it completes.
/// `ran` is called once it is forwarded.
fn pass_through(
    t: &Tool,
    ctx: &QueueCtx,
    batch: &[hsa_kernel_dispatch_packet_t],
    origin: Option<Origin>,
    writer: hsa_amd_queue_intercept_packet_writer,
    single: Option<(String, u64)>,
    ran: &dyn Fn(),
) {
    let Some(w) = writer else { return };
    let gate = t.engine.gate(ctx.agent);
    let mut out = batch.to_vec();
    let submit = now_ns();
    let mut single = single;
    let multi = batch.len() > 1;
    for p in out
        .iter_mut()
        .filter(|p| packet_type(p.header) == packet::TYPE_KERNEL_DISPATCH)
    {
        let id = single.take().or_else(|| {
            let name = kernel_name(t, ctx.agent, p.kernel_object);
            let corr = t.engine.next_correlation();
            if multi && t.engine.replaying() && t.engine.config().selects(&name) {
                decline(corr, "multi-packet submission".into());
            }
            Some((name, corr))
        });
        let Some(own) = t.backend.take_signal() else {
            continue;
        };
        gate.enter();
        let app = p.completion_signal;
        let done: Option<Box<dyn FnOnce(hsa_signal_t) + Send>> = id.map(|(name, corr)| {
            let rec = dispatch_record(ctx, p, name, corr, origin, submit, submit, 0);
            let agent = ctx.agent;
            Box::new(move |own: hsa_signal_t| {
                if let Record::Dispatch(mut d) = rec {
                    match tool().and_then(|t| Some((t, t.timeline()?))) {
                        // The GPU's own times; none (0) when the runtime has none for it.
                        Some((t, tl)) => {
                            (d.start_ns, d.end_ns) = tl
                                .dispatch_times(t.backend.next(), agent, own)
                                .unwrap_or((0, 0));
                        }
                        // No timeline: when the completion was seen.
                        None => d.end_ns = now_ns(),
                    }
                    crate::record::global().record(d.into());
                }
            }) as Box<dyn FnOnce(hsa_signal_t) + Send>
        });
        match arm_forward(
            t,
            Box::new(Forward {
                own,
                app,
                gates: vec![gate.clone()],
                copies: Vec::new(),
                done,
            }),
        ) {
            Ok(()) => p.completion_signal = own,
            Err(fwd) => {
                gate.exit();
                t.backend.give_signal(fwd.own);
            }
        }
    }
    // SAFETY: the batch with only completion signals substituted, via this handler's writer.
    unsafe { w(out.as_ptr() as *const c_void, out.len() as u64) };
    ran();
}

/// The end of a replayed (or once-run) dispatch, done when dropped, also when a panic unwinds
/// past it: the agent's window opens, then the application's completion signal completes, in
/// that order (as without a panic), so that work waiting on the signal starts outside the
/// window and a replay that closes it next sees it drained.
struct Finish<'a> {
    t: &'a Tool,
    window: Option<crate::engine::gate::Window<'a>>,
    signal: super::ffi::hsa_signal_t,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        drop(self.window.take());
        self.t.backend.complete_app_signal(self.signal);
    }
}

/// Replays one dispatch inside the agent's window, or declines it and runs it once; `ran`
/// is called once it has run.
fn replay_one(
    t: &Tool,
    ctx: &QueueCtx,
    p: hsa_kernel_dispatch_packet_t,
    (name, corr): (String, u64),
    origin: Option<Origin>,
    writer: hsa_amd_queue_intercept_packet_writer,
    ran: &dyn Fn(),
) {
    let live_vmem = t.vmem.lock().unwrap_or_else(|e| e.into_inner()).len();
    if live_vmem > 0 {
        decline(
            corr,
            format!(
                "vmem-mapped memory that cannot be snapshotted is live ({live_vmem} mappings of fine-grained, host or unknown memory)"
            ),
        );
        t.engine.give_back();
        pass_through(t, ctx, &[p], origin, writer, Some((name, corr)), ran);
        return;
    }
    let gate = t.engine.gate(ctx.agent);
    let Some(window) = gate.close_window(DRAIN_LIMIT, &|deps| super::hooks::deps_blocked(t, deps))
    else {
        decline(corr, "the agent did not drain".into());
        t.engine.give_back();
        pass_through(t, ctx, &[p], origin, writer, Some((name, corr)), ran);
        return;
    };
    let submit = now_ns();
    let d = HsaDispatch {
        packet: p,
        writer,
        agent: ctx.agent,
        timeline: t.timeline().copied(),
    };
    let mut marks = Marks::default();
    let outcome = t.engine.replay_closed(
        &t.backend,
        &d,
        ctx.agent,
        corr,
        Some(&t.arena),
        &mut marks,
        false,
    );
    if outcome != Ran::Replayed {
        // Run once, normally, still inside the window: the memory is the snapshot's.
        let _ = crate::engine::backend::Backend::submit_wait(&t.backend, &d);
    }
    ran();
    let finish = Finish {
        t,
        window: Some(window),
        signal: p.completion_signal,
    };
    crate::fault::point("hsa.replayed");
    let end = now_ns();
    crate::record::global().record(dispatch_record(
        ctx,
        &p,
        name,
        corr,
        origin,
        submit,
        if marks.first_start == 0 {
            submit
        } else {
            marks.first_start
        },
        end,
    ));
    t.engine.replay_recorded(&marks);
    drop(finish);
}
