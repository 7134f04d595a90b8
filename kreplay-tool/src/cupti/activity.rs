//! CUPTI activity records as kreplay reads them, and how GPU records are tied to the API call
//! that caused them.
//!
//! Layouts (`cupti_activity.h`, `PACKED_ALIGNMENT`: packed, 8-byte aligned; CUPTI 12.x–13.x,
//! whose current kernel record is `CUpti_ActivityKernel9`/`10` and copy record
//! `CUpti_ActivityMemcpy5`/`6`): only the leading fields, identical in those versions, are read.
//! - every record: `kind u32 @0`.
//! - API (`CUpti_ActivityAPI`, kinds DRIVER 4 and RUNTIME 5): `cbid u32 @4, start u64 @8,
//!   end @16, processId u32 @24, threadId @28, correlationId @32, returnValue @36`.
//! - kernel (CONCURRENT_KERNEL 10): `start u64 @16, end @24, deviceId u32 @40, contextId @44,
//!   streamId @48, gridX/Y/Z i32 @52/56/60, blockX/Y/Z @64/68/72, staticSharedMemory @76,
//!   dynamicSharedMemory @80, localMemoryPerThread u32 @84, correlationId @92, name ptr @104`.
//! - memcpy (MEMCPY 1): `copyKind u8 @4, bytes u64 @8, start @16, end @24, deviceId u32 @32,
//!   streamId @40, correlationId @44`.
//! - memset (MEMSET 2): `bytes u64 @8, start @16, end @24, deviceId u32 @32, streamId @40,
//!   correlationId @44`.
//!
//! Joining: a kernel, copy or memset record carries the correlation id of the runtime or driver
//! API call that launched it; that call's API record gives its thread (the system thread id,
//! `cuptiSetThreadIdType(SYSTEM)`) and the submit time, where the merge looks for the flow's
//! source: inside a probed launch or copy call on that thread. For a driver call that is its
//! start. For a runtime call it is the middle of the call: the runtime that made the call may be
//! one no probe sees (cuBLAS links its own copy of cudart, and its launches show only as the
//! driver's `cuLaunchKernelEx`), and CUPTI gives no record of the driver call it made, but a
//! runtime launch or copy spends nearly all of its time in that driver call. Any probed call of
//! the thread within the runtime call's span is part of it, so the middle finds either the
//! runtime call itself (when its library is probed) or the driver call inside it. RUNTIME
//! records are needed even so: with them off, CUPTI 13 still gives the work the runtime call's
//! correlation id, which then matches no record (the driver call inside has its own). API and GPU
//! records may arrive in different buffers (a thread's API records can come a flush after the
//! kernels they launched): GPU records go out in the order they came, each once its call is
//! known or [`MAX_WAIT_NS`] after it came without it.

use std::collections::{HashMap, VecDeque};

use kreplay_common::stream::{Dispatch, GpuCopy, Record, copy_kind};

use super::launch_calls::ApiRecord;
use super::launch_calls::LaunchCalls;

