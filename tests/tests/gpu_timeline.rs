//! The GPU timeline of `kreplay trace --gpu -- CMD` on the simulated ROCm runtime, decoded by
//! the independent decoder: kernels and copies on per-GPU queue and copy tracks under the
//! process, exact counts and names, one flow from each launch or copy call to its GPU slice,
//! GPU durations of at least the sim's injected latency, one clock for host and GPU, barrier
//! packets, two GPUs, a program that exits without synchronizing, the busy-share counter and
//! the per-kernel GPU-time table.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use kreplay_tests::{
    build_hip_program, cc, decode_trace, kreplay_bin, make_sim, require_root, scratch,
};
use serde_json::Value;

/// The line `--all --gpu` prints (`kreplay_cli::trace::gpu_env::ALL_NOTE`).
const ALL_NOTE: &str = "kreplay: --gpu with --all: the GPU timeline is given to a started command (-- CMD) or to -p PID processes only; tracing the API calls only";
/// The sim's added kernel duration, µs.
const KERNEL_US: u64 = 1500;
/// The sim's added copy duration, µs.
const COPY_US: u64 = 3000;
/// Bytes of each of the program's copies (1024 u32).
const COPY_BYTES: u64 = 4096;

fn program() -> PathBuf {
    make_sim(&["hsa", "hip"]);
    let src = kreplay_tests::workspace_root().join("tests/trace/gpu_timeline.c");
    build_hip_program(&src, "gpu_timeline")
}

/// `tests/trace/gpu_aql.c`: packets written by the application itself, on HSA alone.
fn aql_program() -> PathBuf {
    let build = make_sim(&["hsa"]);
    let root = kreplay_tests::sim_root();
    let exe = scratch("gpu_timeline").join("gpu_aql");
    let src = kreplay_tests::workspace_root().join("tests/trace/gpu_aql.c");
    let inc = |d: &str| format!("-I{}", root.join(d).display());
    cc(&[
        "-std=gnu11",
        "-O1",
        "-pthread",
        "-rdynamic",
        &inc("include"),
        &inc("tests"),
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &format!("-L{}", build.display()),
        "-l:libhsa-runtime64.so.1",
        &format!("-Wl,-rpath,{}", build.display()),
    ]);
    exe
}

/// Runs `gpu_timeline ARGS` under `kreplay trace --gpu`; returns the decoded trace and stderr.
fn trace(name: &str, args: &[&str], gpus: u32) -> (Value, String) {
    trace_exe(name, &program(), args, gpus)
}

/// Runs `exe ARGS` under `kreplay trace --gpu`; returns the decoded trace and stderr.
fn trace_exe(name: &str, exe: &std::path::Path, args: &[&str], gpus: u32) -> (Value, String) {
    let out = scratch("gpu_timeline").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&out);
    let run = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(exe)
        .args(args)
        .env("KRSIM_GPUS", gpus.to_string())
        .env("KRSIM_KERNEL_LATENCY_US", KERNEL_US.to_string())
        .env("KRSIM_COPY_LATENCY_US", COPY_US.to_string())
        .env_remove("HSA_TOOLS_LIB")
        .output()
        .expect("run kreplay trace");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "kreplay trace failed: {stderr}");
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]), "{stderr}");
    (d, stderr)
}

fn name(t: &Value) -> &str {
    t["name"].as_str().unwrap_or("")
}

/// What the sim's `hsa_agent_get_info` names each GPU agent: its product name
/// (`HSA_AMD_AGENT_INFO_PRODUCT_NAME`) and its `gfx` target (`HSA_AGENT_INFO_NAME`).
const AGENT_NAME: &str = "KRSim Simulated GPU (gfx90a)";

/// The handle a `PREFIX0x…` track name names, the rest of the name after it.
fn handle_in<'a>(name: &'a str, prefix: &str) -> (u64, &'a str) {
    let hex = name
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix("0x"))
        .unwrap_or_else(|| panic!("{name:?} is not {prefix}0x…"));
    let digits = hex
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(hex.len());
    let handle = u64::from_str_radix(&hex[..digits], 16).expect("a hex handle");
    (handle, &hex[digits..])
}

/// The GPU groups of the trace: agent handle -> (queue slices by queue handle, copy slices,
/// busy-counter values). Overflow lanes (same name, same parent) are folded into their track.
/// Every name is checked whole: the group `GPU agent 0x…: KRSim Simulated GPU (gfx90a)
/// (PROGRAM PID)` under its process's track, holding `queue 0x…` tracks whose kernels name that
/// queue, a `copies` track and the `GPU busy %` counter.
struct Gpu {
    queues: BTreeMap<u64, Vec<Value>>,
    copies: Vec<Value>,
    busy: Vec<Value>,
}

