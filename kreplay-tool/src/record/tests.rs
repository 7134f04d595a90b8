//! The seed's verified properties of per-thread recording, with exact counts.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;

use kreplay_common::stream::{ApiCall, Record, StreamReader};

use super::block_log::BLOCK_LEN;
use super::*;

fn config(per_thread: bool) -> RecorderConfig {
    RecorderConfig {
        per_thread,
        ..RecorderConfig::default()
    }
}

fn row(thread: u64, i: u64) -> Record {
    ApiCall {
        pid: 1,
        tid: current_tid(),
        api: 7,
        enter_ns: i * 100 + thread,
        exit_ns: i * 100 + thread + 50,
        ret: i,
        args: [thread, i, 0, 0, 0, 0],
        extra: [0; 5],
        out: 0,
    }
    .into()
}

/// `threads` threads each record `rows` rows and `rows` correlations (external id
/// `thread * 1_000_000 + i`, correlation `i`), then exit.
fn run_round(rec: &Recorder, threads: u64, rows: u64) {
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    for i in 0..rows {
                        rec.record(row(t, i));
                        rec.record_correlation(t * 1_000_000 + i, i);
                    }
                })
            })
            .collect();
        // An explicit join waits for the threads' thread-local destructors too (the scope's
        // implicit wait does not), so their buffers are marked exited on return.
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Counts of (external id, correlation) pairs among the merged correlations.
fn correlation_multiset(rec: &Recorder) -> BTreeMap<(u64, u64), u32> {
    let (_, corrs) = rec.take_merged();
    let mut m = BTreeMap::new();
    for c in corrs {
        *m.entry((c.external_id, c.correlation)).or_insert(0) += 1;
    }
    m
}

#[test]
fn merging_is_idempotent() {
    let rec = Recorder::new(config(true));
    run_round(&rec, 4, 1000);
    assert_eq!(rec.merge(), 8000);
    assert_eq!(rec.merge(), 0);
    let s = rec.stats();
    assert_eq!((s.rows, s.correlations), (4000, 4000));
    assert_eq!((s.per_thread_rows, s.per_thread_correlations), (4000, 4000));
}

#[test]
fn clearing_zeroes_rows_correlations_and_thread_buffers() {
    for per_thread in [true, false] {
        let rec = Recorder::new(config(per_thread));
        run_round(&rec, 3, 700);
        rec.merge();
        run_round(&rec, 2, 300); // left unmerged in thread buffers
        rec.clear();
        assert_eq!(
            rec.stats(),
            RecorderStats::default(),
            "per_thread={per_thread}"
        );
        assert_eq!(rec.merge(), 0);
        assert_eq!(rec.take_merged(), (vec![], vec![]));
    }
}

#[test]
fn clearing_a_live_threads_buffer_discards_its_rows_and_it_registers_again() {
    let rec = Recorder::new(config(true));
    let gate = Barrier::new(2);
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..300 {
                rec.record(row(0, i));
            }
            gate.wait(); // main clears
            gate.wait();
            for i in 0..5 {
                rec.record(row(0, i));
            }
        });
        gate.wait();
        assert_eq!(rec.stats().thread_buffers, 1);
        rec.clear();
        assert_eq!(rec.stats().thread_buffers, 0);
        gate.wait();
    });
    assert_eq!(rec.stats().registrations, 1);
    assert_eq!(rec.merge(), 5);
}

#[test]
fn with_the_flag_off_the_per_thread_machinery_is_never_touched() {
    let rec = Recorder::new(config(false));
    run_round(&rec, 8, 500);
    rec.merge();
    let s = rec.stats();
    assert_eq!((s.registrations, s.thread_buffers), (0, 0));
    assert_eq!((s.per_thread_rows, s.per_thread_correlations), (0, 0));
    assert_eq!(s.shared_appends, 8000);
    assert_eq!((s.rows, s.correlations), (4000, 4000));
}

#[test]
fn with_the_flag_on_the_shared_list_is_never_appended_to() {
    let rec = Recorder::new(config(true));
    run_round(&rec, 8, 500);
    let before = rec.stats();
    assert_eq!(
        (before.registrations, before.rows, before.shared_appends),
        (8, 0, 0)
    );
    rec.merge();
    let s = rec.stats();
    assert_eq!(s.shared_appends, 0);
    assert_eq!((s.per_thread_rows, s.per_thread_correlations), (4000, 4000));
    assert_eq!((s.rows, s.correlations), (4000, 4000));
}

#[test]
fn correlations_merge_to_identical_totals_in_both_modes() {
    let on = Recorder::new(config(true));
    let off = Recorder::new(config(false));
    run_round(&on, 6, 800);
    run_round(&off, 6, 800);
    on.merge();
    off.merge();
    let (a, b) = (correlation_multiset(&on), correlation_multiset(&off));
    assert_eq!(a.len(), 4800);
    assert!(a.values().all(|&n| n == 1));
    assert_eq!(a, b);
}

