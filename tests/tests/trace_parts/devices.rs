//! Kernel names on launch slices and per-device live bytes (the `devices` workload on two
//! simulated GPUs), traced from the start and attached by pid.
use std::{io::Write, process::Command};

use kreplay_tests::{decode_trace, kreplay_bin, make_sim, require_root, workload};
use serde_json::Value;

use super::{assert_valid, counter_values, counts, hip_only, out_path, thread_tracks, trace_pid};

/// The `kernel` argument of every slice named `api` on track `uuid`.
fn kernels_of(d: &Value, uuid: &str, api: &str) -> Vec<String> {
    d["slices"][uuid]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == api)
        .map(|s| {
            s["args"]["kernel"]["string"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Values of every counter track whose name starts with `prefix`, by track name.
fn counters_named(d: &Value, prefix: &str) -> Vec<(String, Vec<i64>)> {
    let mut v: Vec<(String, Vec<i64>)> = d["tracks"]
        .as_object()
        .unwrap()
        .values()
        .filter(|t| t["kind"] == "counter" && t["name"].as_str().unwrap().starts_with(prefix))
        .map(|t| {
            let name = t["name"].as_str().unwrap().to_string();
            let values = counter_values(d, &name);
            (name, values)
        })
        .collect();
    v.sort();
    v
}

/// The summary's launch count for `kernel`.
fn summary_launches(stderr: &str, kernel: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let rest = l.strip_prefix(kernel)?;
        let n = rest.trim();
        (rest.starts_with(' ') && !n.contains(' ')).then(|| n.parse().ok())?
    })
}

#[test]
fn devices_get_a_live_bytes_track_each_and_launches_their_kernel_names() {
    require_root!();
    make_sim(&["hsa", "hip"]);
    let out = out_path("devices");
    let r = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap(), "--"])
        .args([workload("devices").to_str().unwrap(), "3"])
        .env("KRSIM_GPUS", "2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&r.stdout).contains("leaked: 28672"));
    assert!(stderr.contains("events dropped: 0\n"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let t = &threads[0].0;
    // The host stub's kernel is named by its registration (the module constructor runs under
    // the probes), the module kernel by hipModuleGetFunction.
    assert_eq!(kernels_of(&d, t, "hipLaunchKernel"), ["scale"; 3]);
    assert_eq!(kernels_of(&d, t, "hipModuleLaunchKernel"), ["mod_fill"; 3]);
    let c = counts(&d, t);
    assert_eq!(c["__hipRegisterFunction"], 1);
    assert_eq!(c["hipModuleGetFunction"], 1);
    assert_eq!(c["hipSetDevice"], 2);
    assert_eq!(summary_launches(&stderr, "scale"), Some(3), "{stderr}");
    assert_eq!(summary_launches(&stderr, "mod_fill"), Some(3), "{stderr}");
    // HIP: one track per device the thread set, and one for what it allocated before.
    assert_eq!(
        counters_named(&d, "live bytes (HIP"),
        vec![
            ("live bytes (HIP device 0)".to_string(), vec![16384]),
            (
                "live bytes (HIP device 1)".to_string(),
                vec![8192, 8192 + 12288, 12288]
            ),
            (
                "live bytes (HIP, device not set during trace)".to_string(),
                vec![4096, 0]
            ),
        ]
    );
    // HSA: the same allocations land in the two GPUs' pools (with the runtime's own memory in
    // the CPU pools beside them).
    let pools: Vec<Vec<i64>> = counters_named(&d, "live bytes (HSA pool 0x")
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| *v == [8192, 20480, 12288] || *v == [4096, 20480, 16384])
        .collect();
    assert_eq!(
        pools.len(),
        2,
        "{:?}",
        counters_named(&d, "live bytes (HSA")
    );
}

#[test]
fn attach_by_pid_names_kernels_registered_before_the_attach() {
    require_root!();
    make_sim(&["hsa", "hip"]);
    let out = out_path("devices-pid");
    let (mut child, _child_out) = super::spawn_ready(
        Command::new(workload("devices"))
            .args(["2", "1"])
            .env("KRSIM_GPUS", "2"),
    );
    let pid = child.id();
    let (mut kreplay, watch) = trace_pid(&out, pid);
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let status = kreplay.wait().unwrap();
    let stderr = watch.finish();
    assert!(status.success(), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let t = &threads[0].0;
    // The registration ran before the attach: `scale` comes from the ELF symbol of the host
    // stub the launches pass; `mod_fill` from hipModuleGetFunction, which ran after it.
    let c = counts(&d, t);
    assert!(!c.contains_key("__hipRegisterFunction"), "{c:?}");
    assert_eq!(
        hip_only(&c),
        [
            ("hipDeviceSynchronize", 1),
            ("hipFree", 1),
            ("hipLaunchKernel", 2),
            ("hipMemcpy", 1),
            ("hipModuleGetFunction", 1),
            ("hipModuleLaunchKernel", 2),
        ]
        .iter()
        .map(|&(k, v)| (k.to_string(), v))
        .collect()
    );
    assert_eq!(kernels_of(&d, t, "hipLaunchKernel"), ["scale"; 2]);
    assert_eq!(kernels_of(&d, t, "hipModuleLaunchKernel"), ["mod_fill"; 2]);
    assert_eq!(summary_launches(&stderr, "scale"), Some(2), "{stderr}");
    assert_eq!(summary_launches(&stderr, "mod_fill"), Some(2), "{stderr}");
}
