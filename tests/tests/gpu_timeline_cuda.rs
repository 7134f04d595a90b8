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
    let (d, stderr, stdout) = run_trace(name, &[], "inplace", env);
    assert!(
        stdout.contains("y_sum 40952.0"),
        "the program's result is unchanged"
    );
    (d, stderr)
}

/// `kreplay trace --gpu FLAGS -- app_linked MODE` with `env`: the decoded trace, kreplay's
/// stderr and the program's stdout.
fn run_trace(
    name: &str,
    flags: &[&str],
    mode: &str,
    env: &[(&str, &str)],
) -> (Value, String, String) {
    let sim = cuda_sim("gpu-timeline-cuda");
    let out: PathBuf = scratch("gpu_timeline_cuda").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&out);
    let mut c = Command::new(kreplay_bin());
    c.args(["trace", "--gpu", "-q", "-o"])
        .arg(&out)
        .args(flags)
        .arg("--")
        .arg(&sim.linked)
        .arg(mode)
        .env("LD_LIBRARY_PATH", &sim.dir)
        .env_remove("CUDA_INJECTION64_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    let r = c.output().expect("run kreplay trace");
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(r.status.success(), "{stderr}");
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]), "{stderr}");
    (d, stderr, String::from_utf8_lossy(&r.stdout).into_owned())
}

/// The one line of `stderr` that says CUPTI is unusable (it is said once).
fn unusable_line(stderr: &str) -> &str {
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CUPTI is unusable"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    said[0]
}

/// The slices named `name` on the processes' thread tracks.
fn api_slices<'a>(d: &'a Value, name: &str) -> Vec<&'a Value> {
    d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == "thread")
        .flat_map(|(u, _)| d["slices"][u].as_array().into_iter().flatten())
        .filter(|s| s["name"] == name)
        .collect()
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
    assert!(
        unusable_line(&stderr).contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{stderr}"
    );
    assert!(gpu_groups(&d).is_empty());
    assert_eq!(api_slices(&d, "cuLaunchKernel").len(), 1);
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

#[test]
fn with_cupti_launches_the_launch_calls_come_from_cupti_or_from_the_probes_when_cupti_fails() {
    require_root!();
    let sim = cuda_sim("gpu-timeline-cuda");
    let plain = Command::new(&sim.linked)
        .arg("twice")
        .env("LD_LIBRARY_PATH", &sim.dir)
        .env_remove("CUDA_INJECTION64_PATH")
        .output()
        .expect("run the program");
    let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert!(plain.contains("y_sum "), "{plain}");
    let (d, stderr, stdout) = run_trace("cupti-launches", &["--cupti-launches"], "twice", &[]);
    assert_eq!(stdout, plain, "the program's result is unchanged");
    // Two launches, each once: from CUPTI's record (its stream id, 7, where the probe would
    // have read the CUstream handle, 0), with the kernel's name and geometry.
    let launches = api_slices(&d, "cuLaunchKernel");
    assert_eq!(launches.len(), 2, "{stderr}");
    let kernels = slices_on(&d, "stream 7");
    let kernels: Vec<&Value> = kernels
        .iter()
        .filter(|(t, _)| *t == "stream 7")
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(kernels.len(), 2);
    for call in &launches {
        let a = &call["args"];
        assert_eq!(a["kernel"]["string"], "axpy_inplace", "{call}");
        assert_eq!(a["grid"]["string"], "16x1x1", "{call}");
        assert_eq!(a["block"]["string"], "256x1x1", "{call}");
        assert_eq!(a["stream"]["pointer"], 7, "{call}");
        assert_eq!(a["ret"]["int"], 0, "{call}");
    }
    // Each launch has the one flow to its kernel, which runs inside it (the stand-in runs
    // the work inside the call).
    let flows = d["flows"].as_object().unwrap();
    let mut linked = 0;
    for f in flows.values() {
        let (call, gpu) = (slice_at(&d, &f["from"][0]), slice_at(&d, &f["to"][0]));
        if call["name"] != "cuLaunchKernel" {
            continue;
        }
        linked += 1;
        assert_eq!(gpu["name"], "axpy_inplace");
        assert!(
            ts(call) <= ts(gpu) && end(gpu) <= end(call),
            "{call} / {gpu}"
        );
    }
    assert_eq!(linked, 2, "{flows:?}");
    // And the three copies' flows, from the probed copy calls.
    assert_eq!(flows.len(), 5, "{flows:?}");
    // The end-of-trace summary counts them, per API and per kernel.
    let row = |name: &str| {
        stderr
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
    };
    assert_eq!(row("cuLaunchKernel").as_deref(), Some("2"), "{stderr}");
    assert_eq!(row("axpy_inplace").as_deref(), Some("2"), "{stderr}");
    assert_eq!(row("cuMemcpyHtoD_v2").as_deref(), Some("2"), "{stderr}");
    // The other calls are the probes' still.
    assert_eq!(api_slices(&d, "cuMemcpyHtoD_v2").len(), 2);
    assert_eq!(api_slices(&d, "cuCtxSynchronize").len(), 1);

    // With CUPTI unusable the tool asks for the probes on the launch calls before any launch
    // (inside cuInit) and says so; the trace is what it is without --cupti-launches.
    let (d, stderr, stdout) = run_trace(
        "cupti-launches-busy",
        &["--cupti-launches", "--keep-streams"],
        "twice",
        &[("FAKECUPTI_BUSY", "1")],
    );
    assert_eq!(stdout, plain);
    assert!(
        unusable_line(&stderr)
            .ends_with("its API calls are still traced (its launch calls by the probes)"),
        "{stderr}"
    );
    assert!(gpu_groups(&d).is_empty());
    let launches = api_slices(&d, "cuLaunchKernel");
    assert_eq!(launches.len(), 2, "{stderr}");
    // The probe's record: the CUstream handle (the default stream, 0).
    assert!(launches.iter().all(|c| c["args"]["stream"]["pointer"] == 0));
    assert_eq!(api_slices(&d, "cuMemcpyHtoD_v2").len(), 2);
    // The request and its answer are gone; the kept streams stay.
    let streams = scratch("gpu_timeline_cuda").join("cupti-launches-busy.pftrace.streams");
    let names: Vec<String> = std::fs::read_dir(&streams)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.is_empty());
    assert!(
        names.iter().all(|n| !n.starts_with("launch-probes-")),
        "{names:?}"
    );
    std::fs::remove_dir_all(&streams).unwrap();
}

#[test]
fn cupti_launches_is_refused_without_a_started_command() {
    let r = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "--cupti-launches", "-p", "1"])
        .output()
        .expect("run kreplay");
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains(
            "--cupti-launches applies to a command started with --gpu (kreplay trace --gpu --cupti-launches -- CMD)"
        ),
        "{r:?}"
    );
    let r = Command::new(kreplay_bin())
        .args(["trace", "--cupti-launches", "--", "true"])
        .output()
        .expect("run kreplay");
    assert_eq!(r.status.code(), Some(2), "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("--gpu"),
        "{r:?}"
    );
}
