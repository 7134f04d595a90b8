//! Injection benchmark: how long `kreplay_cli::inject::load` holds the thread it makes call
//! `dlopen` (the pause the target sees on that thread; its other threads run on), and the
//! whole `load` (the `/proc` and symbol-table reads before the attach too).
//!
//! Target: `tests/inject/inject_target.c`, three threads computing checksums, its main thread
//! either blocked in `read(0)` or computing too (`spin`). Libraries: the tests' marker library
//! (a constructor writing one line) and `target/release/libkreplay_tool.so` when built (its
//! constructors only). A fresh target per round; it is killed after the injection.
//!
//! `cargo bench -p kreplay-cli --bench inject` (as root). Variables: `KREPLAY_BENCH_ROUNDS=20`,
//! `KREPLAY_BENCH_OUT=FILE` (also write the table there).
use std::{
    fmt::Write as _,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use kreplay_cli::inject;
use kreplay_tests::{cc, scratch, target_dir, workspace_root};

fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let src = workspace_root().join("tests").join("inject");
    let exe = dir.join("inject_target");
    let lib = dir.join("libkrinject.so");
    let marker = format!("-DMARKER=\"{}\"", dir.join("marker").display());
    let target_c = src.join("inject_target.c");
    let lib_c = src.join("marker_lib.c");
    cc(&[
        "-O2",
        "-pthread",
        "-o",
        exe.to_str().unwrap(),
        target_c.to_str().unwrap(),
    ]);
    cc(&[
        "-O2",
        "-shared",
        "-fPIC",
        &marker,
        "-o",
        lib.to_str().unwrap(),
        lib_c.to_str().unwrap(),
    ]);
    (exe, lib)
}

/// One injection into a fresh target: (pause, its stop wait, its call, whole load).
fn round(exe: &Path, lib: &Path, spin: bool) -> [Duration; 4] {
    let mut args = vec!["30000000000"];
    if spin {
        args.push("spin");
    }
    let mut child = Command::new(exe)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the target");
    let pid = child.id() as i32;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !spin {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .unwrap()
            .starts_with("0 ")
        {
            assert!(Instant::now() < deadline, "target never blocked in read");
            std::thread::sleep(Duration::from_millis(1));
        }
    } else {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let loaded = inject::load(pid, lib).expect("inject");
    let total = t.elapsed();
    assert_ne!(loaded.handle, 0);
    child.kill().unwrap();
    child.wait().unwrap();
    [loaded.pause, loaded.stop_wait, loaded.call, total]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the inject bench needs root (ptrace of its targets)");
        return;
    }
    let rounds: usize = std::env::var("KREPLAY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = scratch("bench-inject");
    let (exe, marker_lib) = build(&dir);
    let kb = |p: &Path| std::fs::metadata(p).map(|m| m.len() / 1024).unwrap_or(0);
    let mut libs = vec![(
        format!("marker library ({} KB)", kb(&marker_lib)),
        marker_lib,
    )];
    let tool = target_dir().join("release").join("libkreplay_tool.so");
    if tool.exists() {
        libs.push((format!("release kreplay-tool ({} KB)", kb(&tool)), tool));
    }
    let mut out = format!(
        "`inject::load` into `tests/inject/inject_target.c` (three threads computing, the main \
         thread as the table says), a fresh target per round, {rounds} rounds per row. *pause*: \
         from `PTRACE_INTERRUPT` to the detach, the time the main thread is held, and of it *stop* \
         (until the thread stopped) and *call* (the `dlopen` call, until it returned); *load*: \
         the whole call, `/proc` and ELF reads included. Milliseconds; p90 and max of the pause, \
         medians otherwise.\n\n\
         | library | main thread | pause | p90 | max | stop | call | load |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n"
    );
    for (name, lib) in &libs {
        for spin in [false, true] {
            let mut cols: [Vec<f64>; 4] = Default::default();
            for _ in 0..rounds {
                for (col, d) in cols.iter_mut().zip(round(&exe, lib, spin)) {
                    col.push(ms(d));
                }
            }
            for col in &mut cols {
                col.sort_by(f64::total_cmp);
            }
            let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
            let [pause, stop, call, total] = &cols;
            let _ = writeln!(
                out,
                "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                if spin { "computing" } else { "blocked in read" },
                at(pause, 0.5),
                at(pause, 0.9),
                pause[pause.len() - 1],
                at(stop, 0.5),
                at(call, 0.5),
                at(total, 0.5),
            );
        }
    }
    print!("{out}");
    if let Ok(path) = std::env::var(kreplay_common::replay_config::BENCH_OUT) {
        std::fs::write(&path, &out).expect("write the results");
    }
}
