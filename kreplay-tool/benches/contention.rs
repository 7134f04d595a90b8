//! The seed's contention benchmark: T threads each append N ApiCall rows, through the
//! shared-mutex baseline and through per-thread buffers, side by side in one run, with a
//! plain per-thread `Vec` as the floor.
//!
//! `cargo bench -p kreplay-tool --bench contention [-- --records N --threads 1,2,4 --runs R]`
//! (`--only per-thread,log` times only the named columns, for profiling); the built binary also
//! runs on its own. `KREPLAY_BENCH_OUT=file.json` saves the results. Current results:
//! `docs/bench/contention.md` (dev VM) and `docs/gpu/h200-contention.md` (16 cores).

mod support;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use kreplay_tool::record::block_log::BlockLog;
use kreplay_tool::record::{Recorder, RecorderConfig};
use support::{
    Json, Report, api_call, arg, cores, load_average, machine, thread_cpu_ns, write_results,
};

/// One measured pass.
#[derive(Clone, Copy)]
struct Pass {
    /// From the common start until the last thread finished.
    wall: Duration,
    /// CPU time the recording threads used, summed.
    cpu_ns: u64,
}

/// Times `threads` threads appending `records` rows each, from a common start.
///
/// Each thread first appends the same rows once, unmeasured, and the recorder is cleared:
/// the measured pass then runs in the steady state a long-running tool reaches, with the
/// destination memory already faulted in (per-thread blocks are recycled, the shared
/// vector keeps its capacity), so what differs between the modes is the recording path.
fn run(per_thread: bool, threads: usize, records: u64) -> Pass {
    let rec = Recorder::new(RecorderConfig {
        per_thread,
        per_thread_cap: records as usize,
        shared_cap: threads * records as usize,
        flush_threshold: usize::MAX,
    });
    let sync = Barrier::new(threads + 1);
    let done = Barrier::new(threads);
    let pass = |rec: &Recorder, t: usize| {
        for i in 0..records {
            rec.record(api_call(t as u64, i));
        }
    };
    let measured = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (rec, sync, done, pass) = (&rec, &sync, &done, &pass);
                s.spawn(move || {
                    pass(rec, t); // warm-up
                    sync.wait(); // main clears
                    sync.wait(); // measured start
                    let span = measure(|| pass(rec, t));
                    // Exit (and free the thread's stack) only once every pass is over, as
                    // the floor and log columns do (`on_threads`).
                    done.wait();
                    span
                })
            })
            .collect();
        sync.wait();
        // Only `clear`: a merge here would pour the warm-up's rows (29 MB at 200k rows) into
        // the merged list just before the measured pass, and the pass would then pay for
        // evicting those dirty lines, a cost of this benchmark's one huge batch (the tool
        // flushes every few thousand rows), not of recording.
        rec.clear();
        sync.wait();
        combine(workers.into_iter().map(|w| w.join().unwrap()))
    });
    let moved = rec.merge() as u64;
    let stats = rec.stats();
    let all = threads as u64 * records;
    assert_eq!(stats.rows as u64, all, "rows lost");
    assert_eq!(stats.dropped, 0);
    assert_eq!(moved, if per_thread { all } else { 0 });
    measured
}

/// Runs `body(thread index, start, finished)` on `threads` threads; each calls `start()` once
/// its warm-up is done (all start together), `finished()` right after its measured pass (it
/// returns once every thread's pass is over, so that no thread's checks and teardown run
/// beside another's pass), and returns its measured span.
fn on_threads(threads: usize, body: impl Fn(usize, &dyn Fn(), &dyn Fn()) -> Span + Sync) -> Pass {
    let sync = Barrier::new(threads + 1);
    let done = Barrier::new(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (sync, done, body) = (&sync, &done, &body);
                s.spawn(move || {
                    let start = || {
                        sync.wait();
                    };
                    let finished = || {
                        done.wait();
                    };
                    body(t, &start, &finished)
                })
            })
            .collect();
        sync.wait();
        combine(workers.into_iter().map(|w| w.join().unwrap()))
    })
}

/// The floor: each thread pushes the same rows into its own plain `Vec` (capacity reserved
/// and warmed), with no recorder at all — what appending the row costs on this machine.
fn run_floor(threads: usize, records: u64) -> Pass {
    on_threads(threads, |t, start, finished| {
        let mut rows = Vec::with_capacity(records as usize);
        let pass = |rows: &mut Vec<_>| {
            for i in 0..records {
                rows.push(api_call(t as u64, i));
            }
        };
        pass(&mut rows); // warm-up
        rows.clear();
        start();
        let span = measure(|| pass(&mut rows));
        finished();
        assert_eq!(std::hint::black_box(&rows).len() as u64, records);
        span
    })
}

