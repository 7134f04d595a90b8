//! Merge benchmark: `kreplay merge` of this tree against a base commit's, side by side in one
//! run, and the peak memory of `kreplay replay` (the CLI process) as passes and dispatches grow.
//!
//! 1. Merge: N probe-like streams of M `ApiCall` records each ([`generate`]), written first
//!    (not timed). For each stream length, the k-way merge alone in this process
//!    (`MergedStreams`: read, check, decode, reorder, merge), then `kreplay merge` to a trace
//!    file by the base binary and by this tree's, alternately, `KREPLAY_BENCH_ROUNDS` times
//!    each. Events/s by wall clock and by CPU time (user + system, from `wait4`), the best
//!    round of each; peak RSS (`ru_maxrss`); and whether both traces have the same bytes.
//!    These streams are format version 3, which the base reads; then this tree's binary alone
//!    on the same records in version-4 streams (`ApiCall` packed, as its `kreplay trace`
//!    writes them), whose trace must have the same bytes.
//! 2. Replay: `kreplay replay --max-dispatches 1 --passes P` of the simulated runtime's
//!    `saxpy` (one small buffer, two launches) for each P, and `--passes 2` over D launches,
//!    by both binaries: the peak RSS of the `kreplay` process itself (not the application's;
//!    [`process::run`] says how).
//!
//! `cargo bench -p kreplay-cli --bench merge`. Variables: `KREPLAY_BENCH_EVENTS=100000,1000000`
//! (records per stream), `KREPLAY_BENCH_STREAMS=16`, `KREPLAY_BENCH_ROUNDS=3`,
//! `KREPLAY_BENCH_PASSES=10000,100000,1000000`, `KREPLAY_BENCH_DISPATCHES=10000,100000`,
//! `KREPLAY_BENCH_BASE=COMMIT` (default [`BASE`]; built once under `target/bench-base/`),
//! `KREPLAY_BENCH_CASES=merge,replay` (which parts), `KREPLAY_BENCH_OUT=FILE` (also write the
//! tables there), `KREPLAY_BENCH_DIR` (where streams and traces go; default the temp dir),
//! `KREPLAY_BENCH_KEEP=1` (keep them, e.g. to profile `kreplay merge` on them),
//! `KREPLAY_BENCH_VERBOSE=1` (print each measured command and its stderr).

#[path = "merge/generate.rs"]
mod generate;
#[path = "merge/process.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kreplay_common::stream::{FORMAT_VERSION, MergedStreams};

/// The commit before the merge was made faster: what `kreplay merge` is compared against.
const BASE: &str = "d16a5101f7d115006e9c95b2ca8389489e7eb019";

fn env_list(key: &str, default: &[u64]) -> Vec<u64> {
    std::env::var(key)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// Reads a `Vm*` line of /proc/self/status in KiB.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so the in-process case reports its own peak.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("cannot reset the peak RSS ({e}); peaks are cumulative");
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The best (smallest) and the median of `v`.
fn best_median(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[0], s[s.len() / 2])
}

