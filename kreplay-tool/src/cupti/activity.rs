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
mod tests {
    use super::*;

    /// A record of `size` bytes of kind `kind` with `fields` (offset, little-endian bytes).
    fn rec(kind: u32, size: usize, fields: &[(usize, &[u8])]) -> Vec<u64> {
        let mut b = vec![0u8; size];
        b[..4].copy_from_slice(&kind.to_le_bytes());
        for (at, v) in fields {
            b[*at..*at + v.len()].copy_from_slice(v);
        }
        // 8-byte aligned storage, as CUPTI's buffers are.
        b.chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect()
    }

    #[test]
    fn records_read_at_the_header_offsets_and_join_their_calls_across_buffers() {
        let name = c"_Z4gemmPfi";
        let ptr = (name.as_ptr() as u64).to_le_bytes();
        let kernel = rec(
            KIND_CONCURRENT_KERNEL,
            272,
            &[
                (16, &1000u64.to_le_bytes()),
                (24, &1800u64.to_le_bytes()),
                (40, &1u32.to_le_bytes()),
                (48, &7u32.to_le_bytes()),
                (52, &4i32.to_le_bytes()),
                (56, &2i32.to_le_bytes()),
                (60, &1i32.to_le_bytes()),
                (64, &128i32.to_le_bytes()),
                (68, &1i32.to_le_bytes()),
                (72, &1i32.to_le_bytes()),
                (76, &1024i32.to_le_bytes()),
                (80, &512i32.to_le_bytes()),
                (84, &16u32.to_le_bytes()),
                (92, &55u32.to_le_bytes()),
                (104, &ptr),
            ],
        );
        let api = rec(
            KIND_RUNTIME,
            40,
            &[
                (4, &211u32.to_le_bytes()),
                (8, &900u64.to_le_bytes()),
                (16, &990u64.to_le_bytes()),
                (28, &4242u32.to_le_bytes()),
                (32, &55u32.to_le_bytes()),
            ],
        );
        let copy = rec(
            KIND_MEMCPY,
            96,
            &[
                (4, &[2u8]),
                (8, &4096u64.to_le_bytes()),
                (16, &2000u64.to_le_bytes()),
                (24, &2100u64.to_le_bytes()),
                (32, &1u32.to_le_bytes()),
                (40, &7u32.to_le_bytes()),
                (44, &56u32.to_le_bytes()),
            ],
        );
        // SAFETY: each buffer holds a whole record of its kind's size.
        let [k, a, c] =
            [&kernel, &api, &copy].map(|r| unsafe { read(r.as_ptr() as *const u8, 9) }.unwrap());
        assert_eq!(
            a,
            Activity::Api(ApiRecord {
                correlation: 55,
                tid: 4242,
                start: 900,
                end: 990,
                driver: false,
                cbid: 211,
                ret: 0,
            })
        );
        let mut j = Joiner::default();
        // The kernel's buffer comes before its call's: it waits.
        assert_eq!(j.buffer([k, c], 0), []);
        let out = j.buffer([a], 1);
        assert_eq!(
            out[0],
            Dispatch {
                pid: 9,
                tid: 4242,
                agent: 1,
                queue: 7,
                kernel: "_Z4gemmPfi".into(),
                correlation: 55,
                kernel_object: 0,
                grid: [512, 2, 1],
                workgroup: [128, 1, 1],
                submit_ns: 945,
                start_ns: 1000,
                end_ns: 1800,
                group_segment: 1536,
                private_segment: 16,
            }
            .into()
        );
        // The copy's call has not come: it waits, until MAX_WAIT_NS after its buffer came.
        assert_eq!(out.len(), 1);
        assert_eq!(j.buffer([], MAX_WAIT_NS - 1), []);
        assert_eq!(j.unlinked(), 0);
        assert_eq!(
            j.buffer([], MAX_WAIT_NS),
            [GpuCopy {
                pid: 9,
                tid: 0,
                device: 1,
                engine: 7,
                correlation: 56,
                kind: copy_kind::DEVICE_TO_HOST,
                bytes: 4096,
                submit_ns: 2000,
                start_ns: 2000,
                end_ns: 2100,
            }
            .into()]
        );
        assert_eq!(j.unlinked(), 1);
        assert_eq!(j.finish(), []);
        let unknown = rec(99, 16, &[]);
        // SAFETY: a 16-byte record.
        assert_eq!(unsafe { read(unknown.as_ptr() as *const u8, 9) }, None);
        assert_eq!(copy_kind_of(10), copy_kind::DEVICE_TO_DEVICE);
    }

    fn api(correlation: u32, tid: u32, start: u64, end: u64, driver: bool) -> Activity {
        call(correlation, tid, start, end, driver, 211)
    }

    fn call(correlation: u32, tid: u32, start: u64, end: u64, driver: bool, cbid: u32) -> Activity {
        Activity::Api(ApiRecord {
            correlation,
            tid,
            start,
            end,
            driver,
            cbid,
            ret: 0,
        })
    }

    fn kernel(correlation: u64) -> Activity {
        Activity::Kernel(Dispatch {
            pid: 9,
            tid: 0,
            agent: 0,
            queue: 7,
            kernel: "k".into(),
            correlation,
            kernel_object: 0,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            submit_ns: 5000,
            start_ns: 5000,
            end_ns: 6000,
            group_segment: 0,
            private_segment: 0,
        })
    }