/// The per-thread path without the recorder: each thread pushes into a `BlockLog` of its
/// own (warmed, drained, so its blocks are recycled). Against the floor it prices the log's
/// blocks; against the per-thread recorder, the lookup of the thread's buffer.
fn run_log(threads: usize, records: u64) -> Pass {
    on_threads(threads, |t, start, finished| {
        let log = BlockLog::new(records as usize);
        let pass = |log: &BlockLog<_>| {
            for i in 0..records {
                // SAFETY: this thread owns `log` and is its only pusher.
                unsafe { log.push(api_call(t as u64, i)) };
            }
        };
        pass(&log); // warm-up
        assert_eq!(log.drain(|r| drop(std::hint::black_box(r))) as u64, records);
        start();
        let span = measure(|| pass(&log));
        finished();
        assert_eq!(log.drain(|r| drop(std::hint::black_box(r))) as u64, records);
        span
    })
}

/// One thread's measured pass.
struct Span {
    start: Instant,
    end: Instant,
    cpu_ns: u64,
}

/// Runs `pass` on this thread, timing it on the wall clock and in thread CPU time.
fn measure(pass: impl FnOnce()) -> Span {
    let (start, cpu) = (Instant::now(), thread_cpu_ns());
    pass();
    let cpu_ns = thread_cpu_ns() - cpu;
    Span {
        start,
        end: Instant::now(),
        cpu_ns,
    }
}

/// From the first thread's start to the last one's end (taken by the threads themselves,
/// so a late-scheduled main thread cannot shorten it), and the CPU time of all.
fn combine(spans: impl Iterator<Item = Span>) -> Pass {
    let spans: Vec<Span> = spans.collect();
    let start = spans
        .iter()
        .map(|s| s.start)
        .min()
        .expect("at least one thread");
    let end = spans
        .iter()
        .map(|s| s.end)
        .max()
        .expect("at least one thread");
    Pass {
        wall: end - start,
        cpu_ns: spans.iter().map(|s| s.cpu_ns).sum(),
    }
}

/// The pass of median wall time, if any.
fn median(mut passes: Vec<Pass>) -> Option<Pass> {
    passes.sort_by_key(|p| p.wall);
    passes.get(passes.len() / 2).copied()
}

/// The columns, in the order each round times them.
const COLUMNS: [&str; 4] = ["mutex", "per-thread", "floor", "log"];

/// Times every column (or only those in the comma-separated `only`) at `threads` threads,
/// `runs` rounds; each round times each column once, so that a change in the machine's load
/// shows in all columns alike rather than in one. Every pass runs in a fresh process (this
/// binary with `--pass`): in one process a pass is slowed or sped up by what the pass before
/// it left in the caches and the allocator (docs/bench/contention.md, "How the benchmark
/// measures"). Round `r` starts at column `r % 4` all the same. Returns each
/// column's median pass.
fn time_columns(
    threads: usize,
    records: u64,
    runs: usize,
    only: Option<&str>,
) -> [Option<Pass>; 4] {
    let mut passes: [Vec<Pass>; 4] = Default::default();
    for round in 0..runs {
        for column in (0..COLUMNS.len()).map(|c| (c + round) % COLUMNS.len()) {
            let name = COLUMNS[column];
            if only.is_some_and(|o| !o.split(',').any(|o| o == name)) {
                continue;
            }
            passes[column].push(pass_in_child(name, threads, records));
        }
    }
    passes.map(median)
}

