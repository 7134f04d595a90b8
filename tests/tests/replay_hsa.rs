//! `kreplay replay` on the simulated HSA runtime, the HSA-specific parts: batches of several
//! submissions handed to the queue interceptor at once, vmem-mapped memory (hipMallocAsync),
//! the determinism check on a racing kernel, and the tool library loaded twice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use kreplay_tests::replay_table::{Row, app_lines, table};
use kreplay_tests::{
    build_hip_program, decode_trace, kreplay_bin, require_root, scratch, workload, workspace_root,
};

fn plain_lines(exe: &PathBuf, args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let out = Command::new(exe)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run the program");
    assert!(
        out.status.success(),
        "{} failed: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Runs `kreplay replay OPTS -- EXE ARGS` with `env`; returns (output, stdout, stderr).
fn replayed(
    exe: &PathBuf,
    args: &[&str],
    opts: &[&str],
    env: &[(&str, &str)],
) -> (Output, String, String) {
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let trace = scratch("replay_hsa").join(format!("{name}.pftrace"));
    let out = Command::new(kreplay_bin())
        .arg("replay")
        .args(opts)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(exe)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run kreplay replay");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "kreplay replay {name} failed:\n{stdout}\n{stderr}"
    );
    (out, stdout, stderr)
}

fn batched() -> PathBuf {
    build_hip_program(
        &workspace_root().join("tests/tests/replay_hsa/batched.c"),
        "batched",
    )
}

#[test]
fn submissions_batched_behind_a_busy_interceptor_are_replayed_one_by_one() {
    // While `hold` is being replayed the application makes 2 bump launches, one two-node graph
    // launch and 2 more bump launches: one batch of 6 packets, 5 submissions.
    let exe = batched();
    let args = ["4096", "2", "2"];
    let (_, out, err) = replayed(
        &exe,
        &args,
        &["--passes", "3"],
        &[(
            kreplay_common::replay_config::LOG,
            "kreplay_tool::hsa::intercept=debug",
        )],
    );
    assert_eq!(app_lines(&out), plain_lines(&exe, &args, &[]));
    assert!(out.contains("bumps: 4\n"), "{out}");
    assert_eq!(
        err.matches("batch of 6 packets holds 5 submissions")
            .count(),
        1,
        "{err}"
    );
    let rows = table(&out);
    // y is 4096 u32 = 16384 bytes, snapshotted once per replayed dispatch.
    assert_eq!(
        rows["bump"],
        Row {
            dispatches: 4,
            passes: 12,
            snapshot_bytes: 16384,
            nondet: 0,
            declines: "-".into()
        }
    );
    assert_eq!(
        rows["hold"],
        Row {
            dispatches: 1,
            passes: 3,
            snapshot_bytes: 16384,
            nondet: 0,
            declines: "-".into()
        }
    );
    // The graph launch inside the batch is one two-packet submission: not replayed.
    assert_eq!(
        rows["mix"],
        Row {
            dispatches: 2,
            passes: 0,
            snapshot_bytes: 0,
            nondet: 0,
            declines: "2x multi-packet submission".into()
        }
    );
    assert_eq!(err.matches("multi-packet submissions").count(), 1, "{err}");
}

#[test]
fn one_launch_per_doorbell_on_a_busy_stream_is_replayed_every_time() {
    // Eight launches on one stream, made while earlier ones are being replayed: however the
    // interceptor receives them, each is its own submission and is replayed.
    let exe = workload("saxpy");
    let args = ["1", "20000", "8"];
    let (_, out, _) = replayed(&exe, &args, &["--passes", "3"], &[]);
    assert_eq!(app_lines(&out), plain_lines(&exe, &args, &[]));
    assert!(out.contains("launches: 8\n"), "{out}");
    let r = &table(&out)["saxpy"];
    // x, y (20000 floats each) and the 8-byte counter, per replayed dispatch.
    assert_eq!(
        *r,
        Row {
            dispatches: 8,
            passes: 24,
            snapshot_bytes: 160_008,
            nondet: 0,
            declines: "-".into()
        }
    );
}

/// The racing kernel's counter address, as racy prints it on stderr.
fn counter_address(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("counter_address: "))
        .unwrap_or_else(|| panic!("no counter address in:\n{stderr}"))
        .to_owned()
}