    /// (tid, submit) of each dispatch record.
    fn submits(out: &[Record]) -> Vec<(u32, u64)> {
        out.iter()
            .map(|r| match r {
                Record::Dispatch(d) => (d.tid, d.submit_ns),
                other => panic!("not a dispatch: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_driver_calls_work_is_submitted_at_its_start_a_runtime_calls_at_its_middle() {
        let mut j = Joiner::default();
        let out = j.buffer(
            [
                api(60, 7, 1000, 2000, false),
                api(61, 7, 1100, 1200, true),
                api(70, 8, 1600, 1701, false),
                kernel(60),
                kernel(61),
                kernel(70),
            ],
            0,
        );
        assert_eq!(submits(&out), [(7, 1500), (7, 1100), (8, 1650)]);
    }

    #[test]
    fn a_call_whose_record_comes_buffers_later_still_links_and_order_is_kept() {
        let mut j = Joiner::default();
        // Kernels 80 and 81 come first; only 81's call is in the same buffer.
        assert_eq!(
            j.buffer([kernel(80), kernel(81), api(81, 7, 4000, 4100, true)], 0),
            []
        );
        // Buffers of other threads go by; 81 stays behind 80, which waits.
        assert_eq!(j.buffer([api(90, 9, 100, 200, true)], 1_000), []);
        assert_eq!(j.buffer([], 300_000_000), []);
        // 80's call comes three buffers later, within MAX_WAIT_NS: both go out, in order.
        let out = j.buffer([api(80, 8, 3000, 3100, true)], 400_000_000);
        assert_eq!(submits(&out), [(8, 3000), (7, 4000)]);
        assert_eq!(j.unlinked(), 0);
        assert_eq!(j.finish(), []);
    }

    #[test]
    fn with_cupti_launches_each_launch_call_is_written_before_its_kernel_with_the_kernels_arguments()
     {
        use super::super::launch_calls::{HANDLE_TAG, LaunchCalls};
        use kreplay_common::api::id_of;
        use kreplay_common::stream::{ApiCall, KernelName};
        // CUPTI's names: 211 the runtime's cudaLaunchKernel, 307 the driver's cuLaunchKernel,
        // 31 a runtime copy.
        let names = |driver: bool, cbid: u32| match (driver, cbid) {
            (false, 211) => Some("cudaLaunchKernel_v7000".to_owned()),
            (true, 307) => Some("cuLaunchKernel".to_owned()),
            (false, 31) => Some("cudaMemcpy_v3020".to_owned()),
            _ => None,
        };
        let mut j = Joiner::with_launch_calls(LaunchCalls::new(9, Box::new(names)));
        let mut k = kernel(60);
        if let Activity::Kernel(d) = &mut k {
            (d.grid, d.workgroup, d.queue) = ([512, 4, 1], [128, 2, 1], 13);
        }
        let out = j.buffer(
            [
                call(60, 7, 1000, 2000, false, 211),
                call(61, 7, 2100, 2200, false, 31),
                call(62, 8, 2300, 2400, true, 307),
                k,
                kernel(62),
            ],
            0,
        );
        let handle = HANDLE_TAG | 1;
        let mut first = ApiCall {
            pid: 9,
            tid: 7,
            api: id_of("cudaLaunchKernel").unwrap(),
            enter_ns: 1000,
            exit_ns: 2000,
            ret: 0,
            args: [0; 6],
            extra: [0; 5],
            out: 0,
        };
        // cudaLaunchKernel(func, grid x|y<<32, z, block x|y<<32, z, args; sharedMem, stream):
        // grid 4x2x1 blocks of 128x2x1.
        first.args[..5].copy_from_slice(&[handle, 4 | 2 << 32, 1, 128 | 2 << 32, 1]);
        first.extra[1] = 13;
        let mut second = ApiCall {
            tid: 8,
            api: id_of("cuLaunchKernel").unwrap(),
            enter_ns: 2300,
            exit_ns: 2400,
            ..first.clone()
        };
        // cuLaunchKernel(f, gx, gy, gz, bx, by; bz, shared, stream): the same kernel's handle.
        second.args = [handle, 1, 1, 1, 1, 1];
        second.extra = [1, 0, 7, 0, 0];
        assert_eq!(
            out[..3],
            [
                KernelName {
                    pid: 9,
                    ts_ns: 1000,
                    handle,
                    name: "k".into()
                }
                .into(),
                first.into(),
                Record::Dispatch(match kernel(60) {
                    Activity::Kernel(mut d) => {
                        (d.grid, d.workgroup, d.queue) = ([512, 4, 1], [128, 2, 1], 13);
                        (d.tid, d.submit_ns) = (7, 1500);
                        d
                    }
                    _ => unreachable!(),
                }),
            ]
        );
        assert_eq!(out[3], second.into());
        assert!(matches!(&out[4], Record::Dispatch(d) if d.correlation == 62));
        // The copy call is not a launch; nothing else came out.
        assert_eq!(out.len(), 5);
        // A launch whose kernel never comes goes out without arguments, MAX_WAIT_NS after it
        // came, and only then.
        assert_eq!(j.buffer([call(70, 7, 5000, 5100, false, 211)], 10), []);
        assert_eq!(j.buffer([], MAX_WAIT_NS + 9), []);
        let bare = ApiCall {
            pid: 9,
            tid: 7,
            api: id_of("cudaLaunchKernel").unwrap(),
            enter_ns: 5000,
            exit_ns: 5100,
            ret: 0,
            args: [0; 6],
            extra: [0; 5],
            out: 0,
        };
        assert_eq!(j.buffer([], MAX_WAIT_NS + 10), [bare.clone().into()]);
        // At the end every waiting call goes out.
        assert_eq!(j.buffer([call(71, 7, 6000, 6100, false, 211)], 20), []);
        assert_eq!(
            j.finish(),
            [ApiCall {
                enter_ns: 6000,
                exit_ns: 6100,
                ..bare
            }
            .into()]
        );
    }
}
