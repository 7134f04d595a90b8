//! kreplay's Perfetto writer checked by an independent decoder: traces written through
//! `kreplay_cli::perfetto::TraceWriter` are decoded by `tests/python/decode_trace.py`, which
//! uses only the official generated protos of the `perfetto` PyPI package, and the tests assert
//! exact values from its JSON summary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use kreplay_cli::perfetto::proto::{
    EventNameField, EventType, InternedData, InternedString, PacketData, Trace, TracePacket,
    TrackDescriptor, TrackEvent,
};
use kreplay_cli::perfetto::{
    Annotation, CounterUnit, EventArgs, TraceWriter, TrackKey, Value, WriterOptions,
};
use prost::Message as _;
use serde_json::{Value as Json, json};

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// Makes sure python3 can import the official protos, installing the pinned requirements
/// with pip when they are missing.
fn ensure_decoder() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let probe = || {
            Command::new("python3")
                .args([
                    "-c",
                    "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                ])
                .status()
                .is_ok_and(|s| s.success())
        };
        if probe() {
            return;
        }
        let reqs = python_dir().join("requirements.txt");
        let status = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "-r"])
            .arg(&reqs)
            .status()
            .expect("python3 must be installed to run the Perfetto decoder");
        assert!(status.success(), "pip install -r {} failed", reqs.display());
        assert!(
            probe(),
            "the perfetto package still does not import after pip install"
        );
    });
}

/// A trace file in the temp dir, removed when dropped.
struct TempTrace(PathBuf);

