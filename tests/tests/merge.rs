//! `kreplay merge` end to end: tool and probe streams synthesized with the stream writer (no
//! GPU, no BPF), merged by the binary, decoded by the independent decoder (the official
//! Perfetto protos); exact slices per track, nesting, annotations, instants and flows.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use kreplay_common::{
    api::id_of,
    stream::{
        ApiCall, Correlation, Decline, Dispatch, KernelName, Nondeterministic, ProcessName, Record,
        ReplayPass, Restore, Snapshot, StreamHeader, StreamKind, StreamWriter, ThreadName,
    },
};
use kreplay_tests::{decode_trace, kreplay_bin, scratch};
use serde_json::{Value, json};

#[path = "merge_parts/bad_records.rs"]
mod bad_records;
#[path = "merge_parts/files.rs"]
mod files;
#[path = "merge_parts/gpu_names.rs"]
mod gpu_names;
#[path = "merge_parts/inputs.rs"]
mod inputs;
#[path = "merge_parts/kernels.rs"]
mod kernels;

const PID: u32 = 500;
const MAIN: u32 = 501;
const WORKER: u32 = 502;
const AGENT: u64 = 0xa9e0;
const QUEUE: u64 = 0x9e00;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch("merge").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn call(tid: u32, api: &str, enter_ns: u64, exit_ns: u64) -> Record {
    let mut args = [0u64; 6];
    let mut out = 0;
    if api == "hipMalloc" || api == "hsa_amd_memory_pool_allocate" {
        args[1] = 4096;
        out = 0x7000_0000;
    }
    ApiCall {
        pid: PID,
        tid,
        api: id_of(api).unwrap_or_else(|| panic!("{api} is in the API table")),
        enter_ns,
        exit_ns,
        ret: 0,
        args,
        extra: [0; 5],
        out,
    }
    .into()
}

fn dispatch(
    tid: u32,
    kernel: &str,
    correlation: u64,
    submit_ns: u64,
    start_ns: u64,
    end_ns: u64,
) -> Record {
    Dispatch {
        pid: PID,
        tid,
        agent: AGENT,
        queue: QUEUE,
        kernel: kernel.into(),
        correlation,
        kernel_object: 0x7f00_0000 + correlation,
        grid: [1024 * correlation as u32, 1, 1],
        workgroup: [256, 1, 1],
        submit_ns,
        start_ns,
        end_ns,
        group_segment: 0,
        private_segment: 0,
    }
    .into()
}

/// Writes `records` to `path` as a stream of `kind`, one chunk per `per_chunk` records.
fn write_stream(path: &Path, kind: StreamKind, records: &[Record], per_chunk: usize) {
    let mut w = StreamWriter::create(path, &StreamHeader::new(kind, PID)).unwrap();
    for (i, r) in records.iter().enumerate() {
        w.push(r).unwrap();
        if (i + 1) % per_chunk == 0 {
            w.flush().unwrap();
        }
    }
    w.flush().unwrap();
}

fn names(tid: u32, thread: &str) -> Vec<Record> {
    vec![
        ProcessName {
            pid: PID,
            name: "app".into(),
        }
        .into(),
        ThreadName {
            tid,
            name: thread.into(),
        }
        .into(),
    ]
}

