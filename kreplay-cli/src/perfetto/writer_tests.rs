//! Unit tests of `TraceWriter`: every packet is decoded back with the prost schema and checked
//! field by field; ordering, interning, lanes and the nesting checks are exercised.

use prost::Message as _;

use super::proto::{
    AnnotationNameField, AnnotationValue, CounterValueField, DebugAnnotation, EventNameField,
    EventType, InternedData, InternedString, PacketData, Trace, TracePacket, TrackEvent,
};
use super::{Annotation, CounterUnit, EventArgs, TraceWriter, Value, WriterError, WriterOptions};

fn checked() -> WriterOptions {
    WriterOptions {
        check_nesting: true,
        buffer_bytes: 64,
    }
}

fn decode(bytes: &[u8]) -> Vec<TracePacket> {
    Trace::decode(bytes).expect("a valid Trace").packet
}

fn event(p: &TracePacket) -> &TrackEvent {
    match &p.data {
        Some(PacketData::TrackEvent(e)) => e,
        other => panic!("not a track event: {other:?}"),
    }
}

/// (timestamp, type) of every track event, in file order.
fn timeline(packets: &[TracePacket]) -> Vec<(u64, i32)> {
    packets
        .iter()
        .filter(|p| matches!(p.data, Some(PacketData::TrackEvent(_))))
        .map(|p| (p.timestamp.unwrap(), event(p).r#type.unwrap()))
        .collect()
}

#[test]
fn slice_packet_decodes_to_exactly_the_fields_written() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let thread = w.thread_track(10, 11, "worker").unwrap();
    let name = w.event_name("hipMalloc");
    let [size, ptr, label, delta, ratio, ok] =
        ["size", "ptr", "label", "delta", "ratio", "ok"].map(|n| w.annotation_name(n));
    let long = "k".repeat(300);
    let annotations = [
        Annotation {
            name: size,
            value: Value::Uint(1 << 40),
        },
        Annotation {
            name: ptr,
            value: Value::Pointer(0x7f00_dead_beef),
        },
        Annotation {
            name: label,
            value: Value::Str(&long),
        },
        Annotation {
            name: delta,
            value: Value::Int(-5),
        },
        Annotation {
            name: ratio,
            value: Value::Double(0.25),
        },
        Annotation {
            name: ok,
            value: Value::Bool(true),
        },
    ];
    let args = EventArgs {
        annotations: &annotations,
        flow_ids: &[77],
        terminating_flow_ids: &[66],
    };
    w.slice(seq, thread, name, 1_000, 2_500, &args).unwrap();
    let packets = decode(&w.finish().unwrap());
    assert_eq!(packets.len(), 3, "descriptor, begin, end");

    let begin = &packets[1];
    assert_eq!(begin.timestamp, Some(1_000));
    assert_eq!(begin.trusted_packet_sequence_id, Some(1));
    assert_eq!(
        begin.sequence_flags,
        Some(2),
        "the descriptor was the sequence's first packet"
    );
    let names = |pairs: &[(u64, &str)]| -> Vec<InternedString> {
        pairs
            .iter()
            .map(|&(iid, n)| InternedString {
                iid: Some(iid),
                name: Some(n.to_owned()),
            })
            .collect()
    };
    assert_eq!(
        begin.interned_data,
        Some(InternedData {
            event_names: names(&[(1, "hipMalloc")]),
            debug_annotation_names: names(&[
                (1, "size"),
                (2, "ptr"),
                (3, "label"),
                (4, "delta"),
                (5, "ratio"),
                (6, "ok"),
            ]),
        })
    );
    let values = [
        AnnotationValue::UintValue(1 << 40),
        AnnotationValue::PointerValue(0x7f00_dead_beef),
        AnnotationValue::StringValue(long.clone()),
        AnnotationValue::IntValue(-5),
        AnnotationValue::DoubleValue(0.25),
        AnnotationValue::BoolValue(true),
    ];
    let expected = TrackEvent {
        categories: vec![],
        r#type: Some(EventType::TypeSliceBegin as i32),
        track_uuid: Some(thread.uuid()),
        debug_annotations: values
            .into_iter()
            .zip(1..)
            .map(|(v, iid)| DebugAnnotation {
                name_field: Some(AnnotationNameField::NameIid(iid)),
                value: Some(v),
            })
            .collect(),
        flow_ids: vec![77],
        terminating_flow_ids: vec![66],
        name_field: Some(EventNameField::NameIid(1)),
        counter_value_field: None,
    };
    assert_eq!(event(begin), &expected);

    let end = &packets[2];
    assert_eq!(end.timestamp, Some(2_500));
    assert_eq!(end.interned_data, None);
    assert_eq!(
        event(end),
        &TrackEvent {
            r#type: Some(EventType::TypeSliceEnd as i32),
            track_uuid: Some(thread.uuid()),
            ..Default::default()
        }
    );
}

#[test]
fn each_sequence_starts_cleared_and_interns_from_one() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let track = w.device_track(0, "GPU 0").unwrap();
    let (a, b) = (w.default_sequence(), w.sequence());
    let name = w.event_name("dispatch");
    w.instant(b, track, name, 5, &EventArgs::default()).unwrap();
    w.instant(b, track, name, 6, &EventArgs::default()).unwrap();
    w.instant(a, track, name, 7, &EventArgs::default()).unwrap();
    let packets = decode(&w.finish().unwrap());
    let summary: Vec<_> = packets
        .iter()
        .map(|p| {
            let defined = p
                .interned_data
                .as_ref()
                .map(|d| d.event_names[0].iid.unwrap());
            (
                p.trusted_packet_sequence_id.unwrap(),
                p.sequence_flags.unwrap(),
                p.first_packet_on_sequence,
                defined,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 3, Some(true), None), // descriptor, first on sequence 1
            (2, 3, Some(true), Some(1)),
            (2, 2, None, None),
            (1, 2, None, Some(1)), // sequence 1 defines its own iid 1
        ]
    );
}