impl TempTrace {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("kreplay-pf-{}-{name}.pftrace", std::process::id()));
        TempTrace(path)
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs the decoder on `bytes` and returns its JSON summary.
fn decode(name: &str, bytes: &[u8]) -> Json {
    ensure_decoder();
    let file = TempTrace::new(name);
    std::fs::write(&file.0, bytes).unwrap();
    let out = Command::new("python3")
        .arg(python_dir().join("decode_trace.py"))
        .arg(&file.0)
        .output()
        .expect("run decode_trace.py");
    assert!(
        out.status.success(),
        "decoder failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("decoder JSON")
}

/// Slices of one track as (name, ts, dur, depth).
fn slices(summary: &Json, uuid: u64) -> Vec<(String, u64, u64, u64)> {
    summary["slices"][uuid.to_string()]
        .as_array()
        .unwrap_or_else(|| panic!("no slices on track {uuid}"))
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["ts"].as_u64().unwrap(),
                s["dur"].as_u64().unwrap(),
                s["depth"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn slice(name: &str, ts: u64, dur: u64, depth: u64) -> (String, u64, u64, u64) {
    (name.to_owned(), ts, dur, depth)
}

/// The uuids of the tracks the scenario defines.
struct Uuids {
    process: u64,
    main: u64,
    worker: u64,
    gpu: u64,
    queue: u64,
    lane1: u64,
    counter: u64,
}

/// A small GPU application: two threads calling the runtime, a kernel launch on each that
/// flows to its dispatch on one GPU queue (the two dispatches overlap, so the second goes to
/// an overflow lane), a live-bytes counter and a drop marker. One sequence per source stream.
fn scenario() -> (Vec<u8>, Uuids) {
    let opts = WriterOptions {
        check_nesting: true,
        buffer_bytes: 512,
    };
    let mut w = TraceWriter::with_options(Vec::new(), opts);
    let (main_seq, worker_seq, gpu_seq) = (w.sequence(), w.sequence(), w.sequence());
    let process = w.process_track(100, "app").unwrap();
    let main = w.thread_track(100, 100, "main").unwrap();
    let worker = w.thread_track(100, 101, "worker").unwrap();
    let gpu = w.device_track(0, "GPU 0").unwrap();
    let queue = w.child_track(gpu, 0x7000_1000, "queue 0").unwrap();
    let counter = w
        .counter_track(
            Some(process),
            "live device bytes",
            CounterUnit::UnitSizeBytes,
        )
        .unwrap();

    let names = [
        "hipMalloc",
        "hsa_amd_memory_pool_allocate",
        "hipLaunchKernel",
        "hipFree",
        "cuLaunchKernel",
    ];
    let [malloc, pool_alloc, launch, free, cu_launch] = names.map(|n| w.event_name(n));
    let [saxpy, reduce, dropped] = ["saxpy", "reduce", "events dropped"].map(|n| w.event_name(n));
    let [size, ptr, kernel, ret, count] =
        ["size", "ptr", "kernel", "ret", "count"].map(|n| w.annotation_name(n));

    let alloc_args = [
        Annotation {
            name: size,
            value: Value::Uint(4096),
        },
        Annotation {
            name: ptr,
            value: Value::Pointer(0x7f12_3400_0000),
        },
    ];
    let alloc = EventArgs {
        annotations: &alloc_args,
        ..EventArgs::default()
    };
    w.slice(main_seq, main, malloc, 1_000, 1_200, &alloc)
        .unwrap();
    w.counter(main_seq, counter, 1_200, 4096).unwrap();
    let kernel_args = [Annotation {
        name: kernel,
        value: Value::Str("saxpy"),
    }];
    let launch_args = EventArgs {
        annotations: &kernel_args,
        flow_ids: &[1],
        ..EventArgs::default()
    };
    w.slice(main_seq, main, launch, 2_000, 2_100, &launch_args)
        .unwrap();
    w.slice(main_seq, main, malloc, 3_000, 3_500, &alloc)
        .unwrap();
    w.slice(main_seq, main, pool_alloc, 3_100, 3_400, &alloc)
        .unwrap();
    w.counter(main_seq, counter, 3_500, 8192).unwrap();
    let free_args = [
        Annotation {
            name: ptr,
            value: Value::Pointer(0x7f12_3400_0000),
        },
        Annotation {
            name: ret,
            value: Value::Int(-1),
        },
    ];
    w.slice(
        main_seq,
        main,
        free,
        4_000,
        4_100,
        &EventArgs {
            annotations: &free_args,
            ..EventArgs::default()
        },
    )
    .unwrap();
    w.counter(main_seq, counter, 4_100, 4096).unwrap();
    let count_args = [Annotation {
        name: count,
        value: Value::Uint(3),
    }];
    w.instant(
        main_seq,
        main,
        dropped,
        5_000,
        &EventArgs {
            annotations: &count_args,
            ..EventArgs::default()
        },
    )
    .unwrap();

    w.slice(
        worker_seq,
        worker,
        cu_launch,
        2_050,
        2_080,
        &EventArgs {
            flow_ids: &[2],
            ..EventArgs::default()
        },
    )
    .unwrap();

    let lane0 = w.lane(queue, 2_150, 2_600).unwrap();
    w.slice(
        gpu_seq,
        lane0,
        saxpy,
        2_150,
        2_600,
        &EventArgs {
            terminating_flow_ids: &[1],
            ..EventArgs::default()
        },
    )
    .unwrap();
    let lane1 = w.lane(queue, 2_200, 2_300).unwrap();
    w.slice(
        gpu_seq,
        lane1,
        reduce,
        2_200,
        2_300,
        &EventArgs {
            terminating_flow_ids: &[2],
            ..EventArgs::default()
        },
    )
    .unwrap();
    assert_eq!(lane0, queue);

    let uuids = Uuids {
        process: process.uuid(),
        main: main.uuid(),
        worker: worker.uuid(),
        gpu: gpu.uuid(),
        queue: queue.uuid(),
        lane1: lane1.uuid(),
        counter: counter.uuid(),
    };
    (w.finish().unwrap(), uuids)
}

#[test]
fn decoder_sees_exactly_the_tracks_slices_counters_and_flows_written() {
    let (bytes, u) = scenario();
    let s = decode("scenario", &bytes);
    assert_eq!(s["errors"], json!([]), "decoder found rule violations");

    let track = |uuid: u64| s["tracks"][uuid.to_string()].clone();
    assert_eq!(
        track(u.process),
        json!({"kind": "process", "name": "app", "parent": null, "pid": 100, "tid": null, "unit": null})
    );
    assert_eq!(
        track(u.main),
        json!({"kind": "thread", "name": "main", "parent": u.process, "pid": 100, "tid": 100, "unit": null})
    );
    assert_eq!(track(u.worker)["tid"], json!(101));
    assert_eq!(
        track(u.gpu),
        json!({"kind": "named", "name": "GPU 0", "parent": null, "pid": null, "tid": null, "unit": null})
    );
    assert_eq!(track(u.queue)["parent"], json!(u.gpu));
    assert_eq!(
        track(u.lane1),
        json!({"kind": "named", "name": "queue 0", "parent": u.gpu, "pid": null, "tid": null, "unit": null})
    );
    assert_eq!(track(u.counter)["unit"], json!("UNIT_SIZE_BYTES"));
    assert_eq!(track(u.counter)["parent"], json!(u.process));
    assert_eq!(s["tracks"].as_object().unwrap().len(), 7);

    assert_eq!(
        slices(&s, u.main),
        vec![
            slice("hipMalloc", 1_000, 200, 0),
            slice("hipLaunchKernel", 2_000, 100, 0),
            slice("hipMalloc", 3_000, 500, 0),
            slice("hsa_amd_memory_pool_allocate", 3_100, 300, 1),
            slice("hipFree", 4_000, 100, 0),
        ]
    );
    assert_eq!(
        slices(&s, u.worker),
        vec![slice("cuLaunchKernel", 2_050, 30, 0)]
    );
    assert_eq!(slices(&s, u.queue), vec![slice("saxpy", 2_150, 450, 0)]);
    assert_eq!(slices(&s, u.lane1), vec![slice("reduce", 2_200, 100, 0)]);

    let main = &s["slices"][u.main.to_string()];
    assert_eq!(
        main[0]["args"],
        json!({"size": {"uint": 4096}, "ptr": {"pointer": 0x7f12_3400_0000u64}})
    );
    assert_eq!(main[1]["args"], json!({"kernel": {"string": "saxpy"}}));
    assert_eq!(main[1]["flow_ids"], json!([1]));
    assert_eq!(
        main[4]["args"],
        json!({"ptr": {"pointer": 0x7f12_3400_0000u64}, "ret": {"int": -1}})
    );
    assert_eq!(
        s["instants"][u.main.to_string()],
        json!([{"name": "events dropped", "ts": 5_000, "args": {"count": {"uint": 3}},
                "flow_ids": [], "terminating_flow_ids": []}])
    );

    assert_eq!(
        s["counters"][u.counter.to_string()],
        json!([[1_200, 4096], [3_500, 8192], [4_100, 4096]])
    );

    let flow_ref =
        |track: u64, name: &str, ts: u64| json!({"track": track, "name": name, "ts": ts});
    assert_eq!(
        s["flows"],
        json!({
            "1": {"from": [flow_ref(u.main, "hipLaunchKernel", 2_000)], "to": [flow_ref(u.queue, "saxpy", 2_150)]},
            "2": {"from": [flow_ref(u.worker, "cuLaunchKernel", 2_050)], "to": [flow_ref(u.lane1, "reduce", 2_200)]},
        })
    );

    // Sequence 1 carries the 7 descriptors; 2, 3 and 4 are the main, worker and GPU streams.
    let seq = |id: u32| s["sequences"][id.to_string()].clone();
    for (id, packets, event_names, annotation_names) in [
        (1, 7, 0, 0),
        (2, 5 * 2 + 3 + 1, 5, 5),
        (3, 2, 1, 0),
        (4, 4, 2, 0),
    ] {
        let q = seq(id);
        assert_eq!(q["packets"], json!(packets), "sequence {id}");
        assert_eq!(q["flags"], json!([3, 2]), "sequence {id}");
        assert_eq!(q["flags_ok"], json!(true), "sequence {id}");
        assert_eq!(q["monotonic"], json!(true), "sequence {id}");
        assert_eq!(q["first_packet_on_sequence"], json!(true), "sequence {id}");
        assert_eq!(
            q["event_names_defined"],
            json!(event_names),
            "sequence {id}"
        );
        assert_eq!(
            q["annotation_names_defined"],
            json!(annotation_names),
            "sequence {id}"
        );
    }
    assert_eq!(s["packets"], json!(7 + 14 + 2 + 4));
}

#[test]
fn the_same_input_gives_the_same_uuids_and_bytes_in_every_run() {
    let (first, u1) = scenario();
    let (second, u2) = scenario();
    assert_eq!(first, second, "byte-identical traces");
    let tracks = |bytes: &[u8], name: &str| {
        let s = decode(name, bytes);
        let mut uuids: Vec<String> = s["tracks"].as_object().unwrap().keys().cloned().collect();
        uuids.sort();
        uuids
    };
    assert_eq!(tracks(&first, "run1"), tracks(&second, "run2"));
    assert_eq!((u1.main, u1.queue, u1.lane1), (u2.main, u2.queue, u2.lane1));
    // The uuid is a function of the key alone, not of definition order or writer.
    let mut other = TraceWriter::new(Vec::new());
    let worker = other.thread_track(100, 101, "renamed").unwrap();
    assert_eq!(worker.uuid(), u1.worker);
    assert_eq!(
        worker.uuid(),
        TrackKey::Thread { pid: 100, tid: 101 }.uuid()
    );
}

#[test]
fn a_long_multi_sequence_trace_decodes_with_exact_counts() {
    const PER_TRACK: u64 = 5_000;
    let mut w = TraceWriter::with_options(
        Vec::new(),
        WriterOptions {
            check_nesting: true,
            buffer_bytes: 64 * 1024,
        },
    );
    let seqs = [w.sequence(), w.sequence()];
    let tracks: Vec<_> = (0..4)
        .map(|t| w.thread_track(7, 70 + t, "worker").unwrap())
        .collect();
    let names: Vec<_> = ["a", "b", "c"].iter().map(|n| w.event_name(n)).collect();
    let (size, ptr) = (w.annotation_name("size"), w.annotation_name("ptr"));
    for i in 0..PER_TRACK {
        for (t, &track) in tracks.iter().enumerate() {
            let annotations = [
                Annotation {
                    name: size,
                    value: Value::Uint(i),
                },
                Annotation {
                    name: ptr,
                    value: Value::Pointer(0x1000 + i),
                },
            ];
            let args = EventArgs {
                annotations: &annotations,
                ..EventArgs::default()
            };
            let begin = i * 100 + t as u64;
            let name = names[(i % 3) as usize];
            w.slice(seqs[t % 2], track, name, begin, begin + 50, &args)
                .unwrap();
        }
    }
    let s = decode("long", &w.finish().unwrap());
    assert_eq!(s["errors"], json!([]));
    for (t, track) in tracks.iter().enumerate() {
        let list = s["slices"][track.uuid().to_string()].as_array().unwrap();
        assert_eq!(list.len() as u64, PER_TRACK, "track {t}");
        let last = &list[PER_TRACK as usize - 1];
        assert_eq!(last["ts"], json!((PER_TRACK - 1) * 100 + t as u64));
        assert_eq!(last["dur"], json!(50));
        assert_eq!(last["args"]["size"], json!({"uint": PER_TRACK - 1}));
    }
    for id in [2, 3] {
        let q = &s["sequences"][id.to_string()];
        assert_eq!(q["packets"], json!(2 * 2 * PER_TRACK), "sequence {id}");
        assert_eq!(q["monotonic"], json!(true));
        assert_eq!(
            q["event_names_defined"],
            json!(3),
            "each name interned once per sequence"
        );
        assert_eq!(q["annotation_names_defined"], json!(2));
    }
}

/// A trace that breaks the rules on purpose, built with the prost schema, so the decoder's
/// checks are shown to fire (a decoder that never complains would pass the tests above).
#[test]
fn the_decoder_reports_broken_rules() {
    let event = |ts: u64,
                 seq: u32,
                 flags: u32,
                 ty: EventType,
                 name_iid: Option<u64>,
                 interned: Option<InternedData>| {
        TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(seq),
            sequence_flags: Some(flags),
            interned_data: interned,
            data: Some(PacketData::TrackEvent(TrackEvent {
                r#type: Some(ty as i32),
                track_uuid: Some(42),
                name_field: name_iid.map(EventNameField::NameIid),
                ..Default::default()
            })),
            ..Default::default()
        }
    };
    let descriptor = TracePacket {
        trusted_packet_sequence_id: Some(1),
        sequence_flags: Some(3),
        first_packet_on_sequence: Some(true),
        data: Some(PacketData::TrackDescriptor(TrackDescriptor {
            uuid: Some(42),
            name: Some("t".into()),
            ..Default::default()
        })),
        ..Default::default()
    };
    let names = InternedData {
        event_names: vec![InternedString {
            iid: Some(1),
            name: Some("x".into()),
        }],
        debug_annotation_names: vec![],
    };
    let trace = Trace {
        packet: vec![
            event(5, 2, 2, EventType::TypeSliceBegin, Some(1), None), // before descriptor, no clear
            descriptor.clone(),
            event(6, 2, 2, EventType::TypeSliceEnd, None, None),
            event(7, 2, 2, EventType::TypeSliceEnd, None, None), // nothing open
            event(8, 2, 2, EventType::TypeSliceBegin, Some(1), Some(names)), // never ends
            descriptor,
        ],
    };
    let s = decode("broken", &trace.encode_to_vec());
    assert_eq!(
        s["errors"],
        json!([
            "track 42: event at 5 before (or without) its descriptor",
            "seq 2: event name iid 1 used before it was defined",
            "track 42: descriptor after its first event",
            "seq 2: interned data before the state was cleared",
            "track 42: descriptor written twice",
            "track 42: descriptor after its first event",
            "track 42: SLICE_END at 7 with no open slice",
            "track 42: slice 'x' at 8 never ends",
            "seq 2: sequence flags [2, 2], expected [3, 2]",
            "seq 2: first packet lacks first_packet_on_sequence",
            "seq 1: sequence flags [3, 3], expected [3, 2]",
        ])
    );
}
