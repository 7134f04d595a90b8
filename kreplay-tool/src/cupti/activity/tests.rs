//! The record reader and the joiner, on records laid out as CUPTI lays them out.
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
fn with_cupti_launches_each_launch_call_is_written_before_its_kernel_with_the_kernels_arguments() {
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