#[test]
fn an_inline_name_is_written_in_the_event_and_never_interned() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let track = w.device_track(0, "GPU 0").unwrap();
    let seq = w.sequence();
    let pass = w.annotation_name("pass");
    let args = [Annotation {
        name: pass,
        value: Value::Uint(7),
    }];
    let ev = EventArgs {
        annotations: &args,
        ..Default::default()
    };
    w.slice_inline(seq, track, "pass 7", 10, 20, &ev).unwrap();
    w.slice_inline(seq, track, "pass 8", 30, 40, &EventArgs::default())
        .unwrap();
    let packets = decode(&w.finish().unwrap());
    let begins: Vec<_> = packets
        .iter()
        .filter(|p| matches!(p.data, Some(PacketData::TrackEvent(_))))
        .filter(|p| event(p).r#type == Some(EventType::TypeSliceBegin as i32))
        .map(|p| {
            let names = p.interned_data.as_ref().map_or(0, |d| d.event_names.len());
            (p.timestamp.unwrap(), event(p).name_field.clone(), names)
        })
        .collect();
    assert_eq!(
        begins,
        vec![
            (10, Some(EventNameField::Name("pass 7".into())), 0),
            (30, Some(EventNameField::Name("pass 8".into())), 0),
        ]
    );
    // The annotation name is still interned (defined with the first event).
    let first = packets
        .iter()
        .find(|p| p.timestamp == Some(10))
        .and_then(|p| p.interned_data.clone())
        .unwrap();
    assert_eq!(first.debug_annotation_names.len(), 1);
}

#[test]
fn nested_slices_come_out_time_ordered_with_inner_ends_first() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let t = w.thread_track(1, 1, "main").unwrap();
    let [outer, inner, leaf] = ["outer", "inner", "leaf"].map(|n| w.event_name(n));
    let none = EventArgs::default();
    w.slice(seq, t, outer, 100, 200, &none).unwrap();
    w.slice(seq, t, inner, 100, 200, &none).unwrap(); // same span: outer first
    w.slice(seq, t, leaf, 120, 130, &none).unwrap();
    w.slice(seq, t, leaf, 130, 130, &none).unwrap(); // zero length, touching
    w.slice(seq, t, outer, 250, 260, &none).unwrap();
    let packets = decode(&w.finish().unwrap());
    let (b, e) = (
        EventType::TypeSliceBegin as i32,
        EventType::TypeSliceEnd as i32,
    );
    assert_eq!(
        timeline(&packets),
        vec![
            (100, b),
            (100, b),
            (120, b),
            (130, e),
            (130, b),
            (130, e),
            (200, e),
            (200, e),
            (250, b),
            (260, e)
        ]
    );
}

