//! `kreplay replay` on CUDA without a GPU: tests/cuda-sim's stand-in libcuda.so.1 (the real
//! driver ABI, kernels run on the CPU) under a program that is linked against libcuda and one
//! that dlopens it and takes every entry from cuGetProcAddress_v2 as the CUDA runtime does.
//! Each checks that the replayed run prints what the plain run prints and what the per-kernel
//! table says was replayed or declined. The real-GPU scenarios are tests/gpu/replay.sh.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use kreplay_tests::{cuda_sim, kreplay_bin, scratch};

/// (directory holding libcuda.so.1, the linked program, the runtime-style program).
fn built() -> (&'static PathBuf, &'static PathBuf, &'static PathBuf) {
    let c = cuda_sim("cuda-sim");
    (&c.dir, &c.linked, &c.runtime)
}

fn run(program: &PathBuf, args: &[&str], replay: Option<&[&str]>, env: &[(&str, &str)]) -> String {
    let (dir, _, _) = built();
    let mut cmd = match replay {
        Some(flags) => {
            let mut c = Command::new(kreplay_bin());
            let out = scratch("cuda-sim").join("trace.pftrace");
            c.arg("replay")
                .args(flags)
                .arg("-o")
                .arg(out)
                .arg("--")
                .arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.args(args).env("LD_LIBRARY_PATH", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{program:?} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The program's lines (before kreplay's table) and the table's rows by kernel, each row a
/// map from column name to value (the declines column keeps its spaces).
fn split(stdout: &str) -> (String, HashMap<String, HashMap<String, String>>) {
    let mut app = String::new();
    let mut rows = HashMap::new();
    let mut header: Option<Vec<String>> = None;
    for l in stdout.lines() {
        match &header {
            None if l.starts_with("kernel ") => {
                header = Some(l.split_whitespace().map(str::to_owned).collect())
            }
            None => {
                app.push_str(l);
                app.push('\n');
            }
            // A blank line ends the per-kernel table (the restore table follows it).
            Some(_) if l.trim().is_empty() => break,
            Some(h) => {
                let f: Vec<&str> = l.split_whitespace().collect();
                let mut row: HashMap<String, String> = h
                    .iter()
                    .zip(&f)
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect();
                row.insert("declines".into(), f[h.len() - 1..].join(" "));
                rows.insert(f[0].to_owned(), row);
            }
        }
    }
    (app, rows)
}

const PASSES: &[&str] = &["--passes", "5"];

#[test]
fn in_place_accumulation_is_replayed_five_times_through_both_entry_paths() {
    let (_, linked, runtime) = built();
    for prog in [linked, runtime] {
        let plain = run(prog, &["inplace"], None, &[]);
        assert_eq!(plain, "y_sum 40952.0\n");
        let (app, rows) = split(&run(prog, &["inplace"], Some(PASSES), &[]));
        assert_eq!(app, plain, "{prog:?}");
        let r = &rows["axpy_inplace"];
        assert_eq!(
            (r["dispatches"].as_str(), r["passes"].as_str()),
            ("1", "5"),
            "{prog:?}"
        );
        assert_eq!(r["declines"], "-");
        // x and y, 16 KiB each, plus the module variable `hits` (4 bytes).
        assert_eq!(r["snapshot_bytes"], (2 * 16384 + 4).to_string());
    }
}

#[test]
fn memory_mapped_through_virtual_memory_management_is_restored_too() {
    let (_, linked, runtime) = built();
    for prog in [linked, runtime] {
        let plain = run(prog, &["vmm"], None, &[]);
        assert_eq!(plain, "y_sum 40952.0\n");
        let (app, rows) = split(&run(prog, &["vmm"], Some(PASSES), &[]));
        assert_eq!(
            app, plain,
            "{prog:?}: y (mapped with cuMemMap) accumulated once"
        );
        let r = &rows["axpy_inplace"];
        assert_eq!((r["passes"].as_str(), r["declines"].as_str()), ("5", "-"));
        assert_eq!(r["snapshot_bytes"], (2 * 16384 + 4).to_string());
    }
}

#[test]
fn a_module_variable_named_by_the_ptx_is_restored_between_passes() {
    let (_, linked, runtime) = built();
    for prog in [linked, runtime] {
        let plain = run(prog, &["devicevar"], None, &[]);
        assert_eq!(plain, "hits 4096\ny_sum 16382.0\n");
        let (app, rows) = split(&run(prog, &["devicevar"], Some(PASSES), &[]));
        assert_eq!(app, plain, "{prog:?}: hits must be one pass's count");
        assert_eq!(rows["count_hits"]["passes"], "5");
    }
}

#[test]
fn graph_launches_and_async_pool_memory_are_declined_and_run_once() {
    let (_, _, runtime) = built();
    let (app, rows) = split(&run(runtime, &["graph"], Some(PASSES), &[]));
    assert_eq!(app, "y_sum 40952.0\n");
    let g = &rows["(cuGraphLaunch)"];
    assert_eq!((g["dispatches"].as_str(), g["passes"].as_str()), ("1", "-"));
    assert_eq!(g["declines"], "1x graph launch");

    let (app, rows) = split(&run(runtime, &["async"], Some(PASSES), &[]));
    assert_eq!(app, "y_sum 40952.0\n");
    let a = &rows["axpy_inplace"];
    assert_eq!((a["dispatches"].as_str(), a["passes"].as_str()), ("1", "-"));
    assert!(
        a["declines"].starts_with(
            "1x 1 live allocation(s) kreplay does not snapshot (e.g. 16384 bytes at 0x"
        ) && a["declines"].ends_with(" from cuMemAllocAsync)"),
        "{}",
        a["declines"]
    );
}

#[test]
fn a_failing_snapshot_copy_declines_replay_and_the_program_runs_as_without_kreplay() {
    let (_, linked, _) = built();
    // No device memory to spare (the snapshot goes to pinned host memory), and copies into
    // pinned memory fail: the snapshot cannot be completed.
    let env = [
        ("FAKECUDA_FREE_MIB", "0"),
        ("FAKECUDA_FAIL_DTOH_TO_PINNED", "1"),
    ];
    let plain = run(linked, &["inplace"], None, &env);
    assert_eq!(plain, "y_sum 40952.0\n");
    let (app, rows) = split(&run(linked, &["inplace"], Some(PASSES), &env));
    assert_eq!(app, plain, "one normal run: y accumulated once");
    let r = &rows["axpy_inplace"];
    assert_eq!((r["dispatches"].as_str(), r["passes"].as_str()), ("1", "-"));
    assert!(
        r["declines"].starts_with("1x snapshot incomplete: device-to-host copy of region 0x"),
        "{}",
        r["declines"]
    );
}

#[test]
fn with_probes_one_replay_run_yields_one_trace_with_the_driver_calls_and_the_passes() {
    kreplay_tests::require_root!();
    let (dir, linked, _) = built();
    let trace = scratch("cuda-sim").join("probes.pftrace");
    let out = Command::new(kreplay_bin())
        .args(["replay", "--probes", "--passes", "3", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(linked)
        .arg("inplace")
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .expect("run kreplay replay --probes");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let (app, rows) = split(&stdout);
    assert_eq!(app, "y_sum 40952.0\n");
    assert_eq!(rows["axpy_inplace"]["passes"], "3");
    assert!(stderr.contains("from 1 tool and "), "{stderr}");

    let d = kreplay_tests::decode_trace(&trace);
    assert_eq!(d["errors"], serde_json::json!([]), "decoder errors");
    let tracks = d["tracks"].as_object().unwrap();
    let slices = |pred: &dyn Fn(&serde_json::Value) -> bool| -> Vec<String> {
        d["slices"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(t, _)| pred(&tracks[t.as_str()]))
            .flat_map(|(_, s)| s.as_array().unwrap().iter())
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // The probes saw every driver call. The program's are on its thread's track: its two
    // allocations and uploads (its launch was taken by the tool's wrapper before the driver).
    // The tool's are on the thread's "kreplay (replay)" track: the real cuLaunchKernel once
    // per pass, and one allocation by the snapshot (carved into copies of x, y and the module
    // variable `hits`), which it keeps for the next replay (given back when the program runs
    // out of device memory: no free; tests/tests/own_calls.rs checks them in full).
    let api = slices(&|t| t["kind"] == "thread");
    let count = |name: &str| api.iter().filter(|n| *n == name).count();
    assert_eq!(count("cuLaunchKernel"), 0, "{api:?}");
    assert_eq!(count("cuMemAlloc_v2"), 2, "{api:?}");
    assert_eq!(count("cuMemFree_v2"), 0, "{api:?}");
    assert_eq!(count("cuMemcpyHtoD_v2"), 2, "{api:?}");
    let own = slices(&|t| t["name"] == "kreplay (replay)");
    let own_count = |name: &str| own.iter().filter(|n| *n == name).count();
    assert_eq!(own_count("cuLaunchKernel"), 3, "{own:?}");
    assert_eq!(own_count("cuMemAlloc_v2"), 1, "{own:?}");
    assert_eq!(own_count("cuMemFree_v2"), 0, "{own:?}");
    // The tool's dispatch and its passes, on the stream's track: the device named by the
    // driver, the program's stream by its handle (0: the default stream); the snapshot, taken
    // before the first pass began, lies outside the dispatch's slice: on the replay track.
    let groups = kreplay_tests::trace_json::gpu_groups(&d);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(
        groups[0].name,
        format!("GPU 0: KRSim CUDA Device (app_linked {})", groups[0].pid)
    );
    assert_eq!(
        groups[0].tracks,
        ["GPU busy %", "default stream", "default stream replay"]
    );
    let gpu = slices(&|t| t["kind"] == "named");
    assert_eq!(
        gpu.iter().filter(|n| *n == "axpy_inplace").count(),
        1,
        "{gpu:?}"
    );
    assert_eq!(
        gpu.iter().filter(|n| n.starts_with("pass ")).count(),
        3,
        "{gpu:?}"
    );
    // Each pass slice (the host's span) carries the GPU's own time of it, which fits inside.
    let passes: Vec<&serde_json::Value> = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|s| s.as_array().unwrap())
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("pass ")))
        .collect();
    assert_eq!(passes.len(), 3);
    for p in passes {
        let gpu_us = p["args"]["gpu_us"]["double"].as_f64().expect("gpu_us");
        let span_us =
            (kreplay_tests::trace_json::end(p) - kreplay_tests::trace_json::ts(p)) as f64 / 1e3;
        assert!(gpu_us > 0.0 && gpu_us <= span_us, "{p}");
    }
}

#[test]
fn device_memory_kept_between_replays_is_given_back_when_the_program_needs_it() {
    let (_, linked, runtime) = built();
    // 72 KiB of device memory: x and y (16 KiB each) and the snapshot's device copies (about
    // 32 KiB, kept after the replay) fit; after it the program frees x and asks for 40 KiB,
    // which fits only without kreplay's copies.
    let env = [("FAKECUDA_DEVICE_BYTES", "73728")];
    for program in [linked, runtime] {
        let plain = run(program, &["realloc"], None, &env);
        assert!(plain.contains("realloc ok"), "{plain}");
        let flags = ["--passes", "3", "--snapshot-placement", "device"];
        let (app, rows) = split(&run(program, &["realloc"], Some(&flags), &env));
        assert_eq!(app, plain, "{program:?}");
        assert_eq!(rows["axpy_inplace"]["replayed"], "1", "{rows:?}");
    }
}

#[test]
fn each_pass_is_timed_on_the_gpu_by_events_and_goes_untimed_when_they_fail() {
    let (_, linked, _) = built();
    let json = scratch("cuda-sim").join("timed.json");
    let flags = ["--passes", "5", "--json", json.to_str().unwrap()];
    let kernel_row = || -> serde_json::Value {
        let text = std::fs::read_to_string(&json).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("\"kind\":\"kernel\"") && l.contains("axpy_inplace"))
            .unwrap();
        serde_json::from_str(line).unwrap()
    };
    // Every kernel takes at least 2 ms on the stand-in's "GPU".
    let slow = [("FAKECUDA_KERNEL_US", "2000")];
    let (app, rows) = split(&run(linked, &["inplace"], Some(&flags), &slow));
    assert_eq!(app, "y_sum 40952.0\n");
    assert_eq!(rows["axpy_inplace"]["time"], "gpu", "{rows:?}");
    let k = kernel_row();
    let (gpu, host) = (&k["pass_gpu_ns"], &k["pass_ns"]);
    assert_eq!(gpu["passes"], 5, "{k}");
    let ns = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
    // The events bracket the kernel alone; the host's span also holds the launch and the wait.
    assert!(ns(gpu, "min") >= 2_000_000, "{k}");
    assert!(ns(gpu, "max") <= ns(host, "max"), "{k}");
    assert!(ns(gpu, "median") <= ns(host, "median"), "{k}");
    // The table shows the GPU's times (µs, one decimal).
    assert_eq!(
        rows["axpy_inplace"]["median_us"],
        format!("{:.1}", ns(gpu, "median") as f64 / 1e3)
    );

    // Events that cannot be recorded: the passes still run, timed by the host.
    let failing = [("FAKECUDA_FAIL_EVENT_RECORD", "1")];
    let (app, rows) = split(&run(linked, &["inplace"], Some(&flags), &failing));
    assert_eq!(app, "y_sum 40952.0\n");
    let r = &rows["axpy_inplace"];
    assert_eq!((r["passes"].as_str(), r["time"].as_str()), ("5", "host"));
    let k = kernel_row();
    assert_eq!(k["pass_gpu_ns"], serde_json::Value::Null, "{k}");
    assert_eq!(k["pass_ns"]["median"].as_u64().map(|v| v > 0), Some(true));
}
