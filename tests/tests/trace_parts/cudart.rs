//! `kreplay trace` on the CUDA runtime without a GPU: tests/cuda-sim's stand-in
//! libcudart.so.12 over its stand-in driver, and the same program with the runtime linked in
//! statically. Exact calls of both layers, each driver call nested in the runtime call that
//! made it, one launch per runtime launch in the per-kernel table, kernels named by their host
//! stubs also when kreplay attaches after the program loaded them (by their registration code
//! when the program is stripped), live bytes per device.
use std::{
    collections::BTreeMap,
    io::Write,
    path::Path,
    process::{Command, Stdio},
};

use kreplay_tests::{cudart_sim, decode_trace, kreplay_bin, require_root};
use serde_json::Value;

use super::{StderrWatch, assert_valid, counter_values, counts, out_path, thread_tracks};

const AXPY: &str = "axpy_inplace(float*, float const*, float, int)";
const HITS: &str = "count_hits(float*, int)";

/// The slices of one track.
fn slices<'a>(d: &'a Value, track: &str) -> &'a [Value] {
    d["slices"][track].as_array().map_or(&[], Vec::as_slice)
}

/// For each slice named `name`, the name of the slice it is nested in (one level up, enclosing
/// it in time), counted; "(top)" for one at depth 0.
fn parents(d: &Value, track: &str, name: &str) -> BTreeMap<String, u64> {
    let all = slices(d, track);
    let mut out = BTreeMap::new();
    for s in all.iter().filter(|s| s["name"] == name) {
        let (ts, end, depth) = (
            s["ts"].as_u64().unwrap(),
            s["ts"].as_u64().unwrap() + s["dur"].as_u64().unwrap(),
            s["depth"].as_u64().unwrap(),
        );
        let parent = if depth == 0 {
            "(top)".to_string()
        } else {
            let p = all
                .iter()
                .find(|p| {
                    let pts = p["ts"].as_u64().unwrap();
                    p["depth"].as_u64().unwrap() == depth - 1
                        && pts <= ts
                        && pts + p["dur"].as_u64().unwrap() >= end
                })
                .unwrap_or_else(|| panic!("no slice encloses {s}"));
            p["name"].as_str().unwrap().to_string()
        };
        *out.entry(parent).or_default() += 1;
    }
    out
}

/// The kernel names the slices named `name` carry, counted ("-" for none).
fn kernels(d: &Value, track: &str, name: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in slices(d, track).iter().filter(|s| s["name"] == name) {
        let k = s["args"]["kernel"]["string"].as_str().unwrap_or("-");
        *out.entry(k.to_string()).or_default() += 1;
    }
    out
}

/// The summary's per-kernel rows: name → launches.
fn kernel_rows(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("kernel "))
        .skip(1)
        .take_while(|l| !l.starts_with("events dropped"))
        .map(|l| {
            let (name, n) = l.trim_end().rsplit_once(' ').unwrap();
            (name.trim_end().to_string(), n.parse().unwrap())
        })
        .collect()
}

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// Traces `cudart_app all` (`program`: shared or static runtime) and checks what every form
/// of the runtime must show.
fn trace_all(program: &Path, out_name: &str) -> (Value, String, String) {
    let sim = cudart_sim("trace-cuda-sim");
    let out = out_path(out_name);
    let r = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap(), "--"])
        .arg(program)
        .arg("all")
        .env("LD_LIBRARY_PATH", &sim.dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(r.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&r.stdout), "cudart ok 14\n");
    assert!(stderr.contains("events dropped: 0\n"), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let track = threads[0].0.clone();
    let runtime: BTreeMap<String, u64> = counts(&d, &track)
        .into_iter()
        .filter(|(k, _)| k.starts_with("cuda"))
        .collect();
    assert_eq!(
        runtime,
        map(&[
            ("cudaDeviceSynchronize", 1),
            ("cudaEventSynchronize", 1),
            ("cudaFree", 3),
            ("cudaFreeAsync", 1),
            ("cudaFreeHost", 2),
            ("cudaGraphLaunch", 2),
            ("cudaHostAlloc", 1),
            ("cudaLaunchCooperativeKernel", 1),
            ("cudaLaunchKernel", 4),
            ("cudaLaunchKernelExC", 1),
            ("cudaMalloc", 2),
            ("cudaMallocAsync", 1),
            ("cudaMallocHost", 1),
            ("cudaMallocManaged", 1),
            ("cudaMemcpy", 3),
            ("cudaMemcpy2D", 1),
            ("cudaMemcpy2DAsync", 1),
            ("cudaMemcpyAsync", 1),
            ("cudaMemcpyPeer", 1),
            ("cudaMemcpyPeerAsync", 1),
            ("cudaMemset", 1),
            ("cudaMemsetAsync", 1),
            ("cudaSetDevice", 2),
            ("cudaStreamSynchronize", 1),
        ]),
        "{stderr}"
    );
    // Every launch that reached the driver nested in the call that made it: three of
    // cudaLaunchKernel's four (the fourth was captured into the graph), the two graph launches'
    // (the sim driver's cuGraphLaunch launches its one node through cuLaunchKernel).
    assert_eq!(
        parents(&d, &track, "cuLaunchKernel"),
        map(&[
            ("cuGraphLaunch", 2),
            ("cudaLaunchCooperativeKernel", 1),
            ("cudaLaunchKernel", 3),
            ("cudaLaunchKernelExC", 1),
        ])
    );
    assert_eq!(
        parents(&d, &track, "cuMemAlloc_v2"),
        map(&[
            ("cuMemAllocAsync", 1),
            ("cudaMalloc", 2),
            ("cudaMallocManaged", 1)
        ])
    );
    assert_eq!(
        parents(&d, &track, "cuGraphLaunch"),
        map(&[("cudaGraphLaunch", 2)])
    );
    assert_eq!(
        parents(&d, &track, "cudaLaunchKernel"),
        map(&[("(top)", 4)])
    );
    assert_eq!(kernels(&d, &track, "cudaLaunchKernel"), map(&[(AXPY, 4)]));
    assert_eq!(
        kernels(&d, &track, "cuLaunchKernel"),
        map(&[(AXPY, 6), (HITS, 1)])
    );
    // The grid of the ExC launch's config struct.
    let exc = slices(&d, &track)
        .iter()
        .find(|s| s["name"] == "cudaLaunchKernelExC")
        .unwrap();
    assert_eq!(
        (
            &exc["args"]["grid"]["string"],
            &exc["args"]["kernel"]["string"]
        ),
        (&Value::from("2x1x1"), &Value::from(HITS)),
        "{exc}"
    );
    let launch = slices(&d, &track)
        .iter()
        .find(|s| s["name"] == "cudaLaunchKernel")
        .unwrap();
    assert_eq!(launch["args"]["grid"]["string"], "4x1x1", "{launch}");
    assert_eq!(launch["args"]["block"]["string"], "256x1x1", "{launch}");
    // One launch per runtime launch: the driver launches inside them are not counted again
    // (nor the graph's node launches).
    assert_eq!(
        kernel_rows(&stderr),
        map(&[(AXPY, 5), (HITS, 1)]),
        "{stderr}"
    );
    let rows: BTreeMap<&str, &str> = stderr
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            Some((name, f.nth(5)?))
        })
        .collect();
    // Bytes: 2D copies are width × height.
    assert_eq!(rows.get("cudaMemcpy2D"), Some(&"128"), "{stderr}");
    assert_eq!(rows.get("cudaMemcpy"), Some(&"12288"), "{stderr}");
    (d, track, stderr)
}