#[test]
fn rows_of_threads_that_exited_before_the_merge_are_kept_and_their_buffers_freed() {
    let rec = Recorder::new(config(true));
    run_round(&rec, 5, 1234); // every thread has exited when this returns
    assert_eq!(rec.stats().thread_buffers, 5);
    assert_eq!(rec.merge(), 2 * 5 * 1234);
    assert_eq!(rec.stats().thread_buffers, 0);
    let (rows, _) = rec.take_merged();
    // Each thread's rows arrive complete and in its own order.
    let mut per_thread: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in rows {
        let Record::ApiCall(c) = r else {
            panic!("{r:?}")
        };
        per_thread.entry(c.args[0]).or_default().push(c.ret);
    }
    assert_eq!(per_thread.len(), 5);
    assert!(
        per_thread
            .values()
            .all(|v| *v == (0..1234).collect::<Vec<_>>())
    );
}

#[test]
fn a_flag_change_between_rounds_is_safe() {
    let rec = Recorder::new(config(true));
    run_round(&rec, 4, 600); // on, not merged yet
    rec.set_per_thread(false);
    run_round(&rec, 4, 400); // off
    assert_eq!(rec.merge(), 2 * 4 * 600);
    let s = rec.stats();
    assert_eq!((s.rows, s.correlations), (4000, 4000));
    assert_eq!(s.shared_appends, 2 * 4 * 400);
    rec.set_per_thread(true);
    run_round(&rec, 2, 100);
    rec.merge();
    assert_eq!(rec.stats().rows, 4200);
}

#[test]
fn flipping_the_flag_while_threads_record_loses_nothing() {
    // A cap above the row count: a starved merger must not turn into drops here.
    let rec = Recorder::new(RecorderConfig {
        per_thread_cap: 30_000,
        ..config(true)
    });
    thread::scope(|s| {
        s.spawn(|| {
            for k in 0..200 {
                rec.set_per_thread(k % 2 == 0);
                rec.merge();
                thread::yield_now();
            }
        });
        run_round(&rec, 4, 20_000);
    });
    rec.merge();
    let s = rec.stats();
    assert_eq!((s.rows, s.correlations), (80_000, 80_000), "{s:?}");
    assert_eq!(s.dropped, 0);
    assert_eq!(
        s.shared_appends + s.per_thread_rows + s.per_thread_correlations,
        160_000
    );
}