#[test]
fn a_racing_kernel_is_reported_nondeterministic_with_the_first_differing_region() {
    let exe = workload("racy");
    let args = ["256", "64"];
    // Lost updates need workers to overlap, which a loaded host may not give in one run:
    // up to five runs of eight passes each.
    let mut found = None;
    for _ in 0..5 {
        let (_, out, err) = replayed(&exe, &args, &["--passes", "8"], &[("KRSIM_WORKERS", "4")]);
        let r = table(&out)["race"].clone();
        assert_eq!((r.dispatches, r.passes), (1, 8), "{r:?}");
        if r.nondet > 0 {
            found = Some((r, err));
            break;
        }
    }
    let (r, err) = found.expect("no pass of the racing kernel differed in five runs");
    // One report per dispatch: the first differing pass.
    assert_eq!(r.nondet, 1, "{r:?}");
    let addr = counter_address(&err);
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("differs from pass 0"))
        .collect();
    assert_eq!(reports.len(), 1, "{err}");
    assert!(
        reports[0].ends_with(&format!("in region {addr} at offset 0")),
        "the counter's allocation, at its first byte: {}",
        reports[0]
    );
}

#[test]
fn deterministic_kernels_are_not_reported() {
    // The same racing kernel on one worker is exact; saxpy and the graph-free bumps too.
    let exe = workload("racy");
    let (_, out, err) = replayed(
        &exe,
        &["64", "64"],
        &["--passes", "6"],
        &[("KRSIM_WORKERS", "1")],
    );
    assert!(out.contains("counter: 4096\n"), "{out}");
    assert_eq!(table(&out)["race"].nondet, 0);
    assert_eq!(table(&out)["race"].passes, 6);
    assert!(!err.contains("differs from pass 0"), "{err}");
    let (_, out, _) = replayed(
        &workload("saxpy"),
        &["2", "5000", "2"],
        &["--passes", "4"],
        &[("KRSIM_WORKERS", "4")],
    );
    let r = &table(&out)["saxpy"];
    assert_eq!((r.dispatches, r.passes, r.nondet), (4, 16, 0), "{r:?}");
}

fn test_program(name: &str) -> PathBuf {
    build_hip_program(
        &workspace_root().join(format!("tests/tests/replay_hsa/{name}.c")),
        name,
    )
}

#[test]
fn hip_malloc_async_memory_is_snapshotted_and_restored() {
    // `triple` updates vmem-mapped memory in place: five passes without a restore in between
    // would leave 3^5-fold values, which the program rejects (exit 1).
    let exe = test_program("async_inplace");
    let args = ["3000", "3"];
    let (_, out, _) = replayed(&exe, &args, &["--passes", "5"], &[]);
    assert_eq!(app_lines(&out), plain_lines(&exe, &args, &[]));
    // 3000 u32 = 12000 bytes, mapped in 4 KiB granules: 12288 bytes per dispatch.
    assert_eq!(
        table(&out)["triple"],
        Row {
            dispatches: 3,
            passes: 15,
            snapshot_bytes: 12288,
            nondet: 0,
            declines: "-".into()
        }
    );
    // The sample workload: 20 allocations of 512*(1+i%7)+i%5 u64 each, one live at a time.
    let exe = workload("malloc_async");
    let json = scratch("replay_hsa").join("malloc_async.json");
    let json_arg = json.display().to_string();
    let (_, out, _) = replayed(&exe, &["20"], &["--passes", "3", "--json", &json_arg], &[]);
    assert_eq!(app_lines(&out), plain_lines(&exe, &["20"], &[]));
    let expected: u64 = (0..20u64)
        .map(|i| (512 * (1 + i % 7) + i % 5) * 8)
        .map(|b| b.div_ceil(4096) * 4096)
        .sum();
    assert_eq!(expected, 380_928);
    assert_eq!(
        table(&out)["stamp"],
        Row {
            dispatches: 20,
            passes: 60,
            // The table shows bytes per snapshot; the JSON has the total.
            snapshot_bytes: expected / 20,
            nondet: 0,
            declines: "-".into()
        }
    );
    let text = std::fs::read_to_string(&json).expect("the --json file");
    let stamp: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            &stamp["kernel"],
            &stamp["snapshot_bytes"],
            &stamp["snapshots"]
        ),
        (
            &serde_json::json!("stamp"),
            &serde_json::json!(expected),
            &serde_json::json!(20)
        )
    );
}