#[test]
fn cudart_calls_nest_over_the_driver_and_live_bytes_follow_cuda_set_device() {
    require_root!();
    let sim = cudart_sim("trace-cuda-sim");
    let (d, _, _) = trace_all(&sim.app, "cudart-shared");
    // y and x on device 1, freed after the thread went back to device 0.
    assert_eq!(
        counter_values(&d, "live bytes (CUDA runtime device 1)"),
        [4096, 8192, 4096, 0]
    );
    // Async 1024 and freed, pinned 512 + 256 and freed, managed 128 and freed.
    assert_eq!(
        counter_values(&d, "live bytes (CUDA runtime device 0)"),
        [1024, 0, 512, 768, 256, 0, 128, 0]
    );
}

#[test]
fn a_statically_linked_runtime_is_found_in_the_program_itself() {
    require_root!();
    let sim = cudart_sim("trace-cuda-sim");
    let (_, _, stderr) = trace_all(&sim.static_app, "cudart-static");
    assert!(!stderr.contains("libcudart"), "{stderr}");
}

#[test]
fn an_attach_after_the_kernels_were_loaded_names_every_launch() {
    require_root!();
    let sim = cudart_sim("trace-cuda-sim");
    attach_after_load_names_every_launch(&sim.app, "cudart-attach");
}

#[test]
fn an_attach_to_a_stripped_program_names_every_launch_by_its_registration_code() {
    require_root!();
    // No symbol names a host stub: the names come from the calls that registered them.
    let sim = cudart_sim("trace-cuda-sim");
    attach_after_load_names_every_launch(&sim.stripped_app, "cudart-attach-stripped");
}

/// Attaches to `cudart_app attach 20` (`program`: one of its builds) once it has launched each
/// kernel, and checks that every launch after the attach is named.
fn attach_after_load_names_every_launch(program: &Path, out_name: &str) {
    let sim = cudart_sim("trace-cuda-sim");
    let (mut app, mut app_out) = super::spawn_ready(
        Command::new(program)
            .args(["attach", "20"])
            .env("LD_LIBRARY_PATH", &sim.dir),
    );
    let out = out_path(out_name);
    let mut kreplay = Command::new(kreplay_bin())
        .args([
            "trace",
            "-o",
            out.to_str().unwrap(),
            "-p",
            &app.id().to_string(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    app.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut app_out, &mut rest).unwrap();
    assert_eq!(rest, "cudart ok 44\ndone\n");
    assert!(app.wait().unwrap().success());
    assert!(kreplay.wait().unwrap().success());
    let stderr = watch.finish();
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let track = &threads[0].0;
    // The modules and functions were loaded before the attach: no naming call was seen, and
    // the driver's functions are heap handles with no symbol. Each driver launch takes the
    // name of the runtime launch it was made from, whose host stub has one.
    let c = counts(&d, track);
    assert_eq!(c.get("cuModuleGetFunction"), None);
    assert_eq!(
        kernels(&d, track, "cudaLaunchKernel"),
        map(&[(AXPY, 20), (HITS, 20)])
    );
    assert_eq!(
        kernels(&d, track, "cuLaunchKernel"),
        map(&[(AXPY, 20), (HITS, 20)])
    );
    assert_eq!(
        parents(&d, track, "cuLaunchKernel"),
        map(&[("cudaLaunchKernel", 40)])
    );
    assert_eq!(
        kernel_rows(&stderr),
        map(&[(AXPY, 20), (HITS, 20)]),
        "{stderr}"
    );
}
