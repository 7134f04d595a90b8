//! Tests of merging streams: interleaving by timestamp, the reorder window that puts calls
//! given in return order back in entry order, late records, and the lent (by-reference)
//! iteration matching the owned one.

use std::io::Cursor;
use std::path::Path;

use super::tests::api_call;
use super::*;

#[test]
fn merged_streams_interleave_by_timestamp_and_report_each_damage() {
    let stream = |pid: u32, times: &[u64]| {
        let mut w = StreamWriter::new(Vec::new(), &StreamHeader::new(StreamKind::Probes, pid))
            .unwrap()
            .with_chunk_threshold(1);
        for &t in times {
            w.push(
                &Correlation {
                    tid: pid,
                    ts_ns: t,
                    external_id: t,
                    correlation: 0,
                }
                .into(),
            )
            .unwrap();
        }
        w.into_inner().unwrap()
    };
    let a = stream(1, &[10, 20, 30, 40]);
    let b = stream(2, &[5, 20, 25]);
    let mut c = stream(3, &[1, 35, 50]);
    c.truncate(c.len() - 3); // the record at 50 is torn
    let readers = [&a, &b, &c]
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            StreamReader::new(Cursor::new(bytes.to_vec()), Path::new(&format!("s{i}.krs"))).unwrap()
        })
        .collect();
    let mut merged = MergedStreams::new(readers);
    let got: Vec<(usize, u64)> = merged
        .by_ref()
        .map(|m| {
            assert!(!m.late);
            (m.stream, m.record.timestamp())
        })
        .collect();
    assert_eq!(
        got,
        [
            (2, 1),
            (1, 5),
            (0, 10),
            (0, 20),
            (1, 20),
            (1, 25),
            (0, 30),
            (2, 35),
            (0, 40)
        ]
    );
    let damages = merged.damages();
    assert_eq!(damages.len(), 1);
    assert_eq!(damages[0].path, Path::new("s2.krs"));
}

/// A probe-like stream: calls given in return order, each `(enter, exit)`.
fn calls_stream(calls: &[(u64, u64)]) -> Vec<u8> {
    let mut w = StreamWriter::new(Vec::new(), &StreamHeader::new(StreamKind::Probes, 9))
        .unwrap()
        .with_chunk_threshold(1);
    for &(enter_ns, exit_ns) in calls {
        let mut rec = api_call(0);
        if let Record::ApiCall(c) = &mut rec {
            c.enter_ns = enter_ns;
            c.exit_ns = exit_ns;
        }
        w.push(&rec).unwrap();
    }
    w.into_inner().unwrap()
}

fn merge_times(bytes: &[u8], window: usize) -> Vec<(u64, bool)> {
    let r = StreamReader::new(Cursor::new(bytes.to_vec()), Path::new("p.krs")).unwrap();
    MergedStreams::with_window(vec![r], window)
        .map(|m| (m.record.timestamp(), m.late))
        .collect()
}

#[test]
fn the_window_restores_entry_order_of_calls_given_in_return_order() {
    // hipMalloc [10, 50] encloses pool_allocate [20, 30] and a lock [21, 22]; they returned
    // first, so the stream holds them innermost first.
    let bytes = calls_stream(&[(21, 22), (20, 30), (10, 50), (60, 70)]);
    assert_eq!(
        merge_times(&bytes, DEFAULT_WINDOW),
        [(10, false), (20, false), (21, false), (60, false)]
    );
}

#[test]
fn a_record_beyond_the_window_is_delivered_and_flagged_late() {
    let bytes = calls_stream(&[(21, 22), (20, 30), (10, 50), (60, 70)]);
    // A window of 2 holds {21, 20}, emits 20, takes 10, emits 10 (late: 20 went out), ...
    assert_eq!(
        merge_times(&bytes, 2),
        [(20, false), (10, true), (21, false), (60, false)]
    );
}

