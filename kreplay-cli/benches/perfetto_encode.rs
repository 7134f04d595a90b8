//! Perfetto encoding benchmark: slices with two debug annotations each, encoded by
//! `TraceWriter` (hand-encoded hot path) and, side by side in the same run, by the prost-derive
//! route (a `TracePacket` struct per packet), to a sink and to a file, at two trace lengths so
//! that flat memory shows. Peak RSS is the kernel's VmHWM, reset before each case through
//! /proc/self/clear_refs. Each case runs `KREPLAY_BENCH_REPEAT` times (default 3); the table
//! shows the fastest run (the dev machine is shared) and the highest peak RSS of all runs.
//!
//! `cargo bench -p kreplay-cli --bench perfetto_encode`; `KREPLAY_BENCH_EVENTS=1000000,10000000`
//! picks the sizes, `KREPLAY_BENCH_CASES=writer,checked,prost,file` the cases, `KREPLAY_BENCH_OUT=FILE` also writes the table there, `KREPLAY_BENCH_DIR`
//! is where the file cases write (default: the temp dir; the files are removed).
//!
//! Current results: `docs/bench/perfetto-encode.md` (`cargo xtask bench --only perfetto_encode
//! --name perfetto-encode` rewrites it).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use kreplay_cli::perfetto::proto::{
    AnnotationNameField, AnnotationValue, DebugAnnotation, EventNameField, EventType, InternedData,
    InternedString, PacketData, TracePacket, TrackEvent,
};
use kreplay_cli::perfetto::{Annotation, EventArgs, TraceWriter, TrackKey, Value, WriterOptions};
use prost::Message as _;

/// Thread tracks the slices rotate over.
const TRACKS: i32 = 16;
/// Distinct slice names.
const NAMES: [&str; 8] = [
    "hipMalloc",
    "hipFree",
    "hipLaunchKernel",
    "hipMemcpyAsync",
    "hipStreamSynchronize",
    "hsa_amd_memory_pool_allocate",
    "cuLaunchKernel",
    "cuMemAlloc_v2",
];

/// One measured case.
struct Row {
    encoder: &'static str,
    target: &'static str,
    events: u64,
    secs: f64,
    bytes: u64,
    peak_rss_kib: u64,
    start_rss_kib: u64,
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

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so each case reports its own peak.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("cannot reset the peak RSS ({e}); peaks are cumulative");
    }
}

/// Counts bytes and discards them.
struct CountingSink(u64);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Timestamps of slice `i`: begin and end, 1 µs apart, 500 ns long.
fn span(i: u64) -> (u64, u64) {
    (1_000_000 + i * 1_000, 1_000_000 + i * 1_000 + 500)
}