/// Merge rows for one stream length.
fn merge_case(md: &mut String, dir: &Path, bins: &[(&str, PathBuf)], streams: u64, n: u64) {
    let rounds = env_list("KREPLAY_BENCH_ROUNDS", &[3])[0].max(1) as usize;
    std::fs::create_dir_all(dir).expect("bench dir");
    let t0 = Instant::now();
    let files = generate::streams(dir, streams, n, generate::BASE_VERSION);
    let records = streams * (n + 2);
    let input: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    eprintln!(
        "generated {streams} x {n} records ({:.1} MB) in {:.1} s",
        input as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );

    // The k-way merge alone, in this process (this tree's code).
    reset_peak_rss();
    let t0 = Instant::now();
    let mut count = 0u64;
    let mut last = 0u64;
    for m in MergedStreams::open(&files).expect("open streams") {
        count += 1;
        let ts = m.record.timestamp();
        assert!(ts >= last, "merged in timestamp order");
        last = ts;
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(count, records, "every record merged");
    md.push_str(&format!(
        "| {streams} × {n} | k-way merge only (this tree, in process) | {:.2} M | — | {:.1} | — |\n",
        records as f64 / secs / 1e6,
        mib(status_kib("VmHWM:")),
    ));

    // `kreplay merge`, base and this tree alternately.
    let mut costs: Vec<Vec<process::Cost>> = vec![Vec::new(); bins.len()];
    let traces: Vec<PathBuf> = bins
        .iter()
        .map(|(label, _)| dir.join(format!("{label}.pftrace")))
        .collect();
    for _ in 0..rounds {
        for (i, (_, bin)) in bins.iter().enumerate() {
            let mut cmd = Command::new(bin);
            cmd.arg("merge").arg("-o").arg(&traces[i]).args(&files);
            costs[i].push(process::run(&mut cmd, false));
        }
    }
    let same = traces.windows(2).all(|w| process::same_bytes(&w[0], &w[1]));
    let bytes = std::fs::metadata(&traces[0]).map_or(0, |m| m.len());
    let mut rates = Vec::new();
    for ((label, _), c) in bins.iter().zip(&costs) {
        let (wall, wall_med) = best_median(&c.iter().map(|c| c.wall).collect::<Vec<_>>());
        let (cpu, cpu_med) = best_median(&c.iter().map(|c| c.cpu).collect::<Vec<_>>());
        let peak = c.iter().map(|c| c.peak_kib).max().unwrap_or(0);
        rates.push((records as f64 / wall, records as f64 / cpu));
        md.push_str(&format!(
            "| {streams} × {n} | `kreplay merge` → trace file, {label} | {:.2} M (median {:.2} M) | {:.2} M (median {:.2} M) | {:.1} | {bytes} |\n",
            records as f64 / wall / 1e6,
            records as f64 / wall_med / 1e6,
            records as f64 / cpu / 1e6,
            records as f64 / cpu_med / 1e6,
            mib(peak),
        ));
    }
    if let [(bw, bc), (nw, nc)] = rates[..] {
        md.push_str(&format!(
            "| {streams} × {n} | **this tree / base** | **{:.2}×** | **{:.2}×** | | traces {} |\n",
            nw / bw,
            nc / bc,
            if same { "byte-identical" } else { "DIFFER" }
        ));
    }
    packed_case(
        md,
        dir,
        bins,
        (streams, n, input),
        &traces[traces.len() - 1],
    );
    if std::env::var_os("KREPLAY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// This tree's `kreplay merge` of the same records in packed streams (format version 4, what
/// its `kreplay trace` writes): the row, and whether the trace has the bytes of `same_as` (the
/// trace of the version-3 streams, `v3_bytes` of them).
fn packed_case(
    md: &mut String,
    dir: &Path,
    bins: &[(&str, PathBuf)],
    (streams, n, v3_bytes): (u64, u64, u64),
    same_as: &Path,
) {
    let rounds = env_list("KREPLAY_BENCH_ROUNDS", &[3])[0].max(1) as usize;
    let dir = dir.join("packed");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let files = generate::streams(&dir, streams, n, FORMAT_VERSION);
    let input: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let records = streams * (n + 2);
    let (label, bin) = &bins[bins.len() - 1];
    let trace = dir.join("packed.pftrace");
    let costs: Vec<process::Cost> = (0..rounds)
        .map(|_| {
            let mut cmd = Command::new(bin);
            cmd.arg("merge").arg("-o").arg(&trace).args(&files);
            process::run(&mut cmd, false)
        })
        .collect();
    let (wall, wall_med) = best_median(&costs.iter().map(|c| c.wall).collect::<Vec<_>>());
    let (cpu, cpu_med) = best_median(&costs.iter().map(|c| c.cpu).collect::<Vec<_>>());
    let peak = costs.iter().map(|c| c.peak_kib).max().unwrap_or(0);
    md.push_str(&format!(
        "| {streams} × {n} | `kreplay merge` → trace file, {label}, packed streams ({:.1} MB, not {:.1}) | {:.2} M (median {:.2} M) | {:.2} M (median {:.2} M) | {:.1} | {} |\n",
        input as f64 / 1e6,
        v3_bytes as f64 / 1e6,
        records as f64 / wall / 1e6,
        records as f64 / wall_med / 1e6,
        records as f64 / cpu / 1e6,
        records as f64 / cpu_med / 1e6,
        mib(peak),
        if process::same_bytes(&trace, same_as) {
            "byte-identical to the above"
        } else {
            "DIFFERS from the above"
        }
    ));
}

/// Peak RSS of `kreplay replay` of `saxpy ARGS` with `opts`, per binary.
fn replay_case(
    md: &mut String,
    dir: &Path,
    bins: &[(&str, PathBuf)],
    case: &str,
    opts: &[String],
    args: &[&str],
    passes: u64,
) {
    std::fs::create_dir_all(dir).expect("bench dir");
    let saxpy = kreplay_tests::workload("saxpy");
    let mut cells = Vec::new();
    for (label, bin) in bins {
        let trace = dir.join(format!("replay-{label}.pftrace"));
        let mut cmd = Command::new(bin);
        cmd.arg("replay")
            .args(opts)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(&saxpy)
            .args(args);
        let c = process::run(&mut cmd, true);
        // `kreplay: 1 dispatches replayed (N passes); ...`: a replay may stop early (the
        // table says so), but most passes must have run for the figure to mean anything.
        let ran: u64 = c
            .stdout
            .split_once(" dispatches replayed (")
            .and_then(|(_, rest)| rest.split_once(" passes)"))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0);
        assert!(
            ran * 10 >= passes * 9,
            "{label} replayed {ran} of {passes} passes:\n{}",
            c.stdout
        );
        eprintln!(
            "replay {case} {label}: {ran} passes, {:.1} s, {:.1} MiB",
            c.wall,
            mib(c.peak_kib)
        );
        cells.push(format!(
            "{:.1} MiB ({ran} passes, {:.1} s)",
            mib(c.peak_kib),
            c.wall
        ));
    }
    md.push_str(&format!("| {case} | {} |\n", cells.join(" | ")));
    if std::env::var_os("KREPLAY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn main() {
    let cases = std::env::var("KREPLAY_BENCH_CASES").unwrap_or_default();
    let want = |c: &str| cases.is_empty() || cases.split(',').any(|x| x == c);
    let streams = env_list("KREPLAY_BENCH_STREAMS", &[16])[0];
    let sizes = env_list("KREPLAY_BENCH_EVENTS", &[100_000, 1_000_000]);
    let root = std::env::var_os("KREPLAY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("kreplay-merge-bench-{}", std::process::id()));
    let base_commit = std::env::var("KREPLAY_BENCH_BASE").unwrap_or_else(|_| BASE.into());
    let bins = [
        ("base", process::base(&base_commit)),
        ("this tree", process::current()),
    ];
    let mut md = format!(
        "Base: {base_commit}. Both binaries are release builds run as their own processes, \
         alternately.\n\n"
    );
    if want("merge") {
        md.push_str(
            "| streams × records | case | events/s by wall clock (best) | events/s by CPU time (best) | peak RSS (MiB) | trace bytes |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for &n in &sizes {
            merge_case(&mut md, &root.join(format!("merge-{n}")), &bins, streams, n);
        }
        md.push('\n');
    }
    if want("replay") {
        md.push_str(&format!(
            "`kreplay replay` peak RSS of the CLI process (passes the table counted, and the \
             wall time, in brackets):\n\n\
             | case | {} | {} |\n|---|---:|---:|\n",
            bins[0].0, bins[1].0
        ));
        for p in env_list("KREPLAY_BENCH_PASSES", &[10_000, 100_000, 1_000_000]) {
            let opts = [
                "--max-dispatches".into(),
                "1".into(),
                "--passes".into(),
                p.to_string(),
            ];
            let case = format!("`--passes {p} --max-dispatches 1` (saxpy 1 1024 2)");
            replay_case(
                &mut md,
                &root.join("replay"),
                &bins,
                &case,
                &opts,
                &["1", "1024", "2"],
                p,
            );
        }
        for d in env_list("KREPLAY_BENCH_DISPATCHES", &[10_000, 100_000]) {
            let opts = ["--passes".into(), "2".into()];
            let case = format!("`--passes 2`, {d} dispatches (saxpy 1 1024 {d})");
            let iters = d.to_string();
            replay_case(
                &mut md,
                &root.join("replay"),
                &bins,
                &case,
                &opts,
                &["1", "1024", &iters],
                2 * d,
            );
        }
        md.push('\n');
    }
    if std::env::var_os("KREPLAY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    print!("{md}");
    if let Some(out) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        std::fs::write(&out, &md).expect("write KREPLAY_BENCH_OUT");
    }
}
