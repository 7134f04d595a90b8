//! The GPU timeline on CUDA without a GPU: `kreplay trace --gpu` on tests/cuda-sim's driver
//! program, with the stand-in CUPTI (`tests/cuda-sim/libcupti.c`) behind kreplay-tool as the
//! driver's injection library: the kernel and copies on their stream's tracks, named as Nsight
//! Systems names them (`GPU 0: NAME`, `stream 7`), with flows from their calls and times inside
//! them, CUPTI's clock mapped when its timestamp callback cannot be registered, a device the
//! driver cannot name named by its ordinal, an unusable CUPTI said once with the API trace
//! kept, and no API record for a call that launches nothing. The real CUPTI is
//! exercised on the H200 by `tests/gpu/gpu_timeline.sh`.
use std::path::PathBuf;
use std::process::Command;

use kreplay_tests::trace_json::{end, gpu_groups, slice_at, slices_on, ts};
use kreplay_tests::{cuda_sim, decode_trace, kreplay_bin, require_root, scratch};
use serde_json::Value;

fn trace(name: &str, env: &[(&str, &str)]) -> (Value, String) {
    let sim = cuda_sim("gpu-timeline-cuda");
    let out: PathBuf = scratch("gpu_timeline_cuda").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&out);
    let mut c = Command::new(kreplay_bin());
    c.args(["trace", "--gpu", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&sim.linked)
        .arg("inplace")
        .env("LD_LIBRARY_PATH", &sim.dir)
        .env_remove("CUDA_INJECTION64_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    let r = c.output().expect("run kreplay trace");
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(r.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("y_sum 40952.0"),
        "the program's result is unchanged"
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]), "{stderr}");
    (d, stderr)
}

/// What the stand-in driver's `cuDeviceGetName` says of device 0 by default.
const DEVICE_NAME: &str = "KRSim CUDA Device";