#[test]
fn merging_while_threads_record_keeps_every_row_once_in_thread_order() {
    // A cap above the row count: this is about ordering, not drops.
    let rec = Recorder::new(RecorderConfig {
        per_thread_cap: 60_000,
        ..config(true)
    });
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut merged = Vec::new();
    thread::scope(|s| {
        s.spawn(|| {
            run_round(&rec, 4, 50_000);
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        while !done.load(std::sync::atomic::Ordering::Acquire) {
            rec.merge();
            merged.extend(rec.take_merged().0);
        }
    });
    rec.merge();
    merged.extend(rec.take_merged().0);
    assert_eq!(rec.stats().dropped, 0);
    let mut per_thread: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in merged {
        let Record::ApiCall(c) = r else {
            panic!("{r:?}")
        };
        per_thread.entry(c.args[0]).or_default().push(c.ret);
    }
    assert_eq!(per_thread.len(), 4);
    assert!(
        per_thread
            .values()
            .all(|v| *v == (0..50_000).collect::<Vec<_>>())
    );
}

#[test]
fn the_per_thread_cap_drops_counts_and_reports() {
    let cap = 2 * BLOCK_LEN;
    let rec = Recorder::new(RecorderConfig {
        per_thread_cap: cap,
        ..config(true)
    });
    thread::scope(|s| {
        s.spawn(|| (0..1000).for_each(|i| rec.record(row(0, i))));
    });
    // From empty, the cap's whole blocks may wait while the current block fills too.
    let held = (cap + BLOCK_LEN) as u64;
    let dir = scratch_dir("cap");
    // The sink creates a missing output directory.
    let mut sink = StreamSink::new(Some(dir.join("not/yet")));
    let flushed = sink.flush(&rec).unwrap();
    assert_eq!(flushed.records, held);
    assert_eq!(flushed.dropped, 1000 - held);
    assert_eq!(rec.stats().dropped, 1000 - held);
    let records: Vec<Record> = StreamReader::open(&sink.path().unwrap()).unwrap().collect();
    let drops: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Drops(d) => Some((d.source.as_str(), d.count)),
            _ => None,
        })
        .collect();
    assert_eq!(drops, [(DROPS_PER_THREAD, 1000 - held)]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_shared_cap_drops_and_counts() {
    let rec = Recorder::new(RecorderConfig {
        shared_cap: 100,
        ..config(false)
    });
    (0..130).for_each(|i| rec.record(row(0, i)));
    let s = rec.stats();
    assert_eq!((s.rows, s.dropped, s.shared_appends), (100, 30, 100));
}

fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kreplay-record-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn flushes_write_names_then_time_sorted_rows_to_tool_pid_krs() {
    let rec = Recorder::new(config(true));
    let tids = Arc::new(std::sync::Mutex::new(Vec::new()));
    thread::scope(|s| {
        for t in 0..3 {
            let tids = Arc::clone(&tids);
            let rec = &rec;
            thread::Builder::new()
                .name(format!("app-{t}"))
                .spawn_scoped(s, move || {
                    tids.lock().unwrap().push(current_tid());
                    (0..100).for_each(|i| rec.record(row(t, i)));
                })
                .unwrap();
        }
    });
    let dir = scratch_dir("flush");
    let mut sink = StreamSink::new(Some(dir.clone()));
    let path = sink.path().unwrap();
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        format!("tool-{}.krs", std::process::id())
    );
    assert_eq!(sink.flush(&rec).unwrap().records, 300);
    run_round(&rec, 1, 10); // a second flush appends to the same file
    assert_eq!(sink.flush(&rec).unwrap().records, 20);
    let mut reader = StreamReader::open(&path).unwrap();
    assert_eq!(reader.header().pid, std::process::id());
    let records: Vec<Record> = reader.by_ref().collect();
    assert_eq!(reader.damage(), None);
    assert!(matches!(&records[0], Record::ProcessName(p) if p.pid == std::process::id()));
    let mut names: Vec<(u32, String)> = records[1..4]
        .iter()
        .map(|r| match r {
            Record::ThreadName(t) => (t.tid, t.name.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    names.sort();
    let mut expected: Vec<(u32, String)> = Vec::new();
    let mut tids = tids.lock().unwrap().clone();
    tids.sort();
    for tid in &tids {
        let name = names.iter().find(|(t, _)| t == tid).unwrap().1.clone();
        assert!(name.starts_with("app-"), "{name}");
        expected.push((*tid, name));
    }
    assert_eq!(names, expected);
    let first: Vec<u64> = records[4..304].iter().map(Record::timestamp).collect();
    assert!(first.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(records.len(), 1 + 3 + 300 + 1 + 20);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn record_with_builds_only_the_rows_it_keeps() {
    let rec = Recorder::new(RecorderConfig {
        per_thread_cap: BLOCK_LEN,
        ..config(true)
    });
    let built = thread::scope(|s| {
        s.spawn(|| {
            let mut built = 0u64;
            for i in 0..(3 * BLOCK_LEN as u64) {
                rec.record_with(|| {
                    built += 1;
                    row(0, i)
                });
            }
            built
        })
        .join()
        .unwrap()
    });
    // One block may wait plus the current one: 2 blocks kept, the third block's rows dropped
    // without being built.
    assert_eq!(built, 2 * BLOCK_LEN as u64);
    // Per-thread drops are tallied when the buffer is merged.
    assert_eq!(rec.stats().dropped, 0);
    assert_eq!(rec.merge(), 2 * BLOCK_LEN);
    assert_eq!(rec.stats().dropped, BLOCK_LEN as u64);
}

#[test]
fn a_row_builder_that_records_too_keeps_both_rows() {
    for per_thread in [true, false] {
        let rec = Recorder::new(config(per_thread));
        thread::scope(|s| {
            s.spawn(|| {
                for i in 0..(2 * BLOCK_LEN as u64) {
                    rec.record_with(|| {
                        rec.record(row(1, i));
                        row(0, i)
                    });
                }
            });
        });
        rec.merge();
        let (rows, _) = rec.take_merged();
        let count = |t| {
            rows.iter()
                .filter(|r| matches!(r, Record::ApiCall(c) if c.args[0] == t))
                .count()
        };
        assert_eq!(
            (count(0), count(1)),
            (2 * BLOCK_LEN, 2 * BLOCK_LEN),
            "per_thread={per_thread}"
        );
    }
}

#[test]
fn recorders_used_in_turn_on_one_thread_each_keep_their_own_rows() {
    // The hot path remembers the last (recorder, buffer) a thread used; switching recorders,
    // and dropping one and making another, must still put every row in its own recorder.
    thread::scope(|s| {
        s.spawn(|| {
            let a = Recorder::new(config(true));
            let rows_of = |rec: &Recorder| -> Vec<u64> {
                rec.merge();
                let (rows, _) = rec.take_merged();
                rows.iter()
                    .map(|r| match r {
                        Record::ApiCall(c) => c.args[0] * 1000 + c.args[1],
                        other => panic!("unexpected {other:?}"),
                    })
                    .collect()
            };
            {
                let b = Recorder::new(config(true));
                for i in 0..5 {
                    a.record(row(1, i));
                    b.record(row(2, i));
                }
                assert_eq!(rows_of(&b), [2000, 2001, 2002, 2003, 2004]);
            }
            // b is gone; c is new (its buffer entry replaces b's orphaned one).
            let c = Recorder::new(config(true));
            for i in 5..8 {
                c.record(row(3, i));
                a.record(row(1, i));
            }
            assert_eq!(rows_of(&a), (0..8).map(|i| 1000 + i).collect::<Vec<_>>());
            assert_eq!(rows_of(&c), [3005, 3006, 3007]);
        });
    });
}
