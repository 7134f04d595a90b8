//! One ring buffer per CPU: a thread's records go to the ring of the CPU it runs on, and a
//! thread that moves between CPUs still gets its slices in order.
use std::process::Command;

use kreplay_common::stream::{Record, StreamReader};
use kreplay_tests::{build_callloop, build_hip_program, decode_trace, kreplay_bin, require_root};

use super::{assert_valid, counts, events_dropped, out_path, thread_tracks};

/// Whether CPUs 0 and 1 are both online (these tests pin threads to them).
fn two_cpus() -> bool {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let ok = online.trim().starts_with("0-") || online.trim().starts_with("0,1");
    if !ok {
        eprintln!(
            "SKIPPED: needs CPUs 0 and 1 online (online: {})",
            online.trim()
        );
    }
    ok
}

/// The summary's `rings: ... records per ring: A B ...` counts.
fn per_ring(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("rings: "))
        .and_then(|l| l.split("records per ring: ").nth(1))
        .unwrap_or_else(|| panic!("no rings line: {stderr}"))
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn a_thread_pinned_to_a_cpu_fills_that_cpus_ring() {
    require_root!();
    if !two_cpus() {
        return;
    }
    let exe = build_callloop();
    for cpu in [0usize, 1] {
        let out = out_path(&format!("ring-cpu{cpu}"));
        let o = Command::new(kreplay_bin())
            .args(["trace", "-q", "-o", out.to_str().unwrap(), "--"])
            .arg(&exe)
            .args(["1", "2000"])
            .env("KREPLAY_BENCH_CPU", cpu.to_string())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        let rings = per_ring(&stderr);
        // The worker's 2000 calls (pinned) and the main thread's warm-up (hipMalloc and
        // hipFree with their HSA calls, 4 records, on whichever CPU), plus one more record.
        assert_eq!(rings.iter().sum::<u64>(), 2005, "{rings:?}");
        assert!(rings[cpu] >= 2001, "CPU {cpu}'s ring: {rings:?}");
        assert_eq!(events_dropped(&stderr), 0);
    }
}

#[test]
fn a_thread_moving_between_cpus_keeps_its_slices_in_order() {
    require_root!();
    if !two_cpus() {
        return;
    }
    let exe = build_hip_program(
        &kreplay_tests::workspace_root().join("tests/trace/hopper.c"),
        "hopper",
    );
    let out = out_path("hopper");
    let streams = out.with_file_name("hopper.pftrace.streams");
    let _ = std::fs::remove_dir_all(&streams);
    let o = Command::new(kreplay_bin())
        .args([
            "trace",
            "-q",
            "--keep-streams",
            "-o",
            out.to_str().unwrap(),
            "--",
        ])
        .arg(&exe)
        .args(["4000", "50"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let rings = per_ring(&stderr);
    // 40 turns of 50 calls on each CPU.
    assert!(rings[0] >= 2000 && rings[1] >= 2000, "{rings:?}");
    assert_eq!(events_dropped(&stderr), 0);
    // The thread's stream holds its calls in the order they returned, though they were read
    // from two rings (the trace's merge would hide some disorder: it reorders within a window).
    let mut exits = vec![];
    for f in std::fs::read_dir(&streams).unwrap().flatten() {
        for r in StreamReader::open(&f.path()).unwrap() {
            if let Record::ApiCall(c) = r {
                exits.push(c.exit_ns);
            }
        }
    }
    // 4000 hipStreamSynchronize and the hsa_queue_create the first one makes.
    assert_eq!(exits.len(), 4001);
    assert!(
        exits.windows(2).all(|w| w[0] <= w[1]),
        "calls out of return order in the thread's stream"
    );
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let uuid = &threads[0].0;
    assert_eq!(counts(&d, uuid).get("hipStreamSynchronize"), Some(&4000));
    // One thread's calls follow each other: each outermost slice starts after the one before
    // ended (the first call's HIP start-up nests HSA calls inside it, at depth 1).
    let slices: Vec<&serde_json::Value> = d["slices"][uuid]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["depth"] == 0)
        .collect();
    assert_eq!(slices.len(), 4000);
    for w in slices.windows(2) {
        let end = w[0]["ts"].as_u64().unwrap() + w[0]["dur"].as_u64().unwrap();
        assert!(
            w[1]["ts"].as_u64().unwrap() >= end,
            "slice {} starts before {} ends",
            w[1],
            w[0]
        );
    }
}

#[test]
fn debug_probes_says_why_each_record_was_lost_and_says_nothing_otherwise() {
    require_root!();
    let exe = build_callloop();
    let run = |debug: bool| {
        let out = out_path(&format!("debug-probes-{debug}"));
        let mut args = vec![
            "trace",
            "--ringbuf-bytes",
            "4096",
            "-o",
            out.to_str().unwrap(),
        ];
        if debug {
            args.push("--debug-probes");
        }
        // Four threads of idle hipStreamSynchronize calls fill a 4 KiB ring whatever the
        // host's speed.
        let o = Command::new(kreplay_bin())
            .args(&args)
            .arg("--")
            .arg(&exe)
            .args(["4", "200000"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{stderr}");
        stderr
    };
    let quiet = run(false);
    assert!(events_dropped(&quiet) > 0, "{quiet}");
    assert!(!quiet.contains("kreplay: probe:"), "{quiet}");
    let said = run(true);
    let dropped = events_dropped(&said);
    let full: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("kreplay: probe: hipStreamSynchronize tid "))
        .filter(|l| l.ends_with(": ring buffer full, record dropped"))
        .collect();
    // Each message is one drop, named by its API; the messages' own ring may lose some when
    // drops come faster than kreplay reads them, never more than there were drops.
    assert!(dropped > 0, "{said}");
    assert!(!full.is_empty(), "no message for {dropped} drops: {said}");
    assert!(full.len() as u64 <= dropped, "{} > {dropped}", full.len());
}
