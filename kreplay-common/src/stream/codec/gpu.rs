//! Bodies of the GPU records: `Dispatch` (tag 4, its segment sizes appended in version 6),
//! `GpuCopy` (tag 17, version 6) and `GpuDevice` (tag 18, version 7).

use super::super::record::{Dispatch, GpuCopy, GpuDevice};
use super::{DISPATCH_SEGMENTS_SINCE, Dec, Enc, tag};

/// Writes a `Dispatch` body as a writer of format `version` does; returns its tag.
pub(super) fn encode_dispatch(e: &mut Enc<'_>, r: &Dispatch, version: u16) -> u8 {
    e.u32(r.pid);
    e.u32(r.tid);
    e.u64s(&[r.agent, r.queue, r.correlation, r.kernel_object]);
    e.u32s(&r.grid);
    e.u32s(&r.workgroup);
    e.u64s(&[r.submit_ns, r.start_ns, r.end_ns]);
    e.str(&r.kernel);
    if version >= DISPATCH_SEGMENTS_SINCE {
        e.u32s(&[r.group_segment, r.private_segment]);
    }
    tag::DISPATCH
}

/// Writes a `GpuCopy` body; returns its tag.
pub(super) fn encode_copy(e: &mut Enc<'_>, r: &GpuCopy) -> u8 {
    e.u32(r.pid);
    e.u32(r.tid);
    e.u64s(&[r.device, r.engine, r.correlation]);
    e.u8(r.kind);
    e.u64s(&[r.bytes, r.submit_ns, r.start_ns, r.end_ns]);
    tag::GPU_COPY
}

/// Writes a `GpuDevice` body; returns its tag.
pub(super) fn encode_device(e: &mut Enc<'_>, r: &GpuDevice) -> u8 {
    e.u32(r.pid);
    e.u64(r.device);
    e.u8(r.runtime);
    e.u8(r.queues);
    e.u32(r.ordinal);
    e.str(&r.name);
    tag::GPU_DEVICE
}

/// A `Dispatch` body of a stream of format `version`; `None` when it is cut short.
pub(super) fn dispatch(d: &mut Dec<'_>, version: u16) -> Option<Dispatch> {
    let (pid, tid) = (d.u32()?, d.u32()?);
    let [agent, queue, correlation, kernel_object] = d.u64s()?;
    let (grid, workgroup) = (d.u32s()?, d.u32s()?);
    let [submit_ns, start_ns, end_ns] = d.u64s()?;
    let kernel = d.str()?;
    // Version 6 appended the segment sizes: required from it on, 0 before.
    let [group_segment, private_segment] = if version >= DISPATCH_SEGMENTS_SINCE {
        d.u32s()?
    } else {
        [0, 0]
    };
    Some(Dispatch {
        pid,
        tid,
        agent,
        queue,
        kernel,
        correlation,
        kernel_object,
        grid,
        workgroup,
        submit_ns,
        start_ns,
        end_ns,
        group_segment,
        private_segment,
    })
}

/// A `GpuCopy` body; `None` when it is cut short.
pub(super) fn copy(d: &mut Dec<'_>) -> Option<GpuCopy> {
    let (pid, tid) = (d.u32()?, d.u32()?);
    let [device, engine, correlation] = d.u64s()?;
    let kind = d.u8()?;
    let [bytes, submit_ns, start_ns, end_ns] = d.u64s()?;
    Some(GpuCopy {
        pid,
        tid,
        device,
        engine,
        correlation,
        kind,
        bytes,
        submit_ns,
        start_ns,
        end_ns,
    })
}

/// A `GpuDevice` body; `None` when it is cut short.
pub(super) fn device(d: &mut Dec<'_>) -> Option<GpuDevice> {
    Some(GpuDevice {
        pid: d.u32()?,
        device: d.u64()?,
        runtime: d.u8()?,
        queues: d.u8()?,
        ordinal: d.u32()?,
        name: d.str()?,
    })
}