/// Runs one pass of `column` in a fresh process and reads back its timing.
fn pass_in_child(column: &str, threads: usize, records: u64) -> Pass {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let out = std::process::Command::new(&exe)
        .args(["--pass", column, "--pass-threads"])
        .arg(threads.to_string())
        .arg("--records")
        .arg(records.to_string())
        .output()
        .unwrap_or_else(|e| panic!("starting {} --pass {column}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "--pass {column} --pass-threads {threads} failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nums: Vec<u64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pass "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match nums[..] {
        [wall_ns, cpu_ns] => Pass {
            wall: Duration::from_nanos(wall_ns),
            cpu_ns,
        },
        _ => panic!("no 'pass WALL_NS CPU_NS' line from --pass {column}: {stdout}"),
    }
}

/// `--pass COLUMN --pass-threads T`: times one pass here and prints `pass WALL_NS CPU_NS`.
fn run_one_pass(column: &str, threads: usize, records: u64) {
    let pass = match column {
        "mutex" => run(false, threads, records),
        "per-thread" => run(true, threads, records),
        "floor" => run_floor(threads, records),
        "log" => run_log(threads, records),
        other => panic!("--pass {other}: not one of {COLUMNS:?}"),
    };
    println!("pass {} {}", pass.wall.as_nanos(), pass.cpu_ns);
}

fn main() {
    let records: u64 = arg("--records")
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let runs: usize = arg("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let threads: Vec<usize> = arg("--threads")
        .map(|v| v.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 3, 4, 8, 16, 32]);
    if let Some(column) = arg("--pass") {
        let threads = arg("--pass-threads")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        run_one_pass(&column, threads, records);
        return;
    }
    let only = arg("--only");
    let cores = cores();
    let mut report = Report::default();
    report.line("## Recorder contention: shared mutex vs per-thread buffers\n");
    report.line(format!(
        "machine: {}; load average at start: {}",
        machine(),
        load_average()
    ));
    report.line(format!(
        "{records} ApiCall rows per thread, median of {runs} rounds (each round times every \
         column once, round r starting at column r mod 4), each pass in a fresh process after \
         a warm-up pass\n"
    ));
    report.line(
        "ns/op = wall time / all rows of all threads: the seed's measure (its per-thread path \
         gives 18.6 ns/op at 1 thread and 9.9 at 2, so its time is divided by every thread's \
         rows). thread ns/record = wall time / one thread's rows: what one thread waits per row, \
         stricter once threads outnumber cores. CPU ns/record = the threads' CPU time / all rows. \
         floor = each thread pushing into its own plain Vec, no recorder (the cost of writing \
         the row on this machine); log = each thread pushing into its own BlockLog, no recorder \
         (the per-thread path less the lookup of the thread's buffer).\n",
    );
    report.line(
        "| threads | mutex ns/op | per-thread ns/op | speedup | mutex thread ns/record | \
         per-thread thread ns/record | per-thread CPU ns/record | floor ns/op | floor thread \
         ns/record | floor CPU ns/record | log ns/op |",
    );
    report.line("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for &t in &threads {
        let [mutex, local, floor, log] = time_columns(t, records, runs, only.as_deref());
        let wall =
            |p: Option<Pass>| p.map_or(f64::NAN, |p| p.wall.as_nanos() as f64 / records as f64);
        let op = |p: Option<Pass>| wall(p) / t as f64;
        let cpu =
            |p: Option<Pass>| p.map_or(f64::NAN, |p| p.cpu_ns as f64 / (t as u64 * records) as f64);
        let speedup = wall(mutex) / wall(local);
        // A column left out with `--only` reads "—".
        let c = |v: f64| {
            if v.is_finite() {
                format!("{v:.1}")
            } else {
                "—".to_string()
            }
        };
        report.line(format!(
            "| {t} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c(op(mutex)),
            c(op(local)),
            if speedup.is_finite() {
                format!("{speedup:.1}x")
            } else {
                "—".to_string()
            },
            c(wall(mutex)),
            c(wall(local)),
            c(cpu(local)),
            c(op(floor)),
            c(wall(floor)),
            c(cpu(floor)),
            c(op(log))
        ));
        rows.push(Json::Obj(vec![
            ("threads", Json::Num(t as f64)),
            ("mutex_ns_per_op", Json::Num(op(mutex))),
            ("per_thread_ns_per_op", Json::Num(op(local))),
            ("mutex_ns_per_record", Json::Num(wall(mutex))),
            ("per_thread_ns_per_record", Json::Num(wall(local))),
            ("speedup", Json::Num(speedup)),
            ("mutex_cpu_ns_per_record", Json::Num(cpu(mutex))),
            ("per_thread_cpu_ns_per_record", Json::Num(cpu(local))),
            ("floor_ns_per_op", Json::Num(op(floor))),
            ("floor_ns_per_record", Json::Num(wall(floor))),
            ("floor_cpu_ns_per_record", Json::Num(cpu(floor))),
            ("log_ns_per_op", Json::Num(op(log))),
        ]));
    }
    report.line(format!("\nload average at end: {}", load_average()));
    write_results(
        &report,
        &Json::Obj(vec![
            ("bench", Json::Str("contention".into())),
            ("machine", Json::Str(machine())),
            ("cores", Json::Num(cores as f64)),
            ("load_average_at_end", Json::Str(load_average())),
            ("records_per_thread", Json::Num(records as f64)),
            ("runs", Json::Num(runs as f64)),
            ("results", Json::Arr(rows)),
        ]),
    );
}
