//! Merge benchmark: 32 probe-like streams of N `ApiCall` records each, generated into a temp
//! directory first (not timed), then, side by side in one run, (a) the k-way merge alone
//! (`MergedStreams`: read, check, decode, reorder, merge) and (b) the whole `kreplay merge`
//! path (`merge::merge`: the same plus rendering to a Perfetto trace file). Events/s and peak
//! RSS (VmHWM, reset before each case through /proc/self/clear_refs) at two stream lengths, so
//! that memory bounded by the number of streams, not their length, shows.
//!
//! The calls are what a traced HIP thread makes: launches (held back for their flows),
//! copies, syncs, and allocations with an HSA allocation nested inside, freed again later
//! with an HSA free nested inside (inner calls written first: the probes write return order).
//!
//! `cargo bench -p kreplay-cli --bench merge`; `KREPLAY_BENCH_EVENTS=100000,1000000` (per
//! stream) picks the sizes, `KREPLAY_BENCH_STREAMS=32` the stream count, `KREPLAY_BENCH_OUT=FILE`
//! also writes the table there, `KREPLAY_BENCH_DIR` is where streams and traces go (default: the
//! temp dir; removed afterwards).

use std::path::{Path, PathBuf};
use std::time::Instant;

use kreplay_cli::merge;
use kreplay_common::api::id_of;
use kreplay_common::stream::{
    ApiCall, MergedStreams, ProcessName, Record, StreamHeader, StreamKind, StreamWriter,
    ThreadName, crc32, crc32_bytewise,
};

/// Reads a `Vm*` line of /proc/self/status in KiB.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so each case reports its own peak.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("cannot reset the peak RSS ({e}); peaks are cumulative");
    }
}

