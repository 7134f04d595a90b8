//! The seed's correctness harness: 32 threads x 5000 rows x 3 rounds per mode, clearing
//! between rounds, with identical totals and correlations in both modes, plus the
//! flag-transition scenarios. Exits non-zero on any mismatch.
//!
//! `cargo bench -p kreplay-tool --bench stress [-- --threads T --rows N --rounds R]`;
//! `KREPLAY_BENCH_OUT=file.json` saves the results. Current results: `docs/bench/stress.md`
//! (`cargo xtask bench --only stress --name stress` rewrites it).

mod support;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use kreplay_tool::record::{Recorder, RecorderConfig, RecorderStats};
use support::{Json, Report, api_call, arg, machine, write_results};

struct Shape {
    threads: u64,
    rows: u64,
    rounds: u64,
}

/// Every thread records `rows` rows and as many correlations: external id
/// `thread << 32 | i`, correlation `i * 7 + thread`.
fn round(rec: &Recorder, shape: &Shape) {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..shape.threads)
            .map(|t| {
                s.spawn(move || {
                    for i in 0..shape.rows {
                        rec.record(api_call(t, i));
                        rec.record_correlation(t << 32 | i, i * 7 + t);
                    }
                })
            })
            .collect();
        // Join explicitly: that waits for the threads' thread-local destructors too (the
        // scope's own wait does not), so every buffer is marked exited before the merge.
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// Collects failures instead of panicking, so every check is reported.
#[derive(Default)]
struct Checks {
    failures: Vec<String>,
}

impl Checks {
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.failures
                .push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
}

/// How many merged correlations map external id to the expected correlation.
fn matching_correlations(rec: &Recorder) -> (usize, BTreeMap<u64, u64>) {
    let (_, corrs) = rec.take_merged();
    let mut map = BTreeMap::new();
    let mut ok = 0;
    for c in corrs {
        let (t, i) = (c.external_id >> 32, c.external_id & 0xffff_ffff);
        if c.correlation == i * 7 + t {
            ok += 1;
        }
        map.insert(c.external_id, c.correlation);
    }
    (ok, map)
}

/// Runs the rounds of one mode; returns the last round's correlation map.
fn mode(
    per_thread: bool,
    shape: &Shape,
    checks: &mut Checks,
    report: &mut Report,
) -> (BTreeMap<u64, u64>, Json) {
    let rec = Recorder::new(RecorderConfig {
        per_thread,
        ..RecorderConfig::default()
    });
    let expected = (shape.threads * shape.rows) as usize;
    let label = if per_thread { "flag on " } else { "flag off" };
    let mut last = BTreeMap::new();
    let mut lines = Vec::new();
    for r in 0..shape.rounds {
        round(&rec, shape);
        rec.merge();
        let first = rec.stats();
        checks.eq(
            &format!("[{label}] round {r}: second merge moves"),
            rec.merge(),
            0,
        );
        checks.eq(
            &format!("[{label}] round {r}: stats after second merge"),
            rec.stats(),
            first.clone(),
        );
        let s = first;
        checks.eq(&format!("[{label}] round {r}: rows"), s.rows, expected);
        let per_thread_total = s.per_thread_rows;
        if per_thread {
            checks.eq(
                &format!("[{label}] round {r}: thread buffers"),
                s.registrations,
                shape.threads,
            );
            checks.eq(
                &format!("[{label}] round {r}: per-thread rows"),
                per_thread_total,
                expected as u64,
            );
            checks.eq(
                &format!("[{label}] round {r}: shared appends"),
                s.shared_appends,
                0,
            );
        } else {
            checks.eq(
                &format!("[{label}] round {r}: thread buffers"),
                s.registrations,
                0,
            );
            checks.eq(
                &format!("[{label}] round {r}: per-thread rows"),
                per_thread_total,
                0,
            );
            checks.eq(
                &format!("[{label}] round {r}: shared appends"),
                s.shared_appends,
                2 * expected as u64,
            );
        }
        let (ok, map) = matching_correlations(&rec);
        checks.eq(
            &format!("[{label}] round {r}: correlations"),
            (ok, map.len()),
            (expected, expected),
        );
        let line = format!(
            "[{label}] round {r}: rows {}, thread buffers {:2}, correlations {ok}/{expected}, \
             per-thread rows {:6}, shared appends {:6}",
            s.rows, s.registrations, per_thread_total, s.shared_appends
        );
        report.line(&line);
        lines.push(Json::Str(line));
        rec.clear();
        checks.eq(
            &format!("[{label}] round {r}: stats after clear"),
            rec.stats(),
            RecorderStats::default(),
        );
        last = map;
    }
    (last, Json::Arr(lines))
}

