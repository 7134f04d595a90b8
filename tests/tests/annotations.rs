//! User annotations under `kreplay trace -- CMD`, decoded by the independent decoder: roctx
//! (probed in the simulated `libroctx64`) and NVTX (a program built against the real NVTX v3
//! headers, with kreplay-tool as its injection library), with exact names, nesting and counts.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kreplay_tests::{
    cc, decode_trace, kreplay_bin, make_sim, nvtx_include, require_root, scratch, sim_dir,
    sim_root, workload,
};
use serde_json::Value;

fn out_path(name: &str) -> PathBuf {
    let p = scratch("annotations").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&p);
    p
}

fn trace(output: &Path, extra: &[&str], cmd: &[&str]) -> Output {
    let out = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", output.to_str().unwrap()])
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .expect("run kreplay trace");
    assert!(
        out.status.success(),
        "kreplay trace failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The tracks named `name` of kind `kind`, as (uuid, track).
fn tracks<'a>(d: &'a Value, kind: &str, name: &str) -> Vec<(&'a String, &'a Value)> {
    d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == kind && t["name"] == name)
        .collect()
}

/// (depth, name) of every slice of a track, in time order.
fn slices(d: &Value, uuid: &str) -> Vec<(u64, String)> {
    d["slices"][uuid]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| {
                    (
                        s["depth"].as_u64().unwrap(),
                        s["name"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Names of the instants of a track.
fn instants(d: &Value, uuid: &str) -> Vec<String> {
    d["instants"][uuid]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| s["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The thread track whose first slice is `first`.
fn thread_starting_with<'a>(d: &'a Value, first: &str) -> &'a String {
    let all: Vec<&String> = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(u, t)| {
            t["kind"] == "thread" && slices(d, u).first().is_some_and(|s| s.1 == first)
        })
        .map(|(u, _)| u)
        .collect();
    assert_eq!(all.len(), 1, "one thread starts with {first}");
    all[0]
}

fn s(depth: u64, name: &str) -> (u64, String) {
    (depth, name.to_owned())
}

#[test]
fn roctx_ranges_nest_with_the_hip_calls_and_marks_are_instants() {
    require_root!();
    make_sim(&["hsa", "hip", "roctx"]);
    let out = out_path("roctx");
    let run = trace(
        &out,
        &[],
        &[workload("roctx_ranges").to_str().unwrap(), "3"],
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "ranges: 10\nmarks: 3\n"
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]));
    let main = thread_starting_with(&d, "hipMalloc");
    let step = [
        s(0, "step"),
        s(1, "copy"),
        s(2, "hipMemcpy"),
        s(3, "hsa_amd_memory_async_copy"),
        s(1, "sync"),
        s(2, "hipDeviceSynchronize"),
    ];
    let mut want = vec![s(0, "hipMalloc"), s(1, "hsa_amd_memory_pool_allocate")];
    // The first copy also creates the simulated runtime's queue and its ring buffer.
    want.extend(step[..3].iter().cloned());
    want.extend([
        s(3, "hsa_queue_create"),
        s(3, "hsa_amd_memory_pool_allocate"),
    ]);
    want.extend(step[3..].iter().cloned());
    want.extend(step.iter().cloned());
    want.extend(step.iter().cloned());
    want.extend([s(0, "hipFree"), s(1, "hsa_amd_memory_pool_free")]);
    assert_eq!(slices(&d, main), want);
    assert_eq!(instants(&d, main), ["begin", "begin", "begin"]);
    let step_args = &d["slices"][main.as_str()][2]["args"];
    assert_eq!(step_args["source"]["string"], "roctx");
    let worker = thread_starting_with(&d, "worker");
    assert_eq!(
        slices(&d, worker),
        [
            s(0, "worker"),
            s(1, "hipMalloc"),
            s(2, "hsa_amd_memory_pool_allocate"),
            s(1, "hipFree"),
            s(2, "hsa_amd_memory_pool_free"),
        ]
    );
    // The start/end range began on the main thread and ended on the worker.
    let [(async_track, _)] = tracks(&d, "named", "roctx ranges")[..] else {
        panic!("one roctx ranges track")
    };
    assert_eq!(slices(&d, async_track), [s(0, "load")]);
    let load = &d["slices"][async_track.as_str()][0];
    let worker_end = d["slices"][worker.as_str()][0]["ts"].as_u64().unwrap()
        + d["slices"][worker.as_str()][0]["dur"].as_u64().unwrap();
    assert!(load["ts"].as_u64().unwrap() < d["slices"][worker.as_str()][0]["ts"].as_u64().unwrap());
    assert!(load["ts"].as_u64().unwrap() + load["dur"].as_u64().unwrap() > worker_end);
}

/// Builds `tests/trace/nvtx_threads.c` against the real NVTX headers and the simulated HIP.
fn build_nvtx_program() -> PathBuf {
    make_sim(&["hsa", "hip"]);
    let sim = sim_dir();
    let root = sim_root();
    let exe = scratch("annotations").join("nvtx_threads");
    let src = kreplay_tests::workspace_root().join("tests/trace/nvtx_threads.c");
    cc(&[
        "-std=gnu11",
        "-O1",
        "-pthread",
        &format!("-I{}", root.join("include").display()),
        &format!("-I{}", root.join("workloads").display()),
        &format!("-I{}", nvtx_include().display()),
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &format!("-L{}", sim.display()),
        "-l:libamdhip64.so.6",
        "-l:libhsa-runtime64.so.1",
        &format!("-Wl,-rpath,{}", sim.display()),
        "-ldl",
    ]);
    exe
}

#[test]
fn nvtx_ranges_marks_and_a_range_ended_on_another_thread() {
    require_root!();
    let exe = build_nvtx_program();
    let out = out_path("nvtx");
    let run = trace(&out, &[], &[exe.to_str().unwrap()]);
    // NVTX returned the levels kreplay-tool gave: it was loaded as the injection library.
    assert_eq!(String::from_utf8_lossy(&run.stdout), "levels: 0 1 0 1 0\n");
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]));
    let main = thread_starting_with(&d, "outer");
    let round = [
        s(0, "outer"),
        s(1, "inner"),
        s(2, "hipMalloc"),
        s(3, "hsa_amd_memory_pool_allocate"),
        s(2, "hipFree"),
        s(3, "hsa_amd_memory_pool_free"),
    ];
    let mut want: Vec<_> = round.iter().chain(round.iter()).cloned().collect();
    want.extend([s(0, "wide"), s(1, "hipDeviceSynchronize")]);
    assert_eq!(slices(&d, main), want);
    assert_eq!(instants(&d, main), ["tick", "tick"]);
    let inner = &d["slices"][main.as_str()][1]["args"];
    assert_eq!(inner["domain"]["string"], "kreplay-test");
    assert_eq!(inner["category"]["string"], "io");
    assert_eq!(inner["source"]["string"], "NVTX");
    let worker = thread_starting_with(&d, "worker");
    assert_eq!(
        slices(&d, worker),
        [
            s(0, "worker"),
            s(1, "hipMalloc"),
            s(2, "hsa_amd_memory_pool_allocate"),
            s(1, "hipFree"),
            s(2, "hsa_amd_memory_pool_free"),
        ]
    );
    assert_eq!(instants(&d, worker), ["worker mark"]);
    let [(async_track, _)] = tracks(&d, "named", "NVTX ranges")[..] else {
        panic!("one NVTX ranges track")
    };
    assert_eq!(slices(&d, async_track), [s(0, "load")]);
    // The tool's stream was merged and removed with the probes' streams.
    assert!(!out.with_file_name("nvtx.pftrace.streams").exists());
}

