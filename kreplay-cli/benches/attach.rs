//! Attach benchmark: `kreplay trace -p PID --gpu` on a running CUDA program (tests/cuda-sim's
//! driver and stand-in CUPTI, its `loop` program fed a round every 2 ms by a thread here):
//! the time from starting `kreplay` to the first GPU record the tool wrote (the earliest
//! kernel start in its stream), how long the target's thread was held (the `dlopen` and the
//! entry call together, as kreplay prints it), and how long kreplay took to say the timeline
//! was on. A fresh target per round; the tool is loaded fresh each time.
//!
//! `cargo bench -p kreplay-cli --bench attach` (as root; `kreplay` from `KREPLAY_BIN` or
//! `target/debug`; `cargo xtask bench` sets `KREPLAY_BIN` to the release build). Variables: `KREPLAY_BENCH_ROUNDS=10`, `KREPLAY_BENCH_OUT=FILE`.
use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kreplay_common::stream::{Record, StreamReader, monotonic_ns};
use kreplay_tests::{cuda_sim, kreplay_bin, scratch};

/// One attach: (ms to the first GPU record, ms the thread was held, ms until "timeline on").
fn round(dir: &Path, i: usize) -> (f64, f64, f64) {
    let sim = cuda_sim("bench-attach");
    let mut app = Command::new(&sim.linked)
        .arg("loop")
        .env("LD_LIBRARY_PATH", &sim.dir)
        .env_remove("CUDA_INJECTION64_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the loop program");
    let pid = app.id();
    let mut stdin = app.stdin.take().unwrap();
    let mut out = BufReader::new(app.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if stdin.write_all(b"go\n").is_err() {
                    break;
                }
                let mut l = String::new();
                if out.read_line(&mut l).unwrap_or(0) == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let trace = dir.join(format!("attach-{i}.pftrace"));
    let streams = dir.join(format!("attach-{i}.pftrace.streams"));
    let _ = std::fs::remove_dir_all(&streams);
    let t0 = monotonic_ns();
    let k = Command::new(kreplay_bin())
        .args([
            "trace",
            "--gpu",
            "--keep-streams",
            "--no-summary",
            "--duration",
            "1s",
        ])
        .arg("-o")
        .arg(&trace)
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .expect("run kreplay");
    let stderr = String::from_utf8_lossy(&k.stderr);
    assert!(k.status.success(), "{stderr}");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    app.wait().unwrap();
    let field = |after: &str, until: &str| -> f64 {
        let s = stderr.split(after).nth(1).expect(after);
        s[..s.find(until).unwrap()].trim().parse().unwrap()
    };
    let held = field("its thread held ", " ms");
    let ready = field("ready after ", " ms");
    let first = StreamReader::open(&streams.join(format!("tool-{pid}.krs")))
        .expect("the tool's stream")
        .filter_map(|r| match r {
            Record::Dispatch(d) => Some(d.start_ns),
            _ => None,
        })
        .min()
        .expect("a GPU record");
    let _ = std::fs::remove_dir_all(&streams);
    let _ = std::fs::remove_file(&trace);
    ((first - t0) as f64 / 1e6, held, ready)
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the attach bench needs root (ptrace and BPF)");
        return;
    }
    let rounds: usize = std::env::var("KREPLAY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let dir = scratch("bench-attach");
    let bin = kreplay_bin();
    let mut cols: [Vec<f64>; 3] = Default::default();
    for i in 0..rounds {
        let (a, b, c) = round(&dir, i);
        cols[0].push(a);
        cols[1].push(b);
        cols[2].push(c);
    }
    for c in &mut cols {
        c.sort_by(f64::total_cmp);
    }
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let mut out = format!(
        "`kreplay trace -p PID --gpu --duration 1s` (`{}`) on `tests/cuda-sim/app.c loop` (three \
         worker threads, a round every 2 ms), the stand-in CUPTI, a fresh target per round, \
         {rounds} rounds. *first GPU record*: from starting `kreplay` to the earliest kernel \
         start in the tool's stream; *held*: the target's thread held for the `dlopen` and the \
         entry call; *timeline on*: from kreplay's start of the attach to the tool's `ready`. \
         Milliseconds.\n\n\
         | | median | p90 | max |\n|---|---:|---:|---:|\n",
        bin.display()
    );
    for (name, v) in [
        ("first GPU record", &cols[0]),
        ("held", &cols[1]),
        ("timeline on", &cols[2]),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {:.1} | {:.1} |",
            at(v, 0.5),
            at(v, 0.9),
            v[v.len() - 1]
        );
    }
    print!("{out}");
    if let Ok(path) = std::env::var(kreplay_common::replay_config::BENCH_OUT) {
        std::fs::write(&path, &out).expect("write the results");
    }
}