fn gpus(d: &Value) -> BTreeMap<u64, Gpu> {
    let tracks = d["tracks"].as_object().unwrap();
    let mut out = BTreeMap::new();
    for (uuid, t) in tracks {
        if !name(t).starts_with("GPU ") || t["kind"] == "counter" {
            continue;
        }
        // Process-scoped: the device group hangs under the traced process's track.
        let parent = &tracks[&t["parent"].as_u64().expect("a parent").to_string()];
        assert_eq!(parent["kind"], "process", "{t}");
        let (agent, rest) = handle_in(name(t), "GPU agent ");
        assert_eq!(
            rest,
            format!(": {AGENT_NAME} ({} {})", name(parent), parent["pid"]),
            "{t}"
        );
        let mut g = Gpu {
            queues: BTreeMap::new(),
            copies: Vec::new(),
            busy: Vec::new(),
        };
        for (child, c) in tracks {
            if c["parent"].as_u64().map(|p| p.to_string()).as_deref() != Some(uuid.as_str()) {
                continue;
            }
            let slices = d["slices"][child].as_array().cloned().unwrap_or_default();
            match name(c) {
                "copies" => g.copies.extend(slices),
                "GPU busy %" => g.busy = d["counters"][child].as_array().unwrap().clone(),
                n => {
                    let (queue, rest) = handle_in(n, "queue ");
                    assert_eq!(rest, "", "unexpected track {n} under {}", name(t));
                    for s in &slices {
                        assert_eq!(s["args"]["queue"]["pointer"], queue, "{n}: {s}");
                    }
                    g.queues.entry(queue).or_default().extend(slices)
                }
            }
        }
        for v in g.queues.values_mut().chain([&mut g.copies]) {
            v.sort_by_key(|s| s["ts"].as_u64().unwrap());
        }
        out.insert(agent, g);
    }
    out
}

fn ts(s: &Value) -> u64 {
    s["ts"].as_u64().unwrap()
}

fn end(s: &Value) -> u64 {
    ts(s) + s["dur"].as_u64().unwrap()
}

/// The slice a flow reference names (track, ts, name).
fn slice_at<'a>(d: &'a Value, r: &Value) -> &'a Value {
    d["slices"][r["track"].as_u64().unwrap().to_string()]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["ts"] == r["ts"] && s["name"] == r["name"])
        .unwrap_or_else(|| panic!("no slice for {r}"))
}

/// Every API slice named `api` on the thread tracks, with its track.
fn api_slices<'a>(d: &'a Value, api: &str) -> Vec<(&'a str, &'a Value)> {
    let mut v = Vec::new();
    for (uuid, t) in d["tracks"].as_object().unwrap() {
        if t["kind"] != "thread" {
            continue;
        }
        for s in d["slices"][uuid].as_array().into_iter().flatten() {
            if s["name"] == api {
                v.push((uuid.as_str(), s));
            }
        }
    }
    v
}

/// Checks the flows: each GPU slice ends exactly one flow, which starts on an API slice of
/// `apis`; each API slice in `exactly_one` starts exactly one. Returns (API slice, GPU slice)
/// pairs.
fn flows<'a>(d: &'a Value, exactly_one: &[&str]) -> Vec<(&'a Value, &'a Value, String)> {
    let mut pairs = Vec::new();
    for f in d["flows"].as_object().unwrap().values() {
        let (from, to) = (&f["from"][0], &f["to"][0]);
        pairs.push((
            slice_at(d, from),
            slice_at(d, to),
            from["track"].to_string(),
        ));
    }
    for api in exactly_one {
        for (_, s) in api_slices(d, api) {
            assert_eq!(s["flow_ids"].as_array().unwrap().len(), 1, "{api}: {s}");
        }
    }
    pairs
}

/// The copy slices of kind `dir` (`HtoD`, `DtoH`), each with its bytes and a rate.
fn copies_of<'a>(g: &'a Gpu, dir: &str) -> Vec<&'a Value> {
    let v: Vec<&Value> = g
        .copies
        .iter()
        .filter(|s| s["args"]["direction"]["string"] == dir)
        .collect();
    for s in &v {
        assert_eq!(s["name"], format!("copy {dir}"));
        assert_eq!(s["args"]["bytes"]["uint"], COPY_BYTES);
        let rate = s["args"]["GB/s"]["double"].as_f64().unwrap();
        let want = COPY_BYTES as f64 / s["dur"].as_f64().unwrap();
        assert!((rate - want).abs() < 1e-9, "{s}");
        assert!(s["dur"].as_u64().unwrap() >= COPY_US * 1000, "{s}");
        assert_eq!(
            s["terminating_flow_ids"].as_array().unwrap().len(),
            1,
            "{s}"
        );
    }
    v
}