/// One run: two application threads' probe streams (calls in return order, as the BPF side
/// writes them) and the tool's stream with dispatches, a replay and its records.
fn write_run(dir: &Path) {
    let mut main = names(MAIN, "main");
    main.extend([
        // pool_allocate returned inside hipMalloc, so it comes first.
        call(MAIN, "hsa_amd_memory_pool_allocate", 1100, 1400),
        call(MAIN, "hipMalloc", 1000, 1500),
        call(MAIN, "hipLaunchKernel", 2000, 2600),
        call(MAIN, "hipStreamSynchronize", 2700, 5200),
        call(MAIN, "hipLaunchKernel", 6000, 6400),
        call(MAIN, "hipLaunchKernel", 9000, 9100),
    ]);
    write_stream(
        &dir.join("probes-500-501.krs"),
        StreamKind::Probes,
        &main,
        2,
    );
    let mut worker = names(WORKER, "worker");
    worker.push(call(WORKER, "hipModuleLaunchKernel", 2100, 2500));
    write_stream(
        &dir.join("probes-500-502.krs"),
        StreamKind::Probes,
        &worker,
        64,
    );
    let tool: Vec<Record> = vec![
        ProcessName {
            pid: PID,
            name: "app".into(),
        }
        .into(),
        Correlation {
            tid: WORKER,
            ts_ns: 2150,
            external_id: 77,
            correlation: 3,
        }
        .into(),
        dispatch(WORKER, "gemm", 3, 2200, 3500, 4500),
        dispatch(MAIN, "saxpy", 1, 2300, 3000, 5000),
        Snapshot {
            correlation: 1,
            start_ns: 3000,
            end_ns: 3100,
            bytes: 8192,
            regions: 2,
            placement: 2,
            check: 2,
            chunk_size: 65536,
            bytes_hashed: 8192,
            pid: 0,
            tid: 0,
        }
        .into(),
        ReplayPass {
            correlation: 1,
            pass: 0,
            start_ns: 3100,
            end_ns: 3300,
            pid: 0,
            tid: 0,
            gpu_ns: 0,
        }
        .into(),
        Restore {
            correlation: 1,
            pass: 1,
            start_ns: 3300,
            end_ns: 3400,
            bytes: 4096,
            regions: 1,
            skipped: 1,
            placement: 2,
            check: 2,
            bytes_checked: 8192,
            dirty_chunks: 1,
            check_ns: 50,
            pid: 0,
            tid: 0,
            failed: 2,
        }
        .into(),
        ReplayPass {
            correlation: 1,
            pass: 1,
            start_ns: 3400,
            end_ns: 4900,
            pid: 0,
            tid: 0,
            gpu_ns: 0,
        }
        .into(),
        Nondeterministic {
            correlation: 1,
            pass: 1,
            ts_ns: 4950,
            region: 0x7000_0000,
            offset: 12,
        }
        .into(),
        dispatch(MAIN, "reduce", 2, 6100, 6500, 6900),
        Decline {
            correlation: 2,
            ts_ns: 6150,
            reason: "uses fine-grained memory".into(),
        }
        .into(),
        // After its dispatch ended: cannot nest, goes on the queue's replay track.
        Snapshot {
            correlation: 2,
            start_ns: 6960,
            end_ns: 6990,
            bytes: 100,
            regions: 1,
            // A tool before the chunk fields: no placement/check arguments.
            placement: 0,
            check: 0,
            chunk_size: 0,
            bytes_hashed: 0,
            pid: 0,
            tid: 0,
        }
        .into(),
        // A replay record whose dispatch record is missing.
        ReplayPass {
            correlation: 99,
            pass: 0,
            start_ns: 7000,
            end_ns: 7100,
            pid: 0,
            tid: 0,
            gpu_ns: 0,
        }
        .into(),
        // Submitted by a thread kreplay did not probe: no launch slice, no flow.
        dispatch(503, "orphan_kernel", 4, 8000, 8100, 8200),
        // No GPU times: an instant at submission, still joined to its launch.
        dispatch(MAIN, "untimed", 5, 9050, 0, 0),
    ];
    write_stream(&dir.join("tool-500.krs"), StreamKind::Tool, &tool, 3);
}

fn merge(inputs: &[&Path], output: &Path) -> Output {
    let _ = std::fs::remove_file(output);
    Command::new(kreplay_bin())
        .arg("merge")
        .args(inputs)
        .arg("-o")
        .arg(output)
        .output()
        .expect("run kreplay merge")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A track uuid (a JSON number) in the decimal form the decoder uses as a key.
fn uuid(v: &Value) -> String {
    v.as_u64().map_or_else(String::new, |u| u.to_string())
}

/// The uuids of the tracks with this kind and name (and parent, when given), sorted.
fn track(d: &Value, kind: &str, name: &str, parent: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == kind && t["name"] == name)
        .filter(|(_, t)| parent.is_none_or(|p| uuid(&t["parent"]) == p))
        .map(|(u, _)| u.clone())
        .collect();
    v.sort();
    v
}

/// (name, ts, dur, depth) of every slice on a track.
fn slices(d: &Value, uuid: &str) -> Vec<(String, u64, u64, u64)> {
    d["slices"][uuid]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["ts"].as_u64().unwrap(),
                s["dur"].as_u64().unwrap(),
                s["depth"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn slice<'a>(d: &'a Value, uuid: &str, name: &str, ts: u64) -> &'a Value {
    d["slices"][uuid]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name && s["ts"] == ts)
        .unwrap_or_else(|| panic!("no slice {name} at {ts} on {uuid}"))
}

fn s(name: &str, ts: u64, dur: u64, depth: u64) -> (String, u64, u64, u64) {
    (name.to_string(), ts, dur, depth)
}