#[test]
fn crossing_slices_and_disorder_are_rejected_when_checking() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let t = w.thread_track(1, 1, "main").unwrap();
    let n = w.event_name("s");
    let none = EventArgs::default();
    w.slice(seq, t, n, 100, 200, &none).unwrap();
    let err = w.slice(seq, t, n, 150, 250, &none).unwrap_err();
    assert!(
        matches!(
            err,
            WriterError::Crosses {
                begin: 150,
                end: 250,
                parent_end: 200,
                ..
            }
        ),
        "{err}"
    );
    let err = w.slice(seq, t, n, 90, 95, &none).unwrap_err();
    assert!(
        matches!(
            err,
            WriterError::OutOfOrder {
                sequence: 1,
                ts: 90,
                last: 150
            }
        ),
        "{err}"
    );
    let err = w.slice(seq, t, n, 160, 155, &none).unwrap_err();
    assert!(
        matches!(
            err,
            WriterError::NegativeDuration {
                begin: 160,
                end: 155,
                ..
            }
        ),
        "{err}"
    );
    let err = w.end(seq, t, 170).unwrap_err();
    assert!(
        matches!(err, WriterError::UnmatchedEnd { ts: 170, .. }),
        "{err}"
    );
    // A begin() left open inside a complete slice is caught when the slice ends.
    w.begin(seq, t, n, 180, &none).unwrap();
    let err = w.instant(seq, t, n, 210, &none).unwrap_err();
    assert!(
        matches!(err, WriterError::UnclosedInside { end: 200, .. }),
        "{err}"
    );
}

#[test]
fn the_same_mistakes_pass_unchecked_in_release_mode() {
    let opts = WriterOptions {
        check_nesting: false,
        ..checked()
    };
    let mut w = TraceWriter::with_options(Vec::new(), opts);
    let seq = w.default_sequence();
    let t = w.thread_track(1, 1, "main").unwrap();
    let n = w.event_name("s");
    w.slice(seq, t, n, 100, 200, &EventArgs::default()).unwrap();
    w.slice(seq, t, n, 150, 250, &EventArgs::default()).unwrap();
    assert_eq!(decode(&w.finish().unwrap()).len(), 5);
}

#[test]
fn begin_and_end_pair_up_around_complete_children() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let t = w.thread_track(1, 1, "main").unwrap();
    let n = w.event_name("phase");
    let none = EventArgs::default();
    w.begin(seq, t, n, 10, &none).unwrap();
    w.slice(seq, t, n, 20, 30, &none).unwrap();
    w.end(seq, t, 40).unwrap();
    let packets = decode(&w.finish().unwrap());
    let (b, e) = (
        EventType::TypeSliceBegin as i32,
        EventType::TypeSliceEnd as i32,
    );
    assert_eq!(timeline(&packets), vec![(10, b), (20, b), (30, e), (40, e)]);
}

#[test]
fn overlapping_gpu_work_goes_to_lanes_that_are_reused() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let gpu = w.device_track(0, "GPU 0").unwrap();
    let queue = w.child_track(gpu, 0x1000, "queue 0x1000").unwrap();
    let k = w.event_name("kernel");
    let mut lanes = Vec::new();
    for (b, e) in [(0, 100), (50, 150), (60, 70), (100, 120), (160, 170)] {
        let lane = w.lane(queue, b, e).unwrap();
        w.slice(seq, lane, k, b, e, &EventArgs::default()).unwrap();
        lanes.push(lane);
    }
    assert_eq!(lanes[0], queue);
    assert_ne!(lanes[1], queue);
    assert_ne!(lanes[2], lanes[1]);
    assert_eq!(lanes[3], queue, "free again at 100");
    assert_eq!(lanes[4], queue);
    let packets = decode(&w.finish().unwrap());
    let lane_descriptors: Vec<_> = packets
        .iter()
        .filter_map(|p| match &p.data {
            Some(PacketData::TrackDescriptor(d)) if d.parent_uuid == Some(gpu.uuid()) => {
                Some((d.uuid.unwrap(), d.name.clone().unwrap()))
            }
            _ => None,
        })
        .collect();
    let name = "queue 0x1000".to_owned();
    assert_eq!(
        lane_descriptors,
        vec![
            (queue.uuid(), name.clone()),
            (lanes[1].uuid(), name.clone()),
            (lanes[2].uuid(), name)
        ]
    );
}