/// Each kernel slice: named `kernel`, at least the injected latency long, with one flow.
fn check_kernels(slices: &[Value], names: &[&str]) {
    let got: Vec<&str> = slices.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(got, names);
    for s in slices {
        assert!(s["dur"].as_u64().unwrap() >= KERNEL_US * 1000, "{s}");
        assert_eq!(
            s["terminating_flow_ids"].as_array().unwrap().len(),
            1,
            "{s}"
        );
        assert_eq!(s["args"]["grid"]["string"], "1024x1x1");
        assert_eq!(s["args"]["workgroup"]["string"], "256x1x1");
    }
}

/// The kernel table's row of `kernel` in stderr, split into its columns.
fn table_row(stderr: &str, kernel: &str) -> Vec<String> {
    let line = stderr
        .lines()
        .find(|l| l.ends_with(&format!("  {kernel}")) && l.contains('%'))
        .unwrap_or_else(|| panic!("no row for {kernel}:\n{stderr}"));
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn kernels_and_copies_go_on_their_queue_and_copy_tracks_with_a_flow_from_their_call() {
    require_root!();
    let (d, stderr) = trace("streams", &["streams", "4"], 1);
    let gpus = gpus(&d);
    assert_eq!(gpus.len(), 1, "one GPU group");
    let g = gpus.values().next().unwrap();
    // Two streams, two hardware queues, four fills each.
    assert_eq!(g.queues.len(), 2, "{:?}", g.queues.keys());
    for q in g.queues.values() {
        check_kernels(q, &["fill"; 4]);
    }
    assert_eq!(copies_of(g, "HtoD").len(), 2);
    assert_eq!(copies_of(g, "DtoH").len(), 2);
    assert_eq!(g.copies.len(), 4);
    // Every launch and every HSA copy call starts exactly one flow; every flow ends on a GPU
    // slice on the same clock: the GPU work starts after its call began.
    let pairs = flows(&d, &["hipLaunchKernel", "hsa_amd_memory_async_copy"]);
    assert_eq!(pairs.len(), 8 + 4);
    assert_eq!(api_slices(&d, "hipLaunchKernel").len(), 8);
    // Each kernel ends before the hipStreamSynchronize of its stream that followed its launch
    // returned.
    let syncs = api_slices(&d, "hipStreamSynchronize");
    assert_eq!(syncs.len(), 2);
    for (call, gpu, track) in &pairs {
        assert!(ts(gpu) >= ts(call), "{gpu} starts before its call {call}");
        if call["name"] != "hipLaunchKernel" {
            continue;
        }
        let stream = &call["args"]["stream"];
        let sync = syncs
            .iter()
            .filter(|(t, s)| {
                *t == track.as_str() && s["args"]["stream"] == *stream && ts(s) >= end(call)
            })
            .map(|(_, s)| *s)
            .min_by_key(|s| ts(s))
            .expect("a synchronize after the launch");
        assert!(end(gpu) <= end(sync), "{gpu} ends after {sync} returned");
    }
    // Busy share: percentages, some of them above zero, ending idle.
    let values: Vec<f64> = g.busy.iter().map(|v| v[1].as_f64().unwrap()).collect();
    assert!(
        values.iter().all(|v| (0.0..=100.0).contains(v)),
        "{values:?}"
    );
    assert!(values.iter().any(|&v| v > 50.0), "{values:?}");
    assert_eq!(values.last(), Some(&0.0));
    // The summary's table: one kernel, 8 dispatches, 100% of the GPU time.
    assert!(
        stderr.contains("GPU time per kernel (1 kernels,"),
        "{stderr}"
    );
    let row = table_row(&stderr, "fill");
    assert_eq!(
        (row[0].as_str(), row[1].as_str()),
        ("100.0%", "8"),
        "{row:?}"
    );
}

#[test]
fn a_graph_behind_a_barrier_packet_runs_after_the_copy_it_waits_for() {
    require_root!();
    let (d, stderr) = trace("barrier", &["barrier", "3"], 1);
    let gpus = gpus(&d);
    let g = gpus.values().next().unwrap();
    assert_eq!(gpus.len(), 1);
    // The graph's stream is one queue; the BARRIER_AND packet is not a kernel.
    assert_eq!(g.queues.len(), 1, "{:?}", g.queues.keys());
    let q = g.queues.values().next().unwrap();
    check_kernels(q, &["fill", "twice", "fill", "twice", "fill", "twice"]);
    let h2d = copies_of(g, "HtoD");
    assert_eq!((h2d.len(), copies_of(g, "DtoH").len()), (1, 1));
    assert!(
        ts(&q[0]) >= end(h2d[0]),
        "the first kernel {} started before the copy it waited for ended {}",
        q[0],
        h2d[0]
    );
    // Each graph launch is one call with two GPU slices.
    let pairs = flows(&d, &[]);
    let launches = api_slices(&d, "hipGraphLaunch");
    assert_eq!(launches.len(), 3);
    for (_, l) in &launches {
        assert_eq!(l["flow_ids"].as_array().unwrap().len(), 2, "{l}");
    }
    assert_eq!(pairs.len(), 6 + 2);
    assert_eq!(table_row(&stderr, "twice")[1], "3");
    assert_eq!(table_row(&stderr, "fill")[1], "3");
}

#[test]
fn direct_aql_writes_get_gpu_slices_without_a_launch_and_the_apps_signals_complete_once() {
    require_root!();
    // The program itself checks that each of its signals ends at exactly 0.
    let (d, stderr) = trace_exe("aql", &aql_program(), &[], 1);
    let gpus = gpus(&d);
    assert_eq!(gpus.len(), 1);
    let g = gpus.values().next().unwrap();
    assert_eq!(g.queues.len(), 1);
    let q = g.queues.values().next().unwrap();
    let names: Vec<&str> = q.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tick"; 5], "the barrier packet is no kernel slice");
    for s in q {
        assert!(s["dur"].as_u64().unwrap() >= KERNEL_US * 1000, "{s}");
        assert_eq!(s["args"]["group_segment"]["uint"], 2048);
        assert_eq!(s["args"]["private_segment"]["uint"], 64);
        assert_eq!(s["args"]["grid"]["string"], "256x1x1");
        // No launch call made them: no flow.
        assert_eq!(s["terminating_flow_ids"], serde_json::json!([]));
    }
    assert_eq!(d["flows"], serde_json::json!({}));
    assert_eq!(table_row(&stderr, "tick")[1], "5");
}

#[test]
fn two_gpus_get_a_track_group_each() {
    require_root!();
    let (d, _) = trace("two_gpus", &["two_gpus", "3"], 2);
    let gpus = gpus(&d);
    assert_eq!(gpus.len(), 2);
    for g in gpus.values() {
        assert_eq!(g.queues.len(), 1, "{:?}", g.queues.keys());
        check_kernels(g.queues.values().next().unwrap(), &["fill"; 3]);
        assert_eq!(
            (copies_of(g, "HtoD").len(), copies_of(g, "DtoH").len()),
            (1, 1)
        );
        assert!(!g.busy.is_empty());
    }
    assert_eq!(flows(&d, &["hipLaunchKernel"]).len(), 6 + 4);
}

#[test]
fn a_program_that_exits_without_synchronizing_leaves_a_valid_trace_with_its_kernels() {
    require_root!();
    let (d, _) = trace("nosync", &["nosync", "5"], 1);
    let gpus = gpus(&d);
    assert_eq!(gpus.len(), 1);
    let g = gpus.values().next().unwrap();
    // The runtime lets in-flight work finish at unload, and the tool waits for the records
    // being made before its last flush: every kernel is there.
    let q: Vec<Value> = g.queues.values().flatten().cloned().collect();
    check_kernels(&q, &["fill"; 5]);
    assert_eq!(flows(&d, &["hipLaunchKernel"]).len(), 5);
}

#[test]
fn without_gpu_the_trace_has_no_gpu_tracks_and_all_says_why_not() {
    require_root!();
    let out = scratch("gpu_timeline").join("nogpu.pftrace");
    let run = Command::new(kreplay_bin())
        .args(["trace", "--no-gpu", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(program())
        .args(["streams", "2"])
        .env_remove("HSA_TOOLS_LIB")
        .output()
        .expect("run kreplay trace");
    assert!(run.status.success());
    let d = decode_trace(&out);
    assert!(gpus(&d).is_empty());
    assert_eq!(api_slices(&d, "hipLaunchKernel").len(), 4);
    assert!(!String::from_utf8_lossy(&run.stderr).contains("GPU time per kernel"));
    // --all with --gpu: one line, then an API-only trace (`-p PID --gpu` attaches the tool:
    // tests/tests/attach_cuda.rs and attach_hsa.rs).
    let run = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "-q", "--duration", "1s", "-o"])
        .arg(scratch("gpu_timeline").join("all.pftrace"))
        .arg("--all")
        .output()
        .expect("run kreplay trace --all");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| *l == ALL_NOTE).count(),
        1,
        "{stderr}"
    );
}