#[test]
fn a_users_own_nvtx_injection_library_is_left_in_place() {
    require_root!();
    let exe = build_nvtx_program();
    let out = out_path("nvtx-user");
    let run = trace(
        &out,
        &["--env", "NVTX_INJECTION64_PATH=/nonexistent/libother.so"],
        &[exe.to_str().unwrap()],
    );
    // NVTX could not load the user's library: every call is a no-op returning an error level.
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "levels: -2 -2 -2 -2 -2\n"
    );
    let d = decode_trace(&out);
    let mut per_thread: Vec<Vec<(u64, String)>> = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == "thread")
        .map(|(u, _)| slices(&d, u))
        .collect();
    per_thread.sort_by_key(|v| v.len());
    let pair = [s(0, "hipMalloc"), s(1, "hsa_amd_memory_pool_allocate")];
    let free = [s(0, "hipFree"), s(1, "hsa_amd_memory_pool_free")];
    let worker: Vec<_> = pair.iter().chain(free.iter()).cloned().collect();
    let mut main: Vec<_> = [&worker[..], &worker[..]].concat();
    main.push(s(0, "hipDeviceSynchronize"));
    assert_eq!(
        per_thread,
        [worker, main],
        "the API slices alone, no ranges"
    );
    assert!(tracks(&d, "named", "NVTX ranges").is_empty());
}