#[test]
fn a_live_vmem_mapping_that_cannot_be_snapshotted_declines_replay_with_the_reason() {
    // Three launches; only the one made while a fine-grained vmem mapping is live declines.
    let exe = test_program("vmem_fine");
    let (_, out, _) = replayed(&exe, &["2048"], &["--passes", "4"], &[]);
    assert_eq!(app_lines(&out), plain_lines(&exe, &["2048"], &[]));
    assert!(out.contains("mapped_word: 1\n"), "{out}");
    assert_eq!(
        table(&out)["bump"],
        Row {
            dispatches: 3,
            passes: 8,
            snapshot_bytes: 8192,
            nondet: 0,
            declines: "1x vmem-mapped memory that cannot be snapshotted is live (1 mappings of \
                       fine-grained, host or unknown memory)"
                .into()
        }
    );
}

/// The tool library `kreplay replay` injects (next to the kreplay binary, as it looks).
fn tool_lib() -> PathBuf {
    let bin = kreplay_bin();
    let dir = bin.parent().unwrap();
    [
        dir.join("libkreplay_tool.so"),
        dir.join("deps/libkreplay_tool.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("no libkreplay_tool.so next to {}", bin.display()))
}

/// The record count `kreplay replay` reports for its trace.
fn records_written(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("kreplay: wrote "))
        .and_then(|l| l.split(" (").nth(1))
        .and_then(|l| l.strip_suffix(" records)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record count in:\n{stderr}"))
}

#[test]
fn a_tool_library_loaded_twice_wraps_once_and_records_once() {
    let exe = workload("saxpy");
    let args = ["1", "100000", "1"];
    let expected_rows = HashMap::from([(
        "saxpy".to_owned(),
        Row {
            dispatches: 1,
            passes: 5,
            snapshot_bytes: 800_008,
            nondet: 0,
            declines: "-".into(),
        },
    )]);
    let (_, once_out, once_err) = replayed(&exe, &args, &["--passes", "5"], &[]);
    assert_eq!(table(&once_out), expected_rows);
    let once_records = records_written(&once_err);
    // Debug logging on: the flushes at unload and exit (after the logger's thread-locals are
    // gone) still write every record.
    let (_, out, err) = replayed(
        &exe,
        &args,
        &["--passes", "5"],
        &[(kreplay_common::replay_config::LOG, "debug")],
    );
    assert_eq!(table(&out), expected_rows);
    assert_eq!(records_written(&err), once_records, "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A copy of the library at another path (a second instance with its own statics) loaded
    // first, then kreplay's own: the second finds the first's wrappers and stays idle.
    let copy_dir = scratch("replay_hsa").join("tool-copy");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join("libkreplay_tool.so");
    std::fs::copy(tool_lib(), &copy).unwrap();
    let copy = copy.to_string_lossy().into_owned();
    // The same path twice: one instance, OnLoad called twice.
    let same = tool_lib().to_string_lossy().into_owned();
    for (tools, message) in [
        (
            &copy,
            "another kreplay instance already wrapped this runtime; this one stays idle",
        ),
        (
            &same,
            "OnLoad called again in this library instance; wrappers already installed",
        ),
    ] {
        let (_, out, err) = replayed(
            &exe,
            &args,
            &["--passes", "5"],
            &[("HSA_TOOLS_LIB", tools.as_str())],
        );
        assert_eq!(app_lines(&out), plain_lines(&exe, &args, &[]), "{tools}");
        assert!(out.contains("launches: 1\n"), "{out}");
        assert_eq!(err.matches(message).count(), 1, "{tools}:\n{err}");
        // One dispatch, five passes, the footprint once: nothing doubled by a second wrapper.
        assert_eq!(table(&out), expected_rows, "{tools}");
        assert_eq!(records_written(&err), once_records, "{tools}");
    }
}

#[test]
fn with_probes_one_replay_run_yields_one_trace_with_api_calls_linked_to_dispatches() {
    require_root!();
    let exe = workload("saxpy");
    let args = ["1", "20000", "2"];
    let trace = scratch("replay_hsa").join("probes.pftrace");
    let out = Command::new(kreplay_bin())
        .args(["replay", "--probes", "--passes", "3", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(args)
        .output()
        .expect("run kreplay replay --probes");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(app_lines(&stdout), plain_lines(&exe, &args, &[]));
    let r = &table(&stdout)["saxpy"];
    assert_eq!((r.dispatches, r.passes, r.nondet), (2, 6, 0), "{r:?}");
    assert!(
        stderr.contains("from 1 tool and 2 probe streams")
            && stderr.contains(" 2 dispatches, 4 copies, 6 flows)"),
        "{stderr}"
    );

    let d = decode_trace(&trace);
    assert_eq!(d["errors"], serde_json::json!([]), "decoder errors");
    let track_of = |kind: &str, name: &str| -> String {
        let t = d["tracks"].as_object().unwrap();
        let found: Vec<&String> = t
            .iter()
            .filter(|(_, v)| v["kind"] == kind && v["name"] == name)
            .map(|(k, _)| k)
            .collect();
        assert_eq!(found.len(), 1, "one {kind} track {name:?}: {t:?}");
        found[0].clone()
    };
    let names_at = |track: &str, depth: u64| -> Vec<String> {
        d["slices"][track]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["depth"] == depth)
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // The application thread's API calls, from the probes.
    let thread = track_of("thread", "saxpy");
    let launches = names_at(&thread, 0)
        .into_iter()
        .filter(|n| n == "hipLaunchKernel")
        .count();
    assert_eq!(launches, 2);
    // The queue's dispatches with their passes, from the tool.
    let queue_name = d["tracks"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v["name"].as_str())
        .find(|n| n.starts_with("queue ") && !n.ends_with(" replay"))
        .expect("a queue track")
        .to_owned();
    let queue = track_of("named", &queue_name);
    assert_eq!(names_at(&queue, 0), ["saxpy", "saxpy"]);
    let passes: Vec<String> = names_at(&queue, 1)
        .into_iter()
        .filter(|n| n.starts_with("pass "))
        .collect();
    assert_eq!(
        passes,
        ["pass 0", "pass 1", "pass 2", "pass 0", "pass 1", "pass 2"]
    );
    // Each launch flows to the dispatch it produced, each HSA copy call (two per buffer in,
    // one out, and the launch counter read back) to its copy.
    let flows = d["flows"].as_object().unwrap();
    assert_eq!(flows.len(), 6, "{flows:?}");
    let (mut launches, mut copies) = (0, 0);
    for f in flows.values() {
        assert_eq!(f["from"][0]["track"].to_string(), thread);
        if f["from"][0]["name"] == "hipLaunchKernel" {
            launches += 1;
            assert_eq!(f["to"][0]["name"], "saxpy");
            assert_eq!(f["to"][0]["track"].to_string(), queue);
        } else {
            copies += 1;
            assert_eq!(f["from"][0]["name"], "hsa_amd_memory_async_copy");
            assert!(
                f["to"][0]["name"].as_str().unwrap().starts_with("copy "),
                "{f}"
            );
        }
    }
    assert_eq!((launches, copies), (2, 4));
}
