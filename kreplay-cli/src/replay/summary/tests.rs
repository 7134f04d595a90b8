//! Tests of the replay summary: aggregation per kernel from records in either order, declines
//! grouped by cause, the table, the closing lines and the JSON.

use super::*;
use crate::replay::durations::{Durations, MEDIAN_REL_ERROR};
use crate::replay::table::{RunTotals, footer, json, render, short_name};
use kreplay_common::stream::{
    Decline, Dispatch, Nondeterministic, ReplayPass, Restore, Snapshot, ToolWindow,
};

/// Durations holding `v`.
fn durations(v: &[u64]) -> Durations {
    let mut d = Durations::default();
    v.iter().for_each(|&x| d.add(x));
    d
}

fn dispatch(corr: u64, kernel: &str) -> Record {
    Dispatch {
        pid: 1,
        tid: 1,
        agent: 2,
        queue: 3,
        kernel: kernel.into(),
        correlation: corr,
        kernel_object: 9,
        grid: [1; 3],
        workgroup: [1; 3],
        submit_ns: 0,
        start_ns: 0,
        end_ns: 0,
        group_segment: 0,
        private_segment: 0,
    }
    .into()
}

fn pass(corr: u64, pass: u32, ns: u64) -> Record {
    ReplayPass {
        correlation: corr,
        pass,
        start_ns: 1000,
        end_ns: 1000 + ns,
        pid: 1,
        tid: 1,
        gpu_ns: 0,
    }
    .into()
}

/// Pass `pass` of dispatch `corr`: `host_ns` on the host, `gpu_ns` on the GPU (0: untimed).
fn timed_pass(corr: u64, pass: u32, host_ns: u64, gpu_ns: u64) -> Record {
    ReplayPass {
        correlation: corr,
        pass,
        start_ns: 1000,
        end_ns: 1000 + host_ns,
        pid: 1,
        tid: 1,
        gpu_ns,
    }
    .into()
}

fn snapshot(corr: u64, bytes: u64, ns: u64) -> Record {
    Snapshot {
        correlation: corr,
        start_ns: 0,
        end_ns: ns,
        bytes,
        regions: 2,
        placement: snapshot_mode::PINNED,
        check: snapshot_mode::HOST_HASH,
        chunk_size: 64 << 10,
        bytes_hashed: bytes,
        pid: 1,
        tid: 1,
    }
    .into()
}

fn restore(corr: u64, ns: u64, check: u8, failed: u64) -> Record {
    Restore {
        correlation: corr,
        pass: 1,
        start_ns: 0,
        end_ns: ns,
        bytes: 4096,
        regions: 1,
        skipped: 0,
        placement: snapshot_mode::PINNED,
        check,
        bytes_checked: 8192,
        dirty_chunks: 1,
        check_ns: 100,
        pid: 1,
        tid: 1,
        failed,
    }
    .into()
}

fn decline(corr: u64, reason: &str) -> Record {
    Decline {
        correlation: corr,
        ts_ns: 1,
        reason: reason.into(),
    }
    .into()
}

/// Two replayed saxpy dispatches (the first with its record last, as HSA writes it; the second
/// with its record first), one stopped by a failed restore, and two fill dispatches declined
/// for one cause at two addresses, plus a filtered-out dispatch.
fn records() -> Vec<Record> {
    vec![
        snapshot(1, 1 << 20, 5000),
        pass(1, 0, 3000),
        restore(1, 4000, snapshot_mode::HOST_HASH, 0),
        pass(1, 1, 1000),
        restore(1, 2000, snapshot_mode::HOST_HASH, 0),
        pass(1, 2, 2000),
        dispatch(1, "_Z5saxpyfPKfPfm"),
        ToolWindow {
            pid: 1,
            tid: 1,
            correlation: 1,
            start_ns: 0,
            end_ns: 20_000,
        }
        .into(),
        dispatch(2, "_Z5saxpyfPKfPfm"),
        snapshot(2, 3 << 20, 7000),
        pass(2, 0, 4000),
        restore(2, 6000, snapshot_mode::HOST_HASH, 1),
        restore(2, 8000, snapshot_mode::FULL, 0),
        decline(
            2,
            "replay stopped: the restore before pass 1 failed in 1 region(s), first 0x7f00",
        ),
        Nondeterministic {
            correlation: 2,
            pass: 0,
            ts_ns: 1,
            region: 0,
            offset: 0,
        }
        .into(),
        dispatch(3, "fill"),
        decline(
            3,
            "snapshot incomplete: device allocation of 16384 bytes for region 0x7f7e8a21e000 failed",
        ),
        dispatch(4, "fill"),
        decline(
            4,
            "snapshot incomplete: device allocation of 8192 bytes for region 0x7f7e8a300000 failed",
        ),
        dispatch(5, "fill"),
    ]
}