#[test]
fn descriptors_are_written_once_and_counters_carry_values() {
    let mut w = TraceWriter::with_options(Vec::new(), checked());
    let seq = w.default_sequence();
    let p = w.process_track(7, "app").unwrap();
    assert_eq!(w.process_track(7, "app").unwrap(), p);
    let c = w
        .counter_track(Some(p), "live device bytes", CounterUnit::UnitSizeBytes)
        .unwrap();
    assert_eq!(
        w.counter_track(Some(p), "live device bytes", CounterUnit::UnitSizeBytes)
            .unwrap(),
        c
    );
    w.counter(seq, c, 1, 4096).unwrap();
    w.counter(seq, c, 2, -1).unwrap();
    w.counter_f64(seq, c, 3, 1.5).unwrap();
    let packets = decode(&w.finish().unwrap());
    assert_eq!(packets.len(), 5);
    let values: Vec<_> = packets[2..]
        .iter()
        .map(|p| event(p).counter_value_field.clone().unwrap())
        .collect();
    assert_eq!(
        values,
        vec![
            CounterValueField::CounterValue(4096),
            CounterValueField::CounterValue(-1),
            CounterValueField::DoubleCounterValue(1.5)
        ]
    );
    let Some(PacketData::TrackDescriptor(d)) = &packets[1].data else {
        panic!("descriptor")
    };
    assert_eq!(d.parent_uuid, Some(p.uuid()));
    assert_eq!(
        d.counter.as_ref().unwrap().unit,
        Some(CounterUnit::UnitSizeBytes as i32)
    );
}

#[test]
fn output_is_written_in_bounded_chunks() {
    /// Records the size of every write.
    struct Chunks(Vec<usize>, Vec<u8>);
    impl std::io::Write for Chunks {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.push(b.len());
            self.1.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let opts = WriterOptions {
        check_nesting: true,
        buffer_bytes: 4096,
    };
    let mut w = TraceWriter::with_options(Chunks(Vec::new(), Vec::new()), opts);
    let seq = w.default_sequence();
    let t = w.thread_track(1, 2, "t").unwrap();
    let n = w.event_name("cuLaunchKernel");
    for i in 0..10_000u64 {
        w.slice(seq, t, n, i * 10, i * 10 + 5, &EventArgs::default())
            .unwrap();
    }
    assert_eq!(
        w.packets(),
        1 + 10_000 + 9_999,
        "the last end is still pending"
    );
    let out = w.finish().unwrap();
    assert!(out.0.len() > 10, "streamed in many writes");
    assert!(
        out.0.iter().all(|&n| n < 4096 + 128),
        "chunks {:?}",
        &out.0[..4]
    );
    assert_eq!(decode(&out.1).len(), 1 + 20_000);
}

/// A writer whose bytes stay readable after the `TraceWriter` is gone.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn dropping_the_writer_writes_pending_ends_and_flushes() {
    let out = Shared::default();
    let bytes_counted;
    {
        let mut w = TraceWriter::with_options(out.clone(), checked());
        let seq = w.default_sequence();
        let t = w.thread_track(1, 1, "main").unwrap();
        let n = w.event_name("interrupted");
        w.slice(seq, t, n, 10, 20, &EventArgs::default()).unwrap();
        w.slice(seq, t, n, 12, 15, &EventArgs::default()).unwrap();
        w.flush().unwrap();
        bytes_counted = w.bytes();
        assert_eq!(
            bytes_counted as usize,
            out.0.borrow().len(),
            "bytes() after flush"
        );
        assert_eq!(w.packets(), 3, "both ends still pending");
    }
    let packets = decode(&out.0.borrow());
    let (b, e) = (
        EventType::TypeSliceBegin as i32,
        EventType::TypeSliceEnd as i32,
    );
    assert_eq!(timeline(&packets), vec![(10, b), (12, b), (15, e), (20, e)]);
    assert!(out.0.borrow().len() as u64 > bytes_counted);
}
