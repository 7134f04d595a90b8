//! The sample HIP workloads of the simulated ROCm (tests/rocm-sim/workloads): each checks its
//! own results and prints `checksum: <hex>` last. Here every deterministic workload runs twice
//! (once with several kernel workers) and must print identical checksums and the exact
//! expected counts; the racy one must lose updates only when workers race.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kreplay_tests::{make_sim, run_sim_ok, workload};

/// Builds the sim, the workloads and the HSA test tool once per test process.
fn build() -> PathBuf {
    make_sim(&["hsa", "hip", "build/tests/hsa_test_tool.so"])
}

/// One run's `key: value` lines (the checksum line is last, as the contract says).
type Report = BTreeMap<String, String>;

/// Runs build/workloads/<name> with a clean sim environment plus `envs` (120 s limit).
fn run(name: &str, args: &[&str], envs: &[(&str, String)]) -> Report {
    build();
    let stdout = run_sim_ok(&workload(name), args, envs, Duration::from_secs(120));
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.starts_with("checksum: "), "{name}: last line {last:?}");
    let sum = &last["checksum: ".len()..];
    assert!(
        sum.len() == 16 && sum.chars().all(|c| c.is_ascii_hexdigit()),
        "{name}: checksum {sum:?}"
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Runs a workload twice (1 worker, then 4) and returns the first report after checking the
/// checksums match.
fn run_twice(name: &str, args: &[&str]) -> Report {
    let a = run(name, args, &[("KRSIM_WORKERS", "1".into())]);
    let b = run(name, args, &[("KRSIM_WORKERS", "4".into())]);
    assert_eq!(a, b, "{name} is not deterministic");
    a
}

#[test]
fn saxpy_counter_equals_launches() {
    let r = run_twice("saxpy", &["4", "20000", "8"]);
    assert_eq!(r["launches"], "32");
    let r = run_twice("saxpy", &["3", "1000", "5"]);
    assert_eq!(r["launches"], "15");
}

#[test]
fn high_qps_32_threads() {
    let r = run_twice("high_qps", &["32", "40"]);
    assert_eq!(r["launches"], "1280");
}

#[test]
fn graph_launched_repeatedly() {
    let r = run_twice("graph", &["4096", "30"]);
    assert_eq!(r["graph_launches"], "30");
    assert_eq!(r["kernels_per_graph"], "4");
    // Under an HSA tool that turns queues into intercept queues, the same result, and exactly
    // 4 packets per graph launch reach the queues (nothing else in this workload dispatches).
    let build = build();
    let out = build.join("workloads_graph_tool.out");
    let _ = std::fs::remove_file(&out);
    let t = run(
        "graph",
        &["4096", "30"],
        &[
            (
                "HSA_TOOLS_LIB",
                build.join("tests/hsa_test_tool.so").display().to_string(),
            ),
            ("KRSIM_TEST_TOOL_OUT", out.display().to_string()),
        ],
    );
    assert_eq!(t["checksum"], r["checksum"]);
    let report = std::fs::read_to_string(&out).expect("tool report");
    assert!(report.contains("packets=120 "), "{report}");
}

#[test]
fn malloc_async_traffic() {
    let iters = 150u64;
    let r = run_twice("malloc_async", &[&iters.to_string()]);
    assert_eq!(r["async_allocs"], iters.to_string());
    let bytes: u64 = (0..iters).map(|it| (512 * (1 + it % 7) + it % 5) * 8).sum();
    assert_eq!(r["async_bytes"], bytes.to_string());
}

#[test]
fn churn_leaks_known_bytes() {
    let r = run_twice("churn", &["1000", "10"]);
    assert_eq!(r["allocations"], "1000");
    let leaked: u64 = (0..1000u64)
        .filter(|i| i % 10 == 9)
        .map(|i| 1024 * (1 + i % 5))
        .sum();
    assert_eq!(r["leaked"], leaked.to_string());
    assert_eq!(leaked, 100 * 5 * 1024); // i = 9, 19, ...: always 1 + i % 5 = 5 KiB
    // 57 allocations, every 4th leaked: i = 3, 7, ..., 55 (14 of them).
    let r = run_twice("churn", &["57", "4"]);
    let leaked: u64 = (3..57u64).step_by(4).map(|i| 1024 * (1 + i % 5)).sum();
    assert_eq!(r["leaked"], leaked.to_string());
}

#[test]
fn footprint_writes_a_known_fraction() {
    // 256 MiB over 32 buffers of 8 MiB; one word in every 64th page; two rounds.
    let r = run_twice("footprint", &["268435456", "8388608", "64", "2"]);
    assert_eq!(r["footprint"], "268435456");
    assert_eq!(r["kernels"], "64");
    assert_eq!(r["written_bytes"], (32 * (2048 / 64) * 8).to_string());
}

#[test]
fn racy_kernel_races_only_with_several_workers() {
    let exact = run("racy", &["256", "64"], &[("KRSIM_WORKERS", "1".into())]);
    assert_eq!(exact["expected"], "16384");
    assert_eq!(exact["counter"], "16384");
    let counts: Vec<u64> = (0..8)
        .map(|_| {
            let r = run("racy", &["256", "64"], &[("KRSIM_WORKERS", "4".into())]);
            r["counter"].parse().expect("counter")
        })
        .collect();
    assert!(counts.iter().all(|c| (1..=16384).contains(c)), "{counts:?}");
    assert!(
        counts.iter().any(|c| *c < 16384),
        "no lost update in 8 racy runs: {counts:?}"
    );
}
