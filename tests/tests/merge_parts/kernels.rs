//! Kernel names and per-device live bytes rendered from probe streams alone: a name recorded
//! on one thread names the launches of another, and a handle nobody named stays unnamed.
use kreplay_common::{
    api::id_of,
    stream::{ApiCall, KernelName, Record, StreamKind},
};
use kreplay_tests::decode_trace;
use serde_json::{Value, json};

use super::{MAIN, PID, WORKER, fresh_dir, merge, names, stderr, track, write_stream};

fn cuda(tid: u32, api: &str, t: u64, args: [u64; 6], out: u64) -> Record {
    ApiCall {
        pid: PID,
        tid,
        api: id_of(api).unwrap(),
        enter_ns: t,
        exit_ns: t + 50,
        ret: 0,
        args,
        extra: [0; 5],
        out,
    }
    .into()
}

/// The `kernel` argument of each slice named `api` on `uuid`, in time order.
fn kernels(d: &Value, uuid: &str, api: &str) -> Vec<Value> {
    d["slices"][uuid]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == api)
        .map(|s| s["args"]["kernel"]["string"].clone())
        .collect()
}

#[test]
fn launches_carry_kernel_names_recorded_on_any_thread() {
    let dir = fresh_dir("kernels");
    let (f, g, unnamed) = (0xf000u64, 0xf100u64, 0xdead0u64);
    let mut main = names(MAIN, "main");
    main.extend([
        cuda(
            MAIN,
            "cuModuleGetFunction",
            100,
            [0x10, 0x20, 0x30, 0, 0, 0],
            f,
        ),
        KernelName {
            pid: PID,
            ts_ns: 150,
            handle: f,
            name: "gemm(float*, float const*)".into(),
        }
        .into(),
        cuda(
            MAIN,
            "cuMemAlloc_v2",
            200,
            [0x40, 1 << 20, 0, 0, 0, 0],
            0x7700_0000,
        ),
        cuda(MAIN, "cuLaunchKernel", 300, [f, 4, 1, 1, 64, 1], 0),
    ]);
    write_stream(
        &dir.join("probes-500-501.krs"),
        StreamKind::Probes,
        &main,
        3,
    );
    let mut worker = names(WORKER, "worker");
    worker.extend([
        cuda(WORKER, "cuLaunchKernel", 400, [f, 8, 1, 1, 64, 1], 0),
        KernelName {
            pid: PID,
            ts_ns: 460,
            handle: g,
            name: "reduce".into(),
        }
        .into(),
        cuda(WORKER, "cuLaunchKernel", 500, [g, 1, 1, 1, 32, 1], 0),
        cuda(WORKER, "cuLaunchKernel", 600, [unnamed, 1, 1, 1, 32, 1], 0),
        cuda(WORKER, "cuMemFree_v2", 700, [0x7700_0000, 0, 0, 0, 0, 0], 0),
    ]);
    write_stream(
        &dir.join("probes-500-502.krs"),
        StreamKind::Probes,
        &worker,
        2,
    );
    let out = dir.join("kernels.pftrace");
    let o = merge(&[&dir], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]));
    let main_t = track(&d, "thread", "main", None);
    let worker_t = track(&d, "thread", "worker", None);
    assert_eq!(
        kernels(&d, &main_t[0], "cuLaunchKernel"),
        [json!("gemm(float*, float const*)")]
    );
    assert_eq!(
        kernels(&d, &worker_t[0], "cuLaunchKernel"),
        [
            json!("gemm(float*, float const*)"),
            json!("reduce"),
            Value::Null
        ]
    );
    // The CUDA driver's current device is not visible to the probes: one track per process.
    let cuda_live = track(&d, "counter", "live bytes (CUDA driver, all devices)", None);
    assert_eq!(cuda_live.len(), 1);
    let values: Vec<i64> = d["counters"][&cuda_live[0]]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_f64().unwrap() as i64)
        .collect();
    assert_eq!(values, [1 << 20, 0]);
}