/// Encodes `n` slices with `TraceWriter`; returns the bytes written.
fn writer_case<W: Write>(out: W, n: u64, check: bool) -> (W, u64) {
    let opts = WriterOptions {
        check_nesting: check,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::with_options(out, opts);
    let seq = w.default_sequence();
    w.process_track(1000, "bench").expect("process track");
    let tracks: Vec<_> = (0..TRACKS)
        .map(|t| {
            w.thread_track(1000, 1000 + t, "worker")
                .expect("thread track")
        })
        .collect();
    let names: Vec<_> = NAMES.iter().map(|n| w.event_name(n)).collect();
    let (size, ptr) = (w.annotation_name("size"), w.annotation_name("ptr"));
    for i in 0..n {
        let (begin, end) = span(i);
        let annotations = [
            Annotation {
                name: size,
                value: Value::Uint(i * 64),
            },
            Annotation {
                name: ptr,
                value: Value::Pointer(0x7f00_0000_0000 + i * 4096),
            },
        ];
        let args = EventArgs {
            annotations: &annotations,
            ..EventArgs::default()
        };
        let track = tracks[(i % TRACKS as u64) as usize];
        let name = names[(i % NAMES.len() as u64) as usize];
        w.slice(seq, track, name, begin, end, &args).expect("slice");
    }
    let bytes = w.bytes();
    let out = w.finish().expect("finish");
    (out, bytes)
}

/// The prost-derive route for the same packets: one `TracePacket` struct per packet, encoded
/// into a reused buffer and written in 256 KiB chunks.
fn prost_case<W: Write>(mut out: W, n: u64) -> (W, u64) {
    let mut buf = Vec::with_capacity(256 * 1024 + 4096);
    let mut bytes = 0u64;
    let mut defined = [false; NAMES.len()];
    // The same track uuids as the writer's thread tracks, so the bytes compare.
    let uuids: Vec<u64> = (0..TRACKS)
        .map(|t| {
            TrackKey::Thread {
                pid: 1000,
                tid: 1000 + t,
            }
            .uuid()
        })
        .collect();
    let track_uuid = |i: u64| uuids[(i % TRACKS as u64) as usize];
    let mut emit = |packet: TracePacket, buf: &mut Vec<u8>, out: &mut W| {
        buf.push(0x0a);
        packet.encode_length_delimited(buf).expect("encode");
        if buf.len() >= 256 * 1024 {
            out.write_all(buf).expect("write");
            bytes += buf.len() as u64;
            buf.clear();
        }
    };
    for i in 0..n {
        let (begin, end) = span(i);
        let name = (i % NAMES.len() as u64) as usize;
        let mut interned = None;
        if !defined[name] {
            defined[name] = true;
            interned = Some(InternedData {
                event_names: vec![InternedString {
                    iid: Some(name as u64 + 1),
                    name: Some(NAMES[name].to_owned()),
                }],
                debug_annotation_names: Vec::new(),
            });
        }
        let annotation = |iid: u64, value| DebugAnnotation {
            name_field: Some(AnnotationNameField::NameIid(iid)),
            value: Some(value),
        };
        let begin_packet = TracePacket {
            timestamp: Some(begin),
            trusted_packet_sequence_id: Some(1),
            sequence_flags: Some(2),
            interned_data: interned,
            data: Some(PacketData::TrackEvent(TrackEvent {
                r#type: Some(EventType::TypeSliceBegin as i32),
                track_uuid: Some(track_uuid(i)),
                name_field: Some(EventNameField::NameIid(name as u64 + 1)),
                debug_annotations: vec![
                    annotation(1, AnnotationValue::UintValue(i * 64)),
                    annotation(
                        2,
                        AnnotationValue::PointerValue(0x7f00_0000_0000 + i * 4096),
                    ),
                ],
                ..Default::default()
            })),
            ..Default::default()
        };
        emit(begin_packet, &mut buf, &mut out);
        let end_packet = TracePacket {
            timestamp: Some(end),
            trusted_packet_sequence_id: Some(1),
            sequence_flags: Some(2),
            data: Some(PacketData::TrackEvent(TrackEvent {
                r#type: Some(EventType::TypeSliceEnd as i32),
                track_uuid: Some(track_uuid(i)),
                ..Default::default()
            })),
            ..Default::default()
        };
        emit(end_packet, &mut buf, &mut out);
    }
    out.write_all(&buf).expect("write");
    bytes += buf.len() as u64;
    (out, bytes)
}

/// Runs one case, measuring time and peak RSS.
fn measure(encoder: &'static str, target: &'static str, n: u64, run: impl Fn() -> u64) -> Row {
    let repeat: u32 = std::env::var("KREPLAY_BENCH_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut best: Option<Row> = None;
    for _ in 0..repeat {
        reset_peak_rss();
        let start_rss_kib = status_kib("VmRSS:");
        let started = Instant::now();
        let bytes = run();
        let secs = started.elapsed().as_secs_f64();
        let peak_rss_kib = status_kib("VmHWM:");
        eprintln!(
            "{encoder:>24} {target:>5} {n:>9} slices: {:.2} M slices/s, peak RSS {} KiB",
            n as f64 / secs / 1e6,
            peak_rss_kib
        );
        let worst_peak = best.as_ref().map_or(0, |b| b.peak_rss_kib);
        if best.as_ref().is_none_or(|b| secs < b.secs) {
            best = Some(Row {
                encoder,
                target,
                events: n,
                secs,
                bytes,
                peak_rss_kib,
                start_rss_kib,
            });
        }
        if let Some(b) = best.as_mut() {
            b.peak_rss_kib = b.peak_rss_kib.max(worst_peak).max(peak_rss_kib);
        }
    }
    best.expect("at least one run")
}

fn file_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("kreplay-bench-{}-{n}.pftrace", std::process::id()))
}

fn main() {
    let sizes: Vec<u64> = std::env::var("KREPLAY_BENCH_EVENTS")
        .unwrap_or_else(|_| "1000000,10000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let dir = std::env::var_os("KREPLAY_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let cases =
        std::env::var("KREPLAY_BENCH_CASES").unwrap_or_else(|_| "writer,checked,prost,file".into());
    let want = |case: &str| cases.split(',').any(|c| c.trim() == case);
    let mut rows = Vec::new();
    for &n in &sizes {
        if want("writer") {
            rows.push(measure("TraceWriter", "sink", n, || {
                writer_case(CountingSink(0), n, false).1
            }));
        }
        if want("checked") {
            rows.push(measure("TraceWriter (checks on)", "sink", n, || {
                writer_case(CountingSink(0), n, true).1
            }));
        }
        if want("prost") {
            rows.push(measure("prost derive", "sink", n, || {
                prost_case(CountingSink(0), n).1
            }));
        }
        if want("file") {
            let path = file_path(&dir, n);
            rows.push(measure("TraceWriter", "file", n, || {
                let file = File::create(&path).expect("create the bench file");
                writer_case(file, n, false).1
            }));
            let _ = std::fs::remove_file(&path);
        }
    }
    let table = render(&rows);
    println!("{table}");
    if let Some(path) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        let header = format!(
            "## Perfetto encoding ({}, {} cores, {})\n\n",
            cpu_model(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            utc_date()
        );
        std::fs::write(&path, header + &table).expect("write KREPLAY_BENCH_OUT");
    }
}

/// The results as a markdown table with the ratio to the prost-derive route.
fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| encoder | target | slices | M slices/s | M packets/s | vs prost derive | bytes/slice | \
         peak RSS MiB | RSS at start MiB |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let rate = r.events as f64 / r.secs;
        let prost = rows
            .iter()
            .find(|p| p.encoder == "prost derive" && p.events == r.events)
            .map_or(f64::NAN, |p| p.events as f64 / p.secs);
        out += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2}× | {:.1} | {:.1} | {:.1} |\n",
            r.encoder,
            r.target,
            r.events,
            rate / 1e6,
            2.0 * rate / 1e6,
            rate / prost,
            r.bytes as f64 / r.events as f64,
            r.peak_rss_kib as f64 / 1024.0,
            r.start_rss_kib as f64 / 1024.0,
        );
    }
    out
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn utc_date() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}
