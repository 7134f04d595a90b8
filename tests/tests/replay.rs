//! `kreplay replay` on the simulated runtime's workloads: replayed runs print exactly what
//! unreplayed runs print, and the per-kernel table (computed from the tool's stream) says what
//! was replayed, restored and declined.

use std::collections::HashMap;
use std::process::{Command, Output};

use kreplay_tests::replay_table::{Row, app_lines, table};
use kreplay_tests::{kreplay_bin, make_sim, scratch, workload};

/// One row of the restore table (kernels whose dispatches were restored).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RestoreRow {
    mode: String,
    restores: u64,
    bytes_hashed: u64,
    bytes_checked: u64,
    bytes_restored: u64,
    dirty_chunks: u64,
}

fn restore_table(stdout: &str) -> HashMap<String, RestoreRow> {
    let mut rows = HashMap::new();
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("restore "));
    lines.next();
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 9 {
            continue;
        }
        rows.insert(
            f[0].to_owned(),
            RestoreRow {
                mode: f[1].to_owned(),
                restores: f[2].parse().unwrap(),
                bytes_hashed: f[3].parse().unwrap(),
                bytes_checked: f[4].parse().unwrap(),
                bytes_restored: f[5].parse().unwrap(),
                dirty_chunks: f[6].parse().unwrap(),
            },
        );
    }
    rows
}