#[test]
fn a_tool_window_merges_before_a_call_entered_at_the_same_nanosecond() {
    // The call's stream is first (it would win a plain tie), and the tool wrote its window
    // last, after a pass that starts later.
    let probes = calls_stream(&[(90, 95), (90, 520)]);
    let mut w = StreamWriter::new(Vec::new(), &StreamHeader::new(StreamKind::Tool, 9)).unwrap();
    let pass = ReplayPass {
        correlation: 1,
        pass: 0,
        start_ns: 100,
        end_ns: 200,
        pid: 9,
        tid: 9,
        gpu_ns: 0,
    };
    let window = ToolWindow {
        pid: 9,
        tid: 9,
        correlation: 1,
        start_ns: 90,
        end_ns: 520,
    };
    w.push(&pass.clone().into()).unwrap();
    w.push(&window.clone().into()).unwrap();
    let tool = w.into_inner().unwrap();
    let readers = vec![
        StreamReader::new(Cursor::new(probes), Path::new("p.krs")).unwrap(),
        StreamReader::new(Cursor::new(tool), Path::new("t.krs")).unwrap(),
    ];
    let got: Vec<(usize, u64)> = MergedStreams::new(readers)
        .map(|m| (m.stream, m.record.timestamp()))
        .collect();
    assert_eq!(got, [(1, 90), (0, 90), (0, 90), (1, 100)]);
}

#[test]
fn lent_records_come_in_the_same_order_as_owned_ones_with_the_same_lateness() {
    // Two streams, nested calls in return order, one further out of order than a window of 2,
    // equal timestamps across streams.
    let a = calls_stream(&[(21, 22), (20, 30), (10, 50), (60, 70), (55, 80), (90, 91)]);
    let b = calls_stream(&[(20, 25), (5, 60), (61, 62), (90, 95), (1, 100)]);
    let open = || {
        [&a, &b]
            .iter()
            .map(|s| StreamReader::new(Cursor::new(s.to_vec()), Path::new("s.krs")).unwrap())
            .collect::<Vec<_>>()
    };
    for window in [1, 2, DEFAULT_WINDOW] {
        let owned: Vec<(u64, usize, bool)> = MergedStreams::with_window(open(), window)
            .map(|m| (m.record.timestamp(), m.stream, m.late))
            .collect();
        let mut merged = MergedStreams::with_window(open(), window);
        let mut lent = Vec::new();
        while let Some(m) = merged.next_ref() {
            lent.push((m.record.timestamp(), m.stream, m.late));
        }
        assert_eq!(lent, owned, "window {window}");
        assert_eq!(owned.len(), 11);
    }
    // A window of 2: stream b's call entered at 1 arrives after 90 went out.
    let mut merged = MergedStreams::with_window(open(), 2);
    let mut late = Vec::new();
    while let Some(m) = merged.next_ref() {
        if m.late {
            late.push((m.stream, m.record.timestamp()));
        }
    }
    assert_eq!(late, [(0, 10), (1, 1)]);
}

#[test]
fn a_tool_stream_written_a_cupti_buffer_out_of_order_merges_in_order_and_nothing_is_late() {
    // As CUPTI hands buffers over: one thread's 5000 records (times 100000..), then another
    // thread's 5000 earlier ones (times 0..), five times the default window behind.
    let one = |kind, times: std::ops::Range<u64>| {
        let mut w = StreamWriter::new(Vec::new(), &StreamHeader::new(kind, 9)).unwrap();
        for t in times.clone().map(|t| 100_000 + t).chain(times) {
            let mut rec = api_call(0);
            if let Record::ApiCall(c) = &mut rec {
                (c.enter_ns, c.exit_ns) = (t, t);
            }
            w.push(&rec).unwrap();
        }
        let bytes = w.into_inner().unwrap();
        let r = StreamReader::new(Cursor::new(bytes), Path::new("t.krs")).unwrap();
        MergedStreams::new(vec![r])
            .map(|m| (m.record.timestamp(), m.late))
            .collect::<Vec<_>>()
    };
    let tool = one(StreamKind::Tool, 0..5000);
    assert_eq!(tool.len(), 10_000);
    assert!(tool.windows(2).all(|p| p[0].0 < p[1].0), "in time order");
    assert!(tool.iter().all(|&(_, late)| !late));
    // A probe stream keeps the short window: every earlier record comes late (and all come).
    let probes = one(StreamKind::Probes, 0..5000);
    assert_eq!(probes.len(), 10_000);
    assert_eq!(probes.iter().filter(|&&(_, late)| late).count(), 5000);
}