/// `CUPTI_ACTIVITY_KIND_MEMCPY`.
pub const KIND_MEMCPY: u32 = 1;
/// `CUPTI_ACTIVITY_KIND_MEMSET`.
pub const KIND_MEMSET: u32 = 2;
/// `CUPTI_ACTIVITY_KIND_DRIVER`.
pub const KIND_DRIVER: u32 = 4;
/// `CUPTI_ACTIVITY_KIND_RUNTIME`.
pub const KIND_RUNTIME: u32 = 5;
/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`.
pub const KIND_CONCURRENT_KERNEL: u32 = 10;

/// How long a GPU record waits for its API record after its buffer came: the records of every
/// thread reach kreplay at each periodic flush (200 ms), so this spans two of them.
pub const MAX_WAIT_NS: u64 = 500_000_000;
/// API records remembered for GPU records still to come.
const MAX_CALLS: usize = 1 << 18;

/// One activity record, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Activity {
    /// A runtime or driver API call.
    Api(ApiRecord),
    /// A kernel, as a `Dispatch` still without its thread and submit time.
    Kernel(Dispatch),
    /// A copy or memset, likewise.
    Copy(GpuCopy),
}

/// Reads a `T` at byte `at` of a record.
///
/// # Safety
/// `rec` points to a CUPTI record of at least `at + size_of::<T>()` bytes.
unsafe fn field<T: Copy>(rec: *const u8, at: usize) -> T {
    // SAFETY: the caller's contract; CUPTI's records are packed, hence the unaligned read.
    unsafe { core::ptr::read_unaligned(rec.add(at) as *const T) }
}

/// CUPTI's `copyKind` as a [`copy_kind`] code.
pub fn copy_kind_of(cupti: u8) -> u8 {
    match cupti {
        1 => copy_kind::HOST_TO_DEVICE,
        2 => copy_kind::DEVICE_TO_HOST,
        8 | 10 => copy_kind::DEVICE_TO_DEVICE,
        9 => copy_kind::HOST_TO_HOST,
        _ => copy_kind::UNKNOWN,
    }
}

/// Reads the record at `rec` (`None` for kinds kreplay does not enable).
///
/// # Safety
/// `rec` is a record `cuptiActivityGetNextRecord` returned, whose buffer is still live.
pub unsafe fn read(rec: *const u8, pid: u32) -> Option<Activity> {
    // SAFETY: every record starts with its kind (caller's contract), and each kind's struct
    // holds the fields read below (module docs).
    unsafe {
        let kind: u32 = field(rec, 0);
        Some(match kind {
            KIND_DRIVER | KIND_RUNTIME => Activity::Api(ApiRecord {
                start: field(rec, 8),
                end: field(rec, 16),
                tid: field(rec, 28),
                correlation: field(rec, 32),
                driver: kind == KIND_DRIVER,
                cbid: field(rec, 4),
                ret: field(rec, 36),
            }),
            KIND_CONCURRENT_KERNEL => {
                let name: *const core::ffi::c_char = field(rec, 104);
                let kernel = if name.is_null() {
                    "(unnamed kernel)".to_owned()
                } else {
                    core::ffi::CStr::from_ptr(name)
                        .to_string_lossy()
                        .into_owned()
                };
                let g = |at| field::<i32>(rec, at).max(0) as u32;
                let block = [g(64), g(68), g(72)];
                let (start, end): (u64, u64) = (field(rec, 16), field(rec, 24));
                Activity::Kernel(Dispatch {
                    pid,
                    tid: 0,
                    agent: u64::from(field::<u32>(rec, 40)),
                    queue: u64::from(field::<u32>(rec, 48)),
                    kernel,
                    correlation: u64::from(field::<u32>(rec, 92)),
                    kernel_object: 0,
                    grid: [
                        g(52).saturating_mul(block[0]),
                        g(56).saturating_mul(block[1]),
                        g(60).saturating_mul(block[2]),
                    ],
                    workgroup: block,
                    submit_ns: start,
                    start_ns: start,
                    end_ns: end,
                    group_segment: g(76).saturating_add(g(80)),
                    private_segment: field(rec, 84),
                })
            }
            KIND_MEMCPY | KIND_MEMSET => Activity::Copy(GpuCopy {
                pid,
                tid: 0,
                device: u64::from(field::<u32>(rec, 32)),
                engine: u64::from(field::<u32>(rec, 40)),
                correlation: u64::from(field::<u32>(rec, 44)),
                kind: if kind == KIND_MEMSET {
                    copy_kind::MEMSET
                } else {
                    copy_kind_of(field(rec, 4))
                },
                bytes: field(rec, 8),
                submit_ns: field(rec, 16),
                start_ns: field(rec, 16),
                end_ns: field(rec, 24),
            }),
            _ => return None,
        })
    }
}

/// Ties GPU records to their API calls across buffers.
#[derive(Default)]
pub struct Joiner {
    /// Each call's thread and the submit time of what it caused.
    calls: HashMap<u32, (u32, u64)>,
    order: VecDeque<u32>,
    /// GPU records in arrival order, each with the time its buffer came.
    pending: VecDeque<(Activity, u64)>,
    /// GPU records given out without their API call.
    unlinked: u64,
    /// Launch calls turned into `ApiCall` records (`--cupti-launches`).
    launches: Option<LaunchCalls>,
}

impl Joiner {
    /// A joiner that also writes each launch call's `ApiCall` ([`LaunchCalls`]).
    pub fn with_launch_calls(launches: LaunchCalls) -> Self {
        Self {
            launches: Some(launches),
            ..Self::default()
        }
    }

    /// Takes the records of one completed buffer, handed over at `now` (ns); returns the GPU
    /// records ready to write, in the order they arrived: each once its call is known, or
    /// [`MAX_WAIT_NS`] after it came without it; one still waiting holds back those behind it.
    pub fn buffer(&mut self, acts: impl IntoIterator<Item = Activity>, now: u64) -> Vec<Record> {
        for a in acts {
            match a {
                Activity::Api(r) => {
                    if let Some(l) = &mut self.launches {
                        l.api(r, now);
                    }
                    let submit = if r.driver {
                        r.start
                    } else {
                        r.start + r.end.saturating_sub(r.start) / 2
                    };
                    if self.calls.insert(r.correlation, (r.tid, submit)).is_none() {
                        self.order.push_back(r.correlation);
                    }
                    if self.order.len() > MAX_CALLS
                        && let Some(old) = self.order.pop_front()
                    {
                        self.calls.remove(&old);
                    }
                }
                gpu => self.pending.push_back((gpu, now)),
            }
        }
        let mut out = Vec::new();
        while let Some((a, came)) = self.pending.front() {
            let call = self.calls.get(&correlation(a)).copied();
            if call.is_none() && now.saturating_sub(*came) < MAX_WAIT_NS {
                break;
            }
            let (a, _) = self.pending.pop_front().expect("front exists");
            self.linked(a, call, &mut out);
        }
        if let Some(l) = &mut self.launches {
            l.expired(now, MAX_WAIT_NS, &mut out);
        }
        out
    }

    /// Every GPU record still waiting, with its call when known (the last flush).
    pub fn finish(&mut self) -> Vec<Record> {
        let rest: Vec<Activity> = self.pending.drain(..).map(|(a, _)| a).collect();
        let mut out = Vec::new();
        for a in rest {
            let call = self.calls.get(&correlation(&a)).copied();
            self.linked(a, call, &mut out);
        }
        if let Some(l) = &mut self.launches {
            l.expired(u64::MAX, MAX_WAIT_NS, &mut out);
        }
        out
    }

    /// GPU records given out so far without their API call.
    pub fn unlinked(&self) -> u64 {
        self.unlinked
    }

    /// Appends `a` linked to `call`, after its launch call's `ApiCall` when that is kept.
    fn linked(&mut self, a: Activity, call: Option<(u32, u64)>, out: &mut Vec<Record>) {
        if call.is_none() {
            self.unlinked += 1;
        }
        let r = linked(a, call);
        if let (Some(l), Record::Dispatch(d)) = (&mut self.launches, &r) {
            l.with_kernel(d, out);
        }
        out.push(r);
    }
}

/// The correlation id of a record (API records never wait, so only GPU records ask).
fn correlation(a: &Activity) -> u32 {
    match a {
        Activity::Kernel(d) => d.correlation as u32,
        Activity::Copy(c) => c.correlation as u32,
        Activity::Api(r) => r.correlation,
    }
}

/// The GPU record with its submitting thread and submit time.
fn linked(a: Activity, call: Option<(u32, u64)>) -> Record {
    match a {
        Activity::Kernel(mut d) => {
            if let Some((tid, start)) = call {
                (d.tid, d.submit_ns) = (tid, start.min(d.start_ns));
            }
            d.into()
        }
        Activity::Copy(mut c) => {
            if let Some((tid, start)) = call {
                (c.tid, c.submit_ns) = (tid, start.min(c.start_ns));
            }
            c.into()
        }
        Activity::Api(_) => unreachable!("API records are never pending"),
    }
}

#[cfg(test)]
mod tests;