/// Flag on for one round, off for the next without a merge between, then on again.
fn transition(shape: &Shape, checks: &mut Checks) -> String {
    let rec = Recorder::new(RecorderConfig::default());
    let n = shape.threads * shape.rows;
    round(&rec, shape);
    rec.set_per_thread(false);
    round(&rec, shape);
    rec.merge();
    let s = rec.stats();
    checks.eq("[transition] on->off: rows", s.rows as u64, 2 * n);
    checks.eq(
        "[transition] on->off: per-thread rows",
        s.per_thread_rows,
        n,
    );
    checks.eq(
        "[transition] on->off: shared appends",
        s.shared_appends,
        2 * n,
    );
    let (ok, _) = matching_correlations(&rec);
    checks.eq("[transition] on->off: correlations", ok as u64, 2 * n);
    rec.clear();
    rec.set_per_thread(true);
    round(&rec, shape);
    rec.merge();
    let s2 = rec.stats();
    checks.eq("[transition] off->on: rows", s2.rows as u64, n);
    checks.eq("[transition] off->on: shared appends", s2.shared_appends, 0);
    // Flip the flag continuously while every thread records.
    rec.clear();
    let done = AtomicBool::new(false);
    let flips = std::thread::scope(|s| {
        let (rec, done) = (&rec, &done);
        let flipper = s.spawn(move || {
            let mut flips = 0u64;
            while !done.load(Ordering::Acquire) {
                rec.set_per_thread(flips.is_multiple_of(2));
                rec.merge();
                flips += 1;
                std::thread::yield_now();
            }
            flips
        });
        round(rec, shape);
        done.store(true, Ordering::Release);
        flipper.join().unwrap()
    });
    rec.merge();
    let s3 = rec.stats();
    checks.eq("[transition] flipping: rows", s3.rows as u64, n);
    checks.eq(
        "[transition] flipping: correlations",
        s3.correlations as u64,
        n,
    );
    let (ok, _) = matching_correlations(&rec);
    checks.eq("[transition] flipping: matching correlations", ok as u64, n);
    format!(
        "[transition] on->off rows {}, off->on rows {}, flipping ({flips} flips) rows {} \
         (per-thread {} + shared {}), correlations {ok}/{n}",
        s.rows,
        s2.rows,
        s3.rows,
        s3.per_thread_rows,
        s3.rows as u64 - s3.per_thread_rows
    )
}

fn main() -> ExitCode {
    let num = |flag: &str, default: u64| arg(flag).and_then(|v| v.parse().ok()).unwrap_or(default);
    let shape = Shape {
        threads: num("--threads", 32),
        rows: num("--rows", 5000),
        rounds: num("--rounds", 3),
    };
    let mut report = Report::default();
    report.line(format!(
        "## Recorder stress: {} threads x {} rows x {} rounds per mode\n",
        shape.threads, shape.rows, shape.rounds
    ));
    report.line(format!("machine: {}\n", machine()));
    let mut checks = Checks::default();
    let (off, off_lines) = mode(false, &shape, &mut checks, &mut report);
    let (on, on_lines) = mode(true, &shape, &mut checks, &mut report);
    checks.eq("correlations identical in both modes", on == off, true);
    let transition_line = transition(&shape, &mut checks);
    report.line(&transition_line);
    let pass = checks.failures.is_empty();
    for f in &checks.failures {
        eprintln!("MISMATCH {f}");
    }
    report.line(format!(
        "\nstress harness: {}",
        if pass {
            "PASS, both modes, plus the flag-transition scenarios"
        } else {
            "FAIL"
        }
    ));
    write_results(
        &report,
        &Json::Obj(vec![
            ("bench", Json::Str("stress".into())),
            ("machine", Json::Str(machine())),
            ("threads", Json::Num(shape.threads as f64)),
            ("rows", Json::Num(shape.rows as f64)),
            ("rounds", Json::Num(shape.rounds as f64)),
            ("flag_off", off_lines),
            ("flag_on", on_lines),
            ("transition", Json::Str(transition_line)),
            ("pass", Json::Bool(pass)),
            (
                "failures",
                Json::Arr(checks.failures.iter().cloned().map(Json::Str).collect()),
            ),
        ]),
    );
    if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