fn summarize(recs: &[Record]) -> BTreeMap<String, KernelRow> {
    let mut s = Summary::new();
    for r in recs {
        s.push(0, r);
    }
    s.finish()
}

#[test]
fn rows_aggregate_each_kernels_dispatches_whatever_the_record_order() {
    let rows = summarize(&records());
    let s = &rows["_Z5saxpyfPKfPfm"];
    assert_eq!(
        (
            s.dispatches,
            s.replayed,
            s.left_out,
            s.passes_per_dispatch,
            s.passes
        ),
        (2, 2, 0, Some((1, 3)), 4)
    );
    assert_eq!(s.pass_ns, durations(&[1000, 2000, 3000, 4000]));
    assert_eq!(
        (s.snapshot_ns.clone(), s.snapshot_bytes),
        (durations(&[5000, 7000]), 4 << 20)
    );
    assert_eq!(s.snapshot_bytes_each(), 2 << 20);
    assert_eq!(
        (s.restore_ns.clone(), s.failed_restores),
        (durations(&[2000, 4000, 6000, 8000]), 1)
    );
    assert_eq!(s.nondeterministic, 1);
    assert_eq!(
        s.modes.iter().collect::<Vec<_>>(),
        ["pinned/full", "pinned/host-hash/64K"]
    );
    assert_eq!(
        (
            s.bytes_hashed,
            s.bytes_checked,
            s.bytes_restored,
            s.dirty_chunks,
            s.check_ns
        ),
        (4 << 20, 4 * 8192, 4 * 4096, 4, 400)
    );
    let f = &rows["fill"];
    assert_eq!((f.dispatches, f.replayed, f.left_out), (3, 0, 1));
    // Two sizes and two addresses, one cause.
    let d: Vec<_> = f.declines.values().collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].count, 2);
    assert_eq!(
        d[0].example,
        "snapshot incomplete: device allocation of 16384 bytes for region 0x7f7e8a21e000 failed"
    );
}

#[test]
fn records_of_a_dispatch_that_never_arrived_count_under_a_question_mark() {
    let rows = summarize(&[pass(9, 0, 500), decline(9, "why")]);
    let q = &rows["?"];
    assert_eq!(
        (q.dispatches, q.passes, q.pass_ns.clone()),
        (1, 1, durations(&[500]))
    );
    // Streams are apart: correlation 1 of stream 1 is not stream 0's.
    let mut s = Summary::new();
    s.push(0, &dispatch(1, "a"));
    s.push(1, &pass(1, 0, 700));
    s.push(1, &dispatch(1, "b"));
    let rows = s.finish();
    assert_eq!((rows["a"].passes, rows["b"].passes), (0, 1));
}

#[test]
fn kernel_names_are_demangled_shortened_and_elided_for_the_terminal() {
    assert_eq!(short_name("_Z5saxpyfPKfPfm"), "saxpy");
    assert_eq!(short_name("fill"), "fill");
    // void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>(int, ...)
    let long = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_";
    assert_eq!(short_name(long), "at::native::vectorized_ele…ise_kernel<…>");
    assert_eq!(short_name(long).chars().count(), 40);
    // (anonymous namespace)::k(float*)
    assert_eq!(short_name("_ZN12_GLOBAL__N_11kEPf"), "(anon)::k");
    let rows: BTreeMap<String, KernelRow> = [
        (
            "_Z5saxpyfPKfPfm [pid 4242]".to_string(),
            KernelRow::default(),
        ),
        (format!("{long} [pid 7]"), KernelRow::default()),
    ]
    .into_iter()
    .collect();
    let l = crate::replay::table::labels(&rows);
    assert_eq!(l[0], "saxpy [pid 4242]");
    assert_eq!(l[1], "at::native::vectoriz…e_kernel<…> [pid 7]");
    assert_eq!(l[1].chars().count(), 40);
}