fn plain(name: &str, args: &[&str]) -> Output {
    let out = Command::new(workload(name))
        .args(args)
        .output()
        .expect("run workload");
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn replayed(name: &str, args: &[&str], opts: &[&str], env: &[(&str, &str)]) -> (Output, String) {
    let trace = scratch("replay").join(format!("{name}.pftrace"));
    let out = Command::new(kreplay_bin())
        .arg("replay")
        .args(opts)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(workload(name))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run kreplay replay");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kreplay replay {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, stdout)
}

fn plain_lines(name: &str, args: &[&str]) -> Vec<String> {
    String::from_utf8_lossy(&plain(name, args).stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn five_passes_of_saxpy_leave_y_and_the_device_counter_at_one_pass_values() {
    let args = ["1", "100000", "1"];
    let (_, out) = replayed("saxpy", &args, &["--passes", "5"], &[]);
    assert_eq!(app_lines(&out), plain_lines("saxpy", &args));
    assert!(
        out.contains("launches: 1\n"),
        "the __device__ counter counts launches, not passes:\n{out}"
    );
    let rows = table(&out);
    // x and y (100000 floats each) and the 8-byte launch counter, captured once.
    assert_eq!(
        rows["saxpy"],
        Row {
            dispatches: 1,
            passes: 5,
            snapshot_bytes: 800_008,
            nondet: 0,
            declines: "-".into()
        }
    );
}

#[test]
fn several_buffers_on_several_streams_are_all_restored() {
    // One launch per stream: every queue sees exactly one single-dispatch batch.
    let args = ["4", "20000", "1"];
    let (_, out) = replayed("saxpy", &args, &["--passes", "3"], &[]);
    assert_eq!(app_lines(&out), plain_lines("saxpy", &args));
    assert!(out.contains("launches: 4\n"), "{out}");
    let r = &table(&out)["saxpy"];
    assert_eq!((r.dispatches, r.passes, r.nondet), (4, 12, 0), "{r:?}");
    assert_eq!(r.declines, "-");
}

#[test]
fn each_fault_knob_declines_replay_and_the_output_equals_an_unreplayed_run() {
    let args = ["1", "50000", "1"];
    let expected = plain_lines("saxpy", &args);
    for (knob, value, reason) in [
        ("KRSIM_FAIL_D2H_NTH", "1", "device-to-host copy"),
        (
            "KRSIM_FAIL_SYMBOL_ITER",
            "1",
            "module variable enumeration failed",
        ),
        ("KRSIM_FAIL_HOST_ALLOC_ABOVE", "4096", "host allocation"),
    ] {
        // Pinned only: in the default placement a refused pinned allocation falls back to
        // pageable memory (tested below), so the knob declines only when pinned is required.
        let (_, out) = replayed(
            "saxpy",
            &args,
            &["--passes", "4", "--snapshot-placement", "pinned"],
            &[(knob, value)],
        );
        assert_eq!(app_lines(&out), expected, "{knob}");
        let rows = table(&out);
        assert_eq!(rows.len(), 1, "{knob}: {out}");
        let r = rows.values().next().unwrap();
        assert_eq!(
            (r.dispatches, r.passes, r.snapshot_bytes),
            (1, 0, 0),
            "{knob}: {r:?}"
        );
        assert!(
            r.declines.starts_with("1x snapshot incomplete") && r.declines.contains(reason),
            "{knob}: {r:?}"
        );
    }
}

#[test]
fn a_refused_pinned_allocation_falls_back_to_pageable_memory() {
    let args = ["1", "50000", "1"];
    let (_, out) = replayed(
        "saxpy",
        &args,
        &["--passes", "4", "--restore", "dirty"],
        &[("KRSIM_FAIL_HOST_ALLOC_ABOVE", "4096")],
    );
    assert_eq!(app_lines(&out), plain_lines("saxpy", &args));
    assert_eq!(table(&out)["saxpy"].passes, 4, "{out}");
    let r = &restore_table(&out)["saxpy"];
    // The hash scratch (min(largest region, 1 MiB) = 200000 bytes) is pageable too.
    assert_eq!((r.mode.as_str(), r.restores), ("pageable/host-hash/16K", 3));
}

#[test]
fn graph_launches_are_not_replayed_and_warned_once() {
    let args = ["4096", "5"];
    let (o, out) = replayed("graph", &args, &["--passes", "3"], &[]);
    assert_eq!(app_lines(&out), plain_lines("graph", &args));
    let rows = table(&out);
    for k in ["scale", "mix", "combine", "accumulate"] {
        assert_eq!(
            rows[k],
            Row {
                dispatches: 5,
                passes: 0,
                snapshot_bytes: 0,
                nondet: 0,
                declines: "5x multi-packet submission".into()
            },
            "{k}"
        );
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr.matches("multi-packet submissions").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn threads_dispatching_while_another_replays_all_get_correct_results() {
    let args = ["9", "40"];
    let (_, out) = replayed("high_qps", &args, &["--passes", "3"], &[]);
    assert_eq!(app_lines(&out), plain_lines("high_qps", &args));
    let r = &table(&out)["fill"];
    assert_eq!(r.dispatches, 360);
    let declined: u64 = r
        .declines
        .split('x')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert_eq!(r.passes, 3 * (r.dispatches - declined), "{r:?}");
    assert!(r.passes > 0);
}

#[test]
fn the_kernel_filter_and_the_dispatch_limit_select_what_is_replayed() {
    let args = ["1", "1000", "4"];
    let (_, out) = replayed(
        "saxpy",
        &args,
        &["--passes", "2", "--kernel", "^nomatch$"],
        &[],
    );
    assert_eq!(app_lines(&out), plain_lines("saxpy", &args));
    assert_eq!(table(&out)["saxpy"].passes, 0);
    // Two streams with one launch each: every dispatch reaches its queue alone (the sim hands
    // an interceptor whatever is queued as one batch, and batches are not replayed), so
    // exactly the first one is replayed under the limit.
    let args = ["2", "1000", "1"];
    let (_, out) = replayed(
        "saxpy",
        &args,
        &["--passes", "2", "--max-dispatches", "1"],
        &[],
    );
    assert_eq!(app_lines(&out), plain_lines("saxpy", &args));
    assert_eq!(table(&out)["saxpy"].passes, 2);
}

/// `bytepatch` over 4 MiB: one byte at offset 196625 (in 16 KiB chunk 12, 4 KiB chunk 48).
const PATCH: [&str; 2] = ["4194304", "196625"];

#[test]
fn a_single_changed_byte_restores_exactly_its_chunk() {
    make_sim(&["hsa", "hip"]);
    for (chunk, opts) in [
        (16384u64, &["--passes", "3", "--restore", "dirty"][..]),
        (
            4096,
            &["--passes", "3", "--restore", "dirty", "--chunk-size", "4K"][..],
        ),
    ] {
        let args = [PATCH[0], PATCH[1], "0xff", "1"];
        let (_, out) = replayed("bytepatch", &args, opts, &[]);
        assert_eq!(app_lines(&out), plain_lines("bytepatch", &args));
        assert!(
            out.contains(
                "old: 51
new: 255
"
            ),
            "{out}"
        );
        let t = &table(&out)["patch"];
        assert_eq!((t.passes, t.snapshot_bytes), (3, 4 << 20));
        let label = if chunk == 4096 { "4K" } else { "16K" };
        assert_eq!(
            restore_table(&out)["patch"],
            RestoreRow {
                mode: format!("pinned/host-hash/{label}"),
                restores: 2,
                bytes_hashed: 4 << 20,
                bytes_checked: 2 * (4 << 20),
                bytes_restored: 2 * chunk,
                dirty_chunks: 2,
            },
            "chunk {chunk}"
        );
    }
}

#[test]
fn a_kernel_that_writes_the_value_already_there_restores_nothing() {
    make_sim(&["hsa", "hip"]);
    let args = [PATCH[0], PATCH[1], "256", "1"];
    let (_, out) = replayed(
        "bytepatch",
        &args,
        &["--passes", "4", "--restore", "dirty"],
        &[],
    );
    assert_eq!(app_lines(&out), plain_lines("bytepatch", &args));
    assert!(
        out.contains(
            "old: 51
new: 51
"
        ),
        "{out}"
    );
    let r = &restore_table(&out)["patch"];
    assert_eq!(
        (
            r.restores,
            r.bytes_checked,
            r.bytes_restored,
            r.dirty_chunks
        ),
        (3, 3 * (4 << 20), 0, 0)
    );
}

#[test]
fn over_the_snapshot_budget_replay_is_declined_with_the_reason() {
    make_sim(&["hsa", "hip"]);
    let args = [PATCH[0], PATCH[1], "0xff", "1"];
    let (_, out) = replayed(
        "bytepatch",
        &args,
        &["--passes", "3", "--snapshot-budget", "1M"],
        &[],
    );
    assert_eq!(app_lines(&out), plain_lines("bytepatch", &args));
    assert_eq!(
        table(&out)["patch"],
        Row {
            dispatches: 1,
            passes: 0,
            snapshot_bytes: 0,
            nondet: 0,
            declines: "1x snapshot over budget: footprint 4M (4194304 bytes) exceeds \
                       --snapshot-budget 1M"
                .into()
        }
    );
}

#[test]
fn footprint_restores_exactly_the_chunks_its_kernels_wrote() {
    // 8 buffers of 4 MiB; each kernel writes one word in every 64th 4 KiB page of its buffer:
    // 16 words, each in its own 16 KiB chunk, so every restore writes back 16 chunks (256 KiB
    // of a 32 MiB footprint: 0.8%).
    let args = ["33554432", "4194304", "64", "1"];
    let (_, out) = replayed(
        "footprint",
        &args,
        &["--passes", "3", "--restore", "dirty"],
        &[(
            kreplay_common::replay_config::Setting::CheckDeterminism.var(),
            "0",
        )],
    );
    assert_eq!(app_lines(&out), plain_lines("footprint", &args));
    assert!(out.contains("written_bytes: 1024\n"), "{out}");
    let t = &table(&out)["touch"];
    assert_eq!(t.dispatches, 8);
    let replayed_dispatches = t.passes / 3;
    assert!(replayed_dispatches > 0, "{t:?}");
    let r = &restore_table(&out)["touch"];
    let restores = 2 * replayed_dispatches;
    assert_eq!(
        *r,
        RestoreRow {
            mode: "pinned/host-hash/16K".into(),
            restores,
            bytes_hashed: replayed_dispatches * (32 << 20),
            bytes_checked: restores * (32 << 20),
            bytes_restored: restores * 16 * 16384,
            dirty_chunks: restores * 16,
        }
    );
}

#[test]
fn every_workload_prints_the_same_with_and_without_replay() {
    for (name, args) in [
        ("saxpy", &["2", "10000", "3"][..]),
        ("high_qps", &["4", "20"][..]),
        ("graph", &["4096", "3"][..]),
        ("malloc_async", &["10"][..]),
        ("churn", &["200", "10"][..]),
        ("footprint", &["16777216", "4194304", "64", "2"][..]),
        ("racy", &["16", "16"][..]),
        ("bytepatch", &["1048576", "70000", "7", "3"][..]),
    ] {
        let (_, out) = replayed(
            name,
            args,
            &["--passes", "3", "--restore", "dirty"],
            &[("KRSIM_WORKERS", "1")],
        );
        // Restoring every byte gives the same results as restoring only changed chunks.
        let (_, full) = replayed(
            name,
            args,
            &["--passes", "3", "--restore", "full"],
            &[("KRSIM_WORKERS", "1")],
        );
        assert_eq!(app_lines(&full), app_lines(&out), "{name}: full vs dirty");
        let expected: Vec<String> = String::from_utf8_lossy(
            &Command::new(workload(name))
                .args(args)
                .env("KRSIM_WORKERS", "1")
                .output()
                .unwrap()
                .stdout,
        )
        .lines()
        .map(str::to_owned)
        .collect();
        assert_eq!(app_lines(&out), expected, "{name}");
        assert!(out.contains("checksum: "), "{name}");
    }
}

#[test]
fn configuration_errors_are_one_line_and_exit_1() {
    for (opts, needle) in [
        (&["--passes", "0"][..], "passes"),
        (&["--kernel", "("][..], "regex"),
    ] {
        let out = Command::new(kreplay_bin())
            .arg("replay")
            .args(opts)
            .arg("--")
            .arg("/bin/true")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_stream_directory_replay_did_not_create_is_left_as_it_was() {
    let tmp = scratch("replay-tmpdir");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let trace = scratch("replay").join("taken-tmpdir.pftrace");
    // The shell makes the directory replay would use (`$TMPDIR/kreplay-replay-<pid>`), puts a
    // person's file in it, then becomes kreplay under the same pid.
    let out = Command::new("sh")
        .arg("-c")
        .arg(
            r#"d="$TMPDIR/kreplay-replay-$$" && mkdir "$d" && echo mine > "$d/notes.txt" &&
               echo not-from-this-run > "$d/tool-1.krs" && exec "$0" "$@""#,
        )
        .arg(kreplay_bin())
        .args(["replay", "--passes", "2", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(workload("saxpy"))
        .args(["1", "1000", "1"])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = out.id();
    let out = out.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Only the person's directory is left: replay's own, a fresh name, is gone.
    assert_eq!(listing(&tmp), [format!("kreplay-replay-{pid}")]);
    let theirs = tmp.join(format!("kreplay-replay-{pid}"));
    assert_eq!(listing(&theirs), ["notes.txt", "tool-1.krs"]);
    assert_eq!(std::fs::read(theirs.join("notes.txt")).unwrap(), b"mine\n");
    assert_eq!(
        std::fs::read(theirs.join("tool-1.krs")).unwrap(),
        b"not-from-this-run\n"
    );
    // The file that is not a stream was not read: the run merged the tool's one stream.
    assert!(
        stderr.contains(&format!("kreplay: wrote {} (", trace.display())),
        "{stderr}"
    );
}

#[test]
fn a_shell_starting_two_workloads_gets_the_tool_in_both_and_each_kernel_names_its_process() {
    let w = workload("saxpy");
    let line = format!(
        "{w} 1 1024 2 > /dev/null & {w} 1 1024 3 > /dev/null; wait",
        w = w.display()
    );
    let trace = scratch("replay").join("tree.pftrace");
    let out = Command::new(kreplay_bin())
        .args(["replay", "--passes", "2", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &line])
        .output()
        .expect("run kreplay replay");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    // One row per process: `saxpy [pid N]` with its own dispatch count.
    let mut rows: Vec<(u64, u64)> = stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("saxpy [pid ")?;
            let (pid, cols) = rest.split_once(']')?;
            let dispatches = cols.split_whitespace().next()?.parse().ok()?;
            Some((pid.parse().ok()?, dispatches))
        })
        .collect();
    rows.sort_by_key(|r| r.1);
    assert_eq!(
        rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        [2, 3],
        "{stdout}"
    );
    // The trace puts each process's replays under its own GPU agent track, named with the
    // process's program and pid.
    let d = kreplay_tests::decode_trace(&trace);
    let mut named: Vec<u64> = d["tracks"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|t| {
            let rest = t["name"].as_str()?.strip_prefix("GPU agent ")?;
            rest.split_once(" (saxpy ")?
                .1
                .strip_suffix(')')?
                .parse()
                .ok()
        })
        .collect();
    named.sort_unstable();
    let mut want: Vec<u64> = rows.iter().map(|r| r.0).collect();
    want.sort_unstable();
    assert_eq!(named, want);
}