#[test]
fn nvtx_ranges_reach_the_replay_trace() {
    let exe = build_nvtx_program();
    let out = out_path("nvtx-replay");
    let run = Command::new(kreplay_bin())
        .args(["replay", "-o", out.to_str().unwrap(), "--"])
        .arg(&exe)
        .output()
        .expect("run kreplay replay");
    assert!(
        run.status.success(),
        "kreplay replay failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The preloaded tool is also NVTX's injection library: NVTX returned its levels.
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(stdout.lines().next(), Some("levels: 0 1 0 1 0"), "{stdout}");
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]));
    let main = thread_starting_with(&d, "outer");
    let round = [s(0, "outer"), s(1, "inner")];
    let want: Vec<_> = [&round[..], &round[..], &[s(0, "wide")][..]].concat();
    assert_eq!(slices(&d, main), want);
    assert_eq!(instants(&d, main), ["tick", "tick"]);
    let worker = thread_starting_with(&d, "worker");
    assert_eq!(slices(&d, worker), [s(0, "worker")]);
    let [(async_track, _)] = tracks(&d, "named", "NVTX ranges")[..] else {
        panic!("one NVTX ranges track")
    };
    assert_eq!(slices(&d, async_track), [s(0, "load")]);
}

fn mark(tid: u32, ts_ns: u64, kind: u8, id: u64, name: &str) -> kreplay_common::stream::Record {
    kreplay_common::stream::Annotation {
        pid: 42,
        tid,
        ts_ns,
        kind,
        source: kreplay_common::stream::annotation::NVTX,
        category: 0,
        id,
        domain: String::new(),
        name: name.into(),
    }
    .into()
}

#[test]
fn unmatched_pops_are_left_out_and_ranges_open_at_the_end_close_at_its_last_event() {
    use kreplay_common::stream::{
        ApiCall, ProcessName, StreamHeader, StreamKind, StreamWriter, annotation::*,
    };
    let dir = scratch("annotations").join("unmatched");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("tool-42.krs");
    let mut w = StreamWriter::create(&input, &StreamHeader::new(StreamKind::Tool, 42)).unwrap();
    let call = |tid: u32, enter_ns: u64, exit_ns: u64| ApiCall {
        pid: 42,
        tid,
        api: kreplay_common::api::id_of("hipDeviceSynchronize").unwrap(),
        enter_ns,
        exit_ns,
        ret: 0,
        args: [0; 6],
        extra: [0; 5],
        out: 0,
    };
    for r in [
        ProcessName {
            pid: 42,
            name: "app".into(),
        }
        .into(),
        // Popped before anything was pushed (pushed before the trace): left out.
        mark(7, 100, POP, 0, ""),
        mark(7, 200, PUSH, 0, "never popped"),
        call(7, 300, 400).into(),
        // An end whose start was never seen, and a start never ended: neither drawn.
        mark(7, 500, END, 99, ""),
        mark(7, 600, START, 1, "never ended"),
        call(7, 700, 900).into(),
    ] {
        w.push(&r).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let out = out_path("unmatched");
    let run = Command::new(kreplay_bin())
        .args([
            "merge",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .expect("run kreplay merge");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]));
    let t = thread_starting_with(&d, "never popped");
    let got: Vec<(u64, String, u64, u64)> = d["slices"][t.as_str()]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["depth"].as_u64().unwrap(),
                s["name"].as_str().unwrap().to_owned(),
                s["ts"].as_u64().unwrap(),
                s["dur"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, "never popped".to_owned(), 200, 700),
            (1, "hipDeviceSynchronize".to_owned(), 300, 100),
            (1, "hipDeviceSynchronize".to_owned(), 700, 200),
        ]
    );
    assert!(tracks(&d, "named", "NVTX ranges").is_empty());
}