#[test]
fn the_table_shows_passes_per_dispatch_times_per_pass_and_grouped_declines() {
    let rows = summarize(&records());
    let text = render(&rows);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "kernel",
            "dispatches",
            "replayed",
            "passes",
            "min_us",
            "median_us",
            "max_us",
            "time",
            "snapshot_us",
            "snapshot_bytes",
            "restore_us",
            "failed",
            "nondet",
            "declines"
        ]
    );
    assert_eq!(
        lines[1],
        [
            "saxpy",
            "2",
            "2",
            "1-3",
            "1.0",
            "3.0",
            "4.0",
            "host",
            "7.0",
            "2097152",
            "6.0",
            "1",
            "1",
            "1x",
            "replay",
            "stopped:",
            "the",
            "restore",
            "before",
            "pass",
            "1",
            "failed",
            "in",
            "1",
            "region(s),",
            "first",
            "0x7f00"
        ]
    );
    assert_eq!(
        lines[2][..14],
        [
            "fill", "3", "0", "-", "0.0", "0.0", "0.0", "-", "0.0", "0", "0.0", "0", "0", "2x"
        ]
    );
    // The restore table: saxpy only.
    let restore = text
        .lines()
        .skip_while(|l| !l.starts_with("restore "))
        .nth(1)
        .unwrap();
    assert_eq!(
        restore.split_whitespace().collect::<Vec<_>>(),
        [
            "saxpy",
            "pinned/full,pinned/host-hash/64K",
            "4",
            "4194304",
            "32768",
            "16384",
            "4",
            "0.4",
            "5.0"
        ]
    );
}

#[test]
fn the_closing_lines_give_the_time_inside_kreplay_and_what_filters_left_out() {
    let rows = summarize(&records());
    let t = RunTotals {
        wall_ns: 80_000,
        inside_ns: 20_000,
        kernel_filter: Some(regex::Regex::new("^fil").unwrap()),
        max_dispatches: Some(2),
        passes: 3,
    };
    assert_eq!(
        footer(&rows, &t),
        "kreplay: 2 dispatches replayed (4 passes); 0.000 s of the run's 0.000 s inside kreplay (25.0%)\n\
         kreplay: 1 dispatches after the first 2 (--max-dispatches) ran once\n"
    );
    let t = RunTotals {
        kernel_filter: Some(regex::Regex::new("^sax").unwrap()),
        max_dispatches: None,
        ..t
    };
    assert!(
        footer(&rows, &t).ends_with(
            "kreplay: 1 dispatches of 1 kernels not matched by --kernel \"^sax\" ran once\n"
        ),
        "{}",
        footer(&rows, &t)
    );
}