#[test]
fn tool_and_probe_streams_merge_into_one_trace_with_flows() {
    let dir = fresh_dir("run");
    write_run(&dir);
    let out = dir.join("run.pftrace");
    let o = merge(&[&dir], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("5 dispatches, 0 copies, 4 flows"),
        "summary line: {}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]), "decoder errors");
    for (id, seq) in d["sequences"].as_object().unwrap() {
        assert_eq!(seq["monotonic"], true, "sequence {id}");
        assert_eq!(seq["flags_ok"], true, "sequence {id}");
    }

    // Application threads: entry order restored, nesting kept, launches with flows.
    let main = track(&d, "thread", "main", None);
    let worker = track(&d, "thread", "worker", None);
    assert_eq!((main.len(), worker.len()), (1, 1));
    let (main, worker) = (&main[0], &worker[0]);
    assert_eq!(
        slices(&d, main),
        [
            s("hipMalloc", 1000, 500, 0),
            s("hsa_amd_memory_pool_allocate", 1100, 300, 1),
            s("hipLaunchKernel", 2000, 600, 0),
            s("hipStreamSynchronize", 2700, 2500, 0),
            s("hipLaunchKernel", 6000, 400, 0),
            s("hipLaunchKernel", 9000, 100, 0),
        ]
    );
    assert_eq!(
        slices(&d, worker),
        [s("hipModuleLaunchKernel", 2100, 400, 0)]
    );
    assert_eq!(
        slice(&d, worker, "hipModuleLaunchKernel", 2100)["args"]["external_id"],
        json!({"uint": 77})
    );

    // GPU: a device track per (process, agent), a queue track under it, an overflow lane for
    // the dispatch that overlaps another on the same queue.
    let device = track(&d, "named", "GPU agent 0xa9e0 (app 500)", None);
    assert_eq!(device.len(), 1);
    let queues = track(&d, "named", "queue 0x9e00", Some(&device[0]));
    assert_eq!(queues.len(), 2, "the queue and one overflow lane");
    let (queue, lane) = if d["slices"][&queues[0]].as_array().unwrap().len() > 1 {
        (&queues[0], &queues[1])
    } else {
        (&queues[1], &queues[0])
    };
    assert_eq!(
        slices(&d, queue),
        [
            s("saxpy", 3000, 2000, 0),
            s("snapshot", 3000, 100, 1),
            s("pass 0", 3100, 200, 1),
            s("restore", 3300, 100, 1),
            s("pass 1", 3400, 1500, 1),
            s("reduce", 6500, 400, 0),
            s("orphan_kernel", 8100, 100, 0),
        ]
    );
    assert_eq!(slices(&d, lane), [s("gemm", 3500, 1000, 0)]);

    let saxpy = slice(&d, queue, "saxpy", 3000);
    assert_eq!(
        saxpy["args"],
        json!({
            "grid": {"string": "1024x1x1"},
            "workgroup": {"string": "256x1x1"},
            "correlation": {"uint": 1},
            "kernel_object": {"pointer": 0x7f00_0001u64},
            "group_segment": {"uint": 0},
            "queue": {"pointer": 0x9e00},
        })
    );
    assert_eq!(
        slice(&d, lane, "gemm", 3500)["args"]["external_id"],
        json!({"uint": 77})
    );
    assert_eq!(
        slice(&d, queue, "snapshot", 3000)["args"],
        json!({
            "bytes": {"uint": 8192},
            "regions": {"uint": 2},
            "correlation": {"uint": 1},
            "placement": {"string": "pinned"},
            "check": {"string": "host-hash"},
            "chunk_size": {"uint": 65536},
            "bytes_hashed": {"uint": 8192},
        })
    );
    assert_eq!(
        slice(&d, queue, "restore", 3300)["args"],
        json!({
            "pass": {"uint": 1},
            "bytes": {"uint": 4096},
            "regions": {"uint": 1},
            "skipped": {"uint": 1},
            "correlation": {"uint": 1},
            "placement": {"string": "pinned"},
            "check": {"string": "host-hash"},
            "bytes_checked": {"uint": 8192},
            "dirty_chunks": {"uint": 1},
            "check_ns": {"uint": 50},
            "failed_regions": {"uint": 2},
        })
    );
    assert_eq!(
        slice(&d, queue, "pass 1", 3400)["args"],
        json!({"pass": {"uint": 1}, "correlation": {"uint": 1}})
    );

    // Instants: nondeterminism, the decline (its dispatch not yet started), the untimed
    // dispatch at submission.
    let instants: Vec<(String, u64, Value)> = d["instants"][queue]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["ts"].as_u64().unwrap(),
                i["args"].clone(),
            )
        })
        .collect();
    assert_eq!(instants.len(), 3, "{instants:?}");
    assert_eq!(
        instants[0],
        (
            "nondeterministic".into(),
            4950,
            json!({
                "pass": {"uint": 1},
                "region": {"pointer": 0x7000_0000u64},
                "offset": {"uint": 12},
                "correlation": {"uint": 1},
            })
        )
    );
    assert_eq!(
        instants[1],
        (
            "replay declined".into(),
            6150,
            json!({"reason": {"string": "uses fine-grained memory"}, "correlation": {"uint": 2}})
        )
    );
    assert_eq!((instants[2].0.as_str(), instants[2].1), ("untimed", 9050));

    // A replay record outside its dispatch goes on the queue's replay track.
    let replay = track(&d, "named", "queue 0x9e00 replay", Some(&device[0]));
    assert_eq!(replay.len(), 1);
    assert_eq!(slices(&d, &replay[0]), [s("snapshot", 6960, 30, 0)]);
    assert_eq!(
        slice(&d, &replay[0], "snapshot", 6960)["args"],
        json!({"bytes": {"uint": 100}, "regions": {"uint": 1}, "correlation": {"uint": 2}}),
        "a record from a tool before the chunk fields gets no mode arguments"
    );

    // The replay record without a dispatch goes on the process's replay track.
    let process = track(&d, "process", "app", None);
    assert_eq!(process.len(), 1);
    let orphan = track(&d, "named", "kreplay replay", Some(&process[0]));
    assert_eq!(orphan.len(), 1);
    assert_eq!(slices(&d, &orphan[0]), [s("pass 0", 7000, 100, 0)]);

    // Flows: exactly one start on the launch slice, one end on the dispatch it produced.
    let flows = d["flows"].as_object().unwrap();
    let mut got: Vec<(String, u64, String, u64)> = flows
        .values()
        .map(|f| {
            assert_eq!(f["from"].as_array().unwrap().len(), 1, "{f}");
            assert_eq!(f["to"].as_array().unwrap().len(), 1, "{f}");
            let (a, b) = (&f["from"][0], &f["to"][0]);
            let on = |r: &Value, t: &str| uuid(&r["track"]) == t;
            assert!(on(a, main) || on(a, worker), "flow starts on a thread: {f}");
            assert!(on(b, queue) || on(b, lane), "flow ends on the queue: {f}");
            (
                a["name"].as_str().unwrap().to_string(),
                a["ts"].as_u64().unwrap(),
                b["name"].as_str().unwrap().to_string(),
                b["ts"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("hipLaunchKernel".into(), 2000, "saxpy".into(), 3000),
            ("hipLaunchKernel".into(), 6000, "reduce".into(), 6500),
            ("hipLaunchKernel".into(), 9000, "untimed".into(), 9050),
            ("hipModuleLaunchKernel".into(), 2100, "gemm".into(), 3500),
        ]
    );
}

#[test]
fn a_tools_launch_call_names_its_kernel_demangled() {
    // What `--cupti-launches` writes: the kernel's name as CUPTI gives it (mangled) under a
    // handle of the tool's, and a cudaLaunchKernel naming that handle.
    let dir = fresh_dir("tool-kernel-name");
    let handle = 0xc000_0000_0000_0001;
    let mut launch = call(7, "cudaLaunchKernel", 1000, 2000);
    if let Record::ApiCall(c) = &mut launch {
        c.args[0] = handle;
    }
    let tool = dir.join("tool-9.krs");
    write_stream(
        &tool,
        StreamKind::Tool,
        &[
            KernelName {
                pid: PID,
                ts_ns: 1000,
                handle,
                name: "_Z4axpyPfS_fi".into(),
            }
            .into(),
            launch,
        ],
        8,
    );
    let out = dir.join("t.pftrace");
    let o = merge(&[&tool], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = decode_trace(&out);
    let t = track(&d, "thread", "thread 7", None);
    assert_eq!(t.len(), 1, "{:?}", d["tracks"]);
    let s = slice(&d, &t[0], "cudaLaunchKernel", 1000);
    assert_eq!(
        s["args"]["kernel"]["string"],
        "axpy(float*, float*, float, int)"
    );
}