fn env_list(key: &str, default: &[u64]) -> Vec<u64> {
    std::env::var(key)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// The API ids the generated threads call, in a cycle of 9 records.
struct Apis {
    malloc: u16,
    pool_alloc: u16,
    launch: u16,
    copy: u16,
    sync: u16,
    free: u16,
    pool_free: u16,
    memset: u16,
}

/// Writes stream `t` of `n` records: thread `1000 + t` of process 4242.
fn write_stream(path: &Path, t: u32, n: u64, apis: &Apis) {
    let pid = 4242;
    let tid = 1000 + t;
    let mut w = StreamWriter::create(path, &StreamHeader::new(StreamKind::Probes, pid))
        .expect("create stream")
        .with_chunk_threshold(64 * 1024);
    w.push(&Record::ProcessName(ProcessName {
        pid,
        name: "bench".into(),
    }))
    .expect("push");
    w.push(&Record::ThreadName(ThreadName {
        tid,
        name: format!("worker-{t}"),
    }))
    .expect("push");
    let call = |api: u16, enter_ns: u64, exit_ns: u64, size: u64, ptr: u64, out: u64| {
        Record::ApiCall(ApiCall {
            pid,
            tid,
            api,
            enter_ns,
            exit_ns,
            ret: 0,
            args: [ptr, size, 0, 0, 0, 0],
            extra: [0; 5],
            out,
        })
    };
    let mut i = 0u64;
    while i < n {
        // Cycle k covers [base, base + 8 µs); threads are offset by 7 ns each.
        let base = 1_000_000 + (i / 9) * 8_000 + u64::from(t) * 7;
        let buf = 0x7f00_0000_0000 + (i / 9) * 4096;
        let cycle = [
            // pool_allocate returns inside hipMalloc: written first (return order).
            call(apis.pool_alloc, base + 100, base + 300, 4096, 0, buf),
            call(apis.malloc, base, base + 400, 4096, buf, buf),
            call(apis.launch, base + 1_000, base + 1_600, 0, 0, 0),
            call(apis.copy, base + 2_000, base + 2_500, 4096, buf, 0),
            call(apis.sync, base + 3_000, base + 4_000, 0, 0, 0),
            call(apis.memset, base + 4_500, base + 4_800, 4096, buf, 0),
            call(apis.launch, base + 5_000, base + 5_500, 0, 0, 0),
            // pool_free returns inside hipFree: every allocation is freed at both layers, so
            // the live-allocation maps stay small and the memory measured is the merge's.
            call(apis.pool_free, base + 6_100, base + 6_300, 0, buf, 0),
            call(apis.free, base + 6_000, base + 6_400, 0, buf, 0),
        ];
        for rec in cycle.iter().take((n - i).min(9) as usize) {
            w.push(rec).expect("push");
        }
        i += 9;
    }
    w.flush().expect("flush");
}

/// CRC-32 throughput over the generated stream bytes, byte-at-a-time against the stream's
/// `crc32` (crc32fast), interleaved (three rounds each, best kept): (bytes, bytewise s, crc32 s).
fn crc_compare(files: &[PathBuf]) -> (u64, f64, f64) {
    let mut data = Vec::new();
    for f in files {
        if data.len() >= 256 << 20 {
            break;
        }
        data.extend(std::fs::read(f).expect("read stream"));
    }
    let mut best = [f64::MAX; 2];
    let mut sums = [0u32; 2];
    for _ in 0..3 {
        for (i, f) in [crc32_bytewise as fn(&[u8]) -> u32, crc32]
            .iter()
            .enumerate()
        {
            let t0 = Instant::now();
            let c = data.chunks(64 << 10).fold(0u32, |acc, ch| acc ^ f(ch));
            best[i] = best[i].min(t0.elapsed().as_secs_f64());
            sums[i] = std::hint::black_box(c);
        }
    }
    assert_eq!(sums[0], sums[1], "both CRCs agree");
    (data.len() as u64, best[0], best[1])
}

/// One measured case.
struct Row {
    case: &'static str,
    streams: u64,
    per_stream: u64,
    records: u64,
    secs: f64,
    peak_rss_kib: u64,
    start_rss_kib: u64,
    trace_bytes: u64,
}

fn main() {
    let streams = env_list("KREPLAY_BENCH_STREAMS", &[32])[0];
    let sizes = env_list("KREPLAY_BENCH_EVENTS", &[100_000, 1_000_000]);
    let root = std::env::var_os("KREPLAY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("kreplay-merge-bench-{}", std::process::id()));
    let apis = Apis {
        malloc: id_of("hipMalloc").expect("hipMalloc"),
        pool_alloc: id_of("hsa_amd_memory_pool_allocate").expect("pool allocate"),
        launch: id_of("hipLaunchKernel").expect("hipLaunchKernel"),
        copy: id_of("hipMemcpyAsync").expect("hipMemcpyAsync"),
        sync: id_of("hipStreamSynchronize").expect("hipStreamSynchronize"),
        free: id_of("hipFree").expect("hipFree"),
        pool_free: id_of("hsa_amd_memory_pool_free").expect("pool free"),
        memset: id_of("hipMemset").expect("hipMemset"),
    };
    let cases = std::env::var("KREPLAY_BENCH_CASES").unwrap_or_default();
    let want = |c: &str| cases.is_empty() || cases.split(',').any(|x| x == c);
    let mut rows = Vec::new();
    let mut crc: Option<(u64, f64, f64)> = None;
    for &n in &sizes {
        let dir = root.join(format!("{n}"));
        std::fs::create_dir_all(&dir).expect("bench dir");
        let gen_start = Instant::now();
        let files: Vec<PathBuf> = (0..streams as u32)
            .map(|t| {
                let p = dir.join(format!("probes-4242-{}.krs", 1000 + t));
                write_stream(&p, t, n, &apis);
                p
            })
            .collect();
        let input_bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum();
        eprintln!(
            "generated {streams} x {n} records ({:.1} MB) in {:.1} s",
            input_bytes as f64 / 1e6,
            gen_start.elapsed().as_secs_f64()
        );

        if crc.is_none() && want("crc") {
            crc = Some(crc_compare(&files));
        }

        // (a) the k-way merge alone.
        if want("merge") {
            reset_peak_rss();
            let start_rss_kib = status_kib("VmRSS:");
            let t0 = Instant::now();
            let merged = MergedStreams::open(&files).expect("open streams");
            let mut records = 0u64;
            let mut last = 0u64;
            let mut out_of_order = 0u64;
            for m in merged {
                records += 1;
                let ts = m.record.timestamp();
                out_of_order += u64::from(ts < last);
                last = ts;
            }
            let secs = t0.elapsed().as_secs_f64();
            assert_eq!(records, streams * (n + 2), "every record merged");
            assert_eq!(out_of_order, 0, "merged in timestamp order");
            rows.push(Row {
                case: "k-way merge only",
                streams,
                per_stream: n,
                records,
                secs,
                peak_rss_kib: status_kib("VmHWM:"),
                start_rss_kib,
                trace_bytes: 0,
            });
        }

        // (b) merge and render to a trace file.
        if want("trace") {
            let trace = dir.join("bench.pftrace");
            reset_peak_rss();
            let start_rss_kib = status_kib("VmRSS:");
            let t0 = Instant::now();
            let report = merge::merge(&files, &trace).expect("merge");
            let secs = t0.elapsed().as_secs_f64();
            assert_eq!(report.records, streams * (n + 2));
            assert_eq!(report.stats.unrenderable, 0, "every call placed");
            assert_eq!(report.stats.late, 0, "the window restored entry order");
            rows.push(Row {
                case: "merge → trace file",
                streams,
                per_stream: n,
                records: report.records,
                secs,
                peak_rss_kib: status_kib("VmHWM:"),
                start_rss_kib,
                trace_bytes: report.bytes,
            });
        }
        if std::env::var_os("KREPLAY_BENCH_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    if std::env::var_os("KREPLAY_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }

    let mut md = String::new();
    md.push_str(
        "| case | streams × records | records | time (s) | events/s | peak RSS (MiB) | RSS at start (MiB) | trace bytes |\n",
    );
    md.push_str("|---|---|---|---|---|---|---|---|\n");
    for r in &rows {
        md.push_str(&format!(
            "| {} | {} × {} | {} | {:.2} | {:.2} M | {:.1} | {:.1} | {} |\n",
            r.case,
            r.streams,
            r.per_stream,
            r.records,
            r.secs,
            r.records as f64 / r.secs / 1e6,
            r.peak_rss_kib as f64 / 1024.0,
            r.start_rss_kib as f64 / 1024.0,
            r.trace_bytes
        ));
    }
    // Memory flat in stream length: the peak at the longest streams over the shortest.
    for case in ["k-way merge only", "merge → trace file"] {
        let of: Vec<&Row> = rows.iter().filter(|r| r.case == case).collect();
        if let (Some(a), Some(b)) = (of.first(), of.last())
            && a.per_stream != b.per_stream
        {
            md.push_str(&format!(
                "\n{case}: peak RSS at {} records/stream is {:.2}× the peak at {} ({} × longer streams).\n",
                b.per_stream,
                b.peak_rss_kib as f64 / a.peak_rss_kib.max(1) as f64,
                a.per_stream,
                b.per_stream / a.per_stream.max(1)
            ));
        }
    }
    if let (Some(a), Some(b)) = (
        rows.iter().rfind(|r| r.case == "k-way merge only"),
        rows.iter().rfind(|r| r.case == "merge → trace file"),
    ) {
        md.push_str(&format!(
            "\nRendering costs {:.2}× the merge alone at {} records/stream.\n",
            b.secs / a.secs,
            b.per_stream
        ));
    }
    if let Some((bytes, slow, fast)) = crc {
        md.push_str(&format!(
            "\nCRC-32 over {:.1} MB of stream bytes in 64 KiB chunks: byte-at-a-time {:.0} MB/s, \
             `crc32` (crc32fast) {:.0} MB/s ({:.2}× faster).\n",
            bytes as f64 / 1e6,
            bytes as f64 / slow / 1e6,
            bytes as f64 / fast / 1e6,
            slow / fast
        ));
    }
    print!("{md}");
    if let Some(out) = std::env::var_os("KREPLAY_BENCH_OUT") {
        std::fs::write(&out, &md).expect("write KREPLAY_BENCH_OUT");
    }
}