#[test]
fn json_lines_carry_full_names_totals_and_grouped_declines() {
    let rows = summarize(&records());
    let t = RunTotals {
        wall_ns: 80_000,
        inside_ns: 20_000,
        kernel_filter: None,
        max_dispatches: None,
        passes: 3,
    };
    let text = json(&rows, &t);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with(
        "{\"schema\":\"kreplay-replay/1\",\"kind\":\"kernel\",\"kernel\":\"saxpy(float, float const*, float*, unsigned long)\",\"mangled\":\"_Z5saxpyfPKfPfm\",\"dispatches\":2,\"replayed\":2,\"passes\":4,\"passes_per_dispatch\":{\"min\":1,\"max\":3},\"pass_ns\":{\"min\":1000,\"median\":3000,\"max\":4000},\"snapshots\":2,\"snapshot_ns_median\":7000,\"snapshot_bytes\":4194304,\"restores\":4,\"restore_ns_median\":6000,\"failed_restores\":1,\"nondeterministic\":1,\"pass_gpu_ns\":null,"
    ), "{}", lines[0]);
    assert!(lines[1].contains(
        "\"declines\":[{\"cause\":\"snapshot incomplete: device allocation of N bytes for region 0x… failed\",\"count\":2,\"example\":\"snapshot incomplete: device allocation of 16384 bytes for region 0x7f7e8a21e000 failed\"}]}"
    ), "{}", lines[1]);
    assert_eq!(
        lines[2],
        "{\"schema\":\"kreplay-replay/1\",\"kind\":\"run\",\"wall_ns\":80000,\"inside_ns\":20000,\"dispatches\":5,\"replayed\":2}"
    );
}