/// Checks the trace of `app_linked inplace`: one GPU group named `GPU 0: DEVICE` (`GPU 0`
/// alone when `device` is empty) holding stream 7's kernel and copy tracks, and the work on them.
fn check_timeline(d: &Value, device: &str) {
    let groups = gpu_groups(d);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    assert_eq!(g.process, "app_linked");
    let want = match device {
        "" => format!("GPU 0 (app_linked {})", g.pid),
        name => format!("GPU 0: {name} (app_linked {})", g.pid),
    };
    assert_eq!(g.name, want);
    assert_eq!(g.tracks, ["GPU busy %", "stream 7", "stream 7 copies"]);
    let kernels = slices_on(d, "stream ");
    assert_eq!(kernels.len(), 4, "the kernel and three copies: {kernels:?}");
    let kernels: Vec<_> = kernels
        .into_iter()
        .filter(|(t, _)| *t == "stream 7")
        .collect();
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    let (_, k) = kernels[0];
    assert_eq!(k["name"], "axpy_inplace");
    assert_eq!(k["args"]["grid"]["string"], "4096x1x1");
    assert_eq!(k["args"]["workgroup"]["string"], "256x1x1");
    // CUPTI's stream id of the default stream.
    let copies = slices_on(d, "stream 7 copies");
    let names: Vec<&str> = copies
        .iter()
        .map(|(_, s)| s["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["copy DtoH", "copy HtoD", "copy HtoD"]);
    for (_, s) in &copies {
        assert_eq!(s["args"]["bytes"]["uint"], 4096 * 4);
    }
    // One flow per GPU slice, from the driver call that made it, which contains it (the
    // stand-in runs the work inside the call): one clock for both.
    let flows = d["flows"].as_object().unwrap();
    assert_eq!(flows.len(), 4, "{flows:?}");
    let mut from: Vec<&str> = Vec::new();
    for f in flows.values() {
        let (call, gpu) = (slice_at(d, &f["from"][0]), slice_at(d, &f["to"][0]));
        from.push(call["name"].as_str().unwrap());
        assert!(
            ts(call) <= ts(gpu) && end(gpu) <= end(call),
            "{call} / {gpu}"
        );
    }
    from.sort_unstable();
    assert_eq!(
        from,
        [
            "cuLaunchKernel",
            "cuMemcpyDtoH_v2",
            "cuMemcpyHtoD_v2",
            "cuMemcpyHtoD_v2"
        ]
    );
}

#[test]
fn cupti_records_put_the_kernel_and_copies_on_their_stream_with_flows_from_their_calls() {
    require_root!();
    let (d, stderr) = trace("cupti", &[]);
    check_timeline(&d, DEVICE_NAME);
    assert!(
        stderr.contains("GPU time per kernel (1 kernels,"),
        "{stderr}"
    );
}

#[test]
fn a_call_that_launches_nothing_leaves_no_api_record() {
    require_root!();
    // The program's one cuCtxGetCurrent, made while the activity is on: the tool turned its
    // records off (kreplay-tool/src/cupti/quiet.rs).
    let (_, stderr) = trace("cupti-quiet", &[("FAKECUPTI_REPORT", "1")]);
    assert!(
        stderr.contains("fakecupti: 0 of 1 cuCtxGetCurrent calls recorded"),
        "{stderr}"
    );
}

#[test]
fn without_cuptis_timestamp_callback_its_clock_is_mapped_onto_the_trace() {
    require_root!();
    // The stand-in then stamps records with CLOCK_REALTIME: unmapped, every GPU slice would
    // lie decades after its call.
    let (d, _) = trace("cupti-clock", &[("FAKECUPTI_NO_TIMESTAMP_CALLBACK", "1")]);
    check_timeline(&d, DEVICE_NAME);
}

#[test]
fn work_of_a_runtime_no_probe_sees_flows_from_the_probed_driver_call_inside_it() {
    require_root!();
    // As cuBLAS's own cudart: CUPTI ties the work to a runtime call that starts 50 µs before
    // the probed driver call it makes (and ends 50 µs after it), with no record of that driver
    // call. Submitted at the runtime call's start, no GPU slice would have its flow.
    let (d, _) = trace("cupti-runtime", &[("FAKECUPTI_RUNTIME_SPAN_NS", "50000")]);
    check_timeline(&d, DEVICE_NAME);
}

#[test]
fn the_device_is_named_by_the_driver_and_by_its_ordinal_when_the_driver_has_no_name() {
    require_root!();
    let (d, _) = trace("cupti-h200", &[("FAKECUDA_DEVICE_NAME", "NVIDIA H200")]);
    check_timeline(&d, "NVIDIA H200");
    let (d, _) = trace("cupti-nameless", &[("FAKECUDA_DEVICE_NAME", "")]);
    check_timeline(&d, "");
}

#[test]
fn an_unusable_cupti_is_said_once_and_the_api_trace_stays() {
    require_root!();
    let (d, stderr) = trace("cupti-busy", &[("FAKECUPTI_BUSY", "1")]);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CUPTI is unusable"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{stderr}"
    );
    assert!(gpu_groups(&d).is_empty());
    let launches = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == "thread")
        .flat_map(|(u, _)| d["slices"][u].as_array().cloned().unwrap_or_default())
        .filter(|s| s["name"] == "cuLaunchKernel")
        .count();
    assert_eq!(launches, 1);
}

#[test]
fn with_the_tools_debug_log_on_the_exit_flush_logs_nothing_and_loses_nothing() {
    require_root!();
    // The main thread's thread-locals, the log subscriber's among them, are gone when the
    // exit flush runs: a log event there panicked and abandoned the GPU records still held.
    let (d, stderr) = trace("cupti-debug", &[("KREPLAY_LOG", "kreplay_tool=debug")]);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("CUPTI activity on"), "{stderr}");
    check_timeline(&d, DEVICE_NAME);
}