#[test]
fn the_json_file_holds_the_json_lines_and_no_temporary_file_stays() {
    let rows = summarize(&records());
    let t = RunTotals {
        wall_ns: 80_000,
        inside_ns: 20_000,
        kernel_filter: None,
        max_dispatches: None,
        passes: 3,
    };
    let dir = std::env::temp_dir().join(format!("kreplay-json-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("k.json");
    crate::replay::table::write_json(&path, &rows, &t).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), json(&rows, &t));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn full_restores_of_a_full_snapshot_add_no_second_mode() {
    let full_snapshot = Snapshot {
        correlation: 1,
        start_ns: 0,
        end_ns: 1,
        bytes: 4096,
        regions: 1,
        placement: snapshot_mode::PINNED,
        check: snapshot_mode::FULL,
        chunk_size: 16384,
        bytes_hashed: 0,
        pid: 1,
        tid: 1,
    };
    let rows = summarize(&[
        dispatch(1, "k"),
        full_snapshot.into(),
        restore(1, 10, snapshot_mode::FULL, 0),
    ]);
    assert_eq!(
        rows["k"].modes.iter().collect::<Vec<_>>(),
        ["pinned/full/16K"]
    );
}

#[test]
fn memory_stays_flat_in_passes() {
    // One dispatch of 300k passes (the tool writes its dispatch record last).
    let mut s = Summary::new();
    let n = 300_000u64;
    for i in 0..n {
        s.push(0, &pass(1, i as u32, 10_000 + (i * 7919) % 50_000));
    }
    s.push(0, &dispatch(1, "k"));
    assert_eq!(s.pending.len(), 0);
    let rows = s.finish();
    let k = &rows["k"];
    assert_eq!((k.passes, k.pass_ns.count()), (n, n));
    assert_eq!((k.pass_ns.min(), k.pass_ns.max()), (10_000, 59_999));
    // Values 10_000..60_000 spread evenly: the exact median is 35_000.
    let m = k.pass_ns.median();
    assert!(
        (m as f64 - 35_000.0).abs() <= 35_000.0 * MEDIAN_REL_ERROR,
        "median {m}"
    );
    // 10 µs..60 µs spans 3 doublings: at most 3 × 128 buckets.
    assert!(
        k.pass_ns.heap_entries() <= 3 * 128,
        "{}",
        k.pass_ns.heap_entries()
    );
    assert_eq!(k.passes_per_dispatch, Some((n as u32, n as u32)));
}

#[test]
fn memory_stays_flat_in_dispatches_and_pass_counts_stay_exact() {
    let mut s = Summary::new();
    let n = SETTLED_KEPT as u64 + 10_000;
    for corr in 0..n {
        // The first dispatch (forgotten early) ran 3 passes, the last 1, the rest 2; every
        // tenth dispatch ran none (left out).
        let passes = match corr {
            0 => 3,
            c if c == n - 1 => 1,
            c if c % 10 == 5 => 0,
            _ => 2,
        };
        for p in 0..passes {
            s.push(0, &pass(corr, p, 1000));
        }
        s.push(0, &dispatch(corr, "k"));
        assert!(s.settled.len() <= SETTLED_KEPT);
        assert_eq!(s.settled_order.len(), s.settled.len());
    }
    let rows = s.finish();
    let k = &rows["k"];
    let left_out = (1..n - 1).filter(|c| c % 10 == 5).count() as u64;
    assert_eq!(
        (k.dispatches, k.replayed, k.left_out, k.passes_per_dispatch),
        (n, n - left_out, left_out, Some((1, 3)))
    );
    assert_eq!(k.passes, 2 * (n - left_out) + 1 - 1);
    assert!(!rows.contains_key("?"));
}

#[test]
fn kernels_of_several_processes_get_a_row_each_and_one_process_keeps_plain_names() {
    let mut s = Summary::new();
    s.set_pid(0, 100);
    s.set_pid(1, 200);
    for (source, corr) in [(0, 1), (1, 1), (1, 2)] {
        s.push(source, &dispatch(corr, "saxpy"));
        s.push(source, &pass(corr, 0, 10));
        s.push(source, &pass(corr, 1, 10));
    }
    let rows = s.finish();
    let got: Vec<(&str, u64, u64)> = rows
        .iter()
        .map(|(k, r)| (k.as_str(), r.dispatches, r.passes))
        .collect();
    assert_eq!(got, [("saxpy [pid 100]", 1, 2), ("saxpy [pid 200]", 2, 4)]);
    let mut one = Summary::new();
    one.set_pid(0, 100);
    one.set_pid(1, 100);
    one.push(0, &dispatch(1, "saxpy"));
    one.push(1, &dispatch(1, "saxpy"));
    assert_eq!(one.finish().keys().collect::<Vec<_>>(), ["saxpy"]);
}

#[test]
fn pass_times_are_the_gpus_where_every_pass_was_timed_there_and_the_hosts_otherwise() {
    let recs = [
        // gemm: both dispatches' passes timed on the GPU (12-14 µs there, 30-33 µs on the host).
        timed_pass(1, 0, 30_000, 12_000),
        timed_pass(1, 1, 31_000, 14_000),
        dispatch(1, "gemm"),
        timed_pass(2, 0, 33_000, 13_000),
        dispatch(2, "gemm"),
        // fill: one pass untimed (an event failed): the host's times, and the GPU's in JSON.
        timed_pass(3, 0, 20_000, 5_000),
        timed_pass(3, 1, 21_000, 0),
        dispatch(3, "fill"),
        // copy: no pass timed (a backend without timers).
        timed_pass(4, 0, 9_000, 0),
        dispatch(4, "copy"),
    ];
    let rows = summarize(&recs);
    let text = render(&rows);
    let row = |name: &str| -> Vec<String> {
        let l = text.lines().find(|l| l.starts_with(name)).unwrap();
        l.split_whitespace()
            .skip(4)
            .take(4)
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("gemm"), ["12.0", "13.0", "14.0", "gpu"], "{text}");
    assert_eq!(row("fill"), ["20.0", "21.0", "21.0", "host"], "{text}");
    assert_eq!(row("copy"), ["9.0", "9.0", "9.0", "host"], "{text}");
    let t = RunTotals {
        wall_ns: 1,
        inside_ns: 1,
        kernel_filter: None,
        max_dispatches: None,
        passes: 2,
    };
    let j = json(&rows, &t);
    let line = |name: &str| {
        j.lines()
            .find(|l| l.contains(&format!("\"kernel\":\"{name}\"")))
            .unwrap()
    };
    assert!(
        line("gemm").contains("\"pass_ns\":{\"min\":30000,\"median\":31000,\"max\":33000}"),
        "{j}"
    );
    assert!(
        line("gemm").contains(
            "\"pass_gpu_ns\":{\"passes\":3,\"min\":12000,\"median\":13000,\"max\":14000}"
        ),
        "{j}"
    );
    assert!(
        line("fill")
            .contains("\"pass_gpu_ns\":{\"passes\":1,\"min\":5000,\"median\":5000,\"max\":5000}"),
        "{j}"
    );
    assert!(line("copy").contains("\"pass_gpu_ns\":null"), "{j}");
}
