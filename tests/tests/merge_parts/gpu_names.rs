//! GPU track names from the tool's device descriptions (`GpuDevice`, stream version 7): a CUDA
//! device named as Nsight Systems names it, its streams by handle (`kreplay replay`'s launches)
//! with their copy and replay tracks, an HSA agent with its product name, an undescribed
//! agent and a version-6 stream's CUDA work under the agent and queue names.
use kreplay_common::stream::{
    Dispatch, GpuCopy, GpuDevice, Record, ReplayPass, StreamHeader, StreamKind, StreamWriter,
    UNKNOWN_ORDINAL, copy_kind, gpu_runtime, queue_ids,
};
use kreplay_tests::decode_trace;
use kreplay_tests::trace_json::gpu_groups;
use serde_json::json;

use super::{MAIN, PID, fresh_dir, merge, names, slices, stderr, track, write_stream};

fn kernel(agent: u64, queue: u64, correlation: u64, start_ns: u64) -> Record {
    Dispatch {
        pid: PID,
        tid: MAIN,
        agent,
        queue,
        kernel: format!("k{correlation}"),
        correlation,
        kernel_object: 0,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        submit_ns: start_ns - 50,
        start_ns,
        end_ns: start_ns + 100,
        group_segment: 0,
        private_segment: 0,
    }
    .into()
}

fn copy(device: u64, engine: u64, correlation: u64, start_ns: u64) -> Record {
    GpuCopy {
        pid: PID,
        tid: MAIN,
        device,
        engine,
        correlation,
        kind: copy_kind::HOST_TO_DEVICE,
        bytes: 4096,
        submit_ns: start_ns - 50,
        start_ns,
        end_ns: start_ns + 100,
    }
    .into()
}

/// (group name, its tracks' names) of every GPU group, sorted by name.
fn groups(d: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = gpu_groups(d)
        .into_iter()
        .map(|g| (g.name, g.tracks))
        .collect();
    v.sort();
    v
}

#[test]
fn described_devices_name_their_tracks_by_their_runtime() {
    let dir = fresh_dir("gpu_names");
    let mut tool = names(MAIN, "main");
    tool.extend([
        GpuDevice {
            pid: PID,
            device: 0,
            runtime: gpu_runtime::CUDA,
            queues: queue_ids::HANDLE,
            ordinal: 0,
            name: "NVIDIA H200".into(),
        }
        .into(),
        GpuDevice {
            pid: PID,
            device: 0x5a00,
            runtime: gpu_runtime::HSA,
            queues: queue_ids::HANDLE,
            ordinal: UNKNOWN_ORDINAL,
            name: "AMD Instinct MI300X (gfx942)".into(),
        }
        .into(),
        kernel(0, 0x9e00, 1, 1100),
        kernel(0, 0, 2, 1300),
        copy(0, 0x9e00, 3, 1500),
        // After its dispatch ended: on its stream's replay track.
        ReplayPass {
            correlation: 1,
            pass: 0,
            start_ns: 1700,
            end_ns: 1750,
            pid: PID,
            tid: MAIN,
            gpu_ns: 0,
        }
        .into(),
        kernel(0x5a00, 0x7700, 4, 1900),
        copy(0x5a00, 0, 5, 2100),
        kernel(0x6b00, 0x7, 6, 2300),
    ]);
    let path = dir.join("tool-500.krs");
    write_stream(&path, StreamKind::Tool, &tool, 4);
    let out = dir.join("out.pftrace");
    let o = merge(&[&path], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]));
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        groups(&d),
        [
            (
                "GPU 0: NVIDIA H200 (app 500)".to_owned(),
                strs(&[
                    "GPU busy %",
                    "default stream",
                    "stream 0x9e00",
                    "stream 0x9e00 copies",
                    "stream 0x9e00 replay",
                ])
            ),
            (
                "GPU agent 0x5a00: AMD Instinct MI300X (gfx942) (app 500)".to_owned(),
                strs(&["GPU busy %", "copies", "queue 0x7700"])
            ),
            (
                "GPU agent 0x6b00 (app 500)".to_owned(),
                strs(&["GPU busy %", "queue 0x7"])
            ),
        ]
    );
    let on = |name: &str| {
        let t = track(&d, "named", name, None);
        assert_eq!(t.len(), 1, "{name}");
        slices(&d, &t[0])
            .into_iter()
            .map(|(n, ts, ..)| (n, ts))
            .collect::<Vec<_>>()
    };
    assert_eq!(on("stream 0x9e00"), [("k1".to_owned(), 1100)]);
    assert_eq!(on("default stream"), [("k2".to_owned(), 1300)]);
    assert_eq!(on("stream 0x9e00 copies"), [("copy HtoD".to_owned(), 1500)]);
    assert_eq!(on("stream 0x9e00 replay"), [("pass 0".to_owned(), 1700)]);
    assert_eq!(on("queue 0x7700"), [("k4".to_owned(), 1900)]);
    assert_eq!(on("copies"), [("copy HtoD".to_owned(), 2100)]);
    assert_eq!(on("queue 0x7"), [("k6".to_owned(), 2300)]);
}

#[test]
fn a_version_6_stream_names_cuda_work_as_an_hsa_agents() {
    let dir = fresh_dir("gpu_names_v6");
    let path = dir.join("tool-500.krs");
    let mut header = StreamHeader::new(StreamKind::Tool, PID);
    header.version = 6;
    let mut w = StreamWriter::create(&path, &header).unwrap();
    let mut recs = names(MAIN, "main");
    // What a version-6 tool wrote for CUPTI's records: device ordinal 0, stream id 7.
    recs.extend([kernel(0, 7, 1, 1100), copy(0, 7, 2, 1300)]);
    for r in &recs {
        w.push(r).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let out = dir.join("out.pftrace");
    let o = merge(&[&path], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]));
    assert_eq!(
        groups(&d),
        [(
            "GPU agent 0x0 (app 500)".to_owned(),
            ["GPU busy %", "copies 0x7", "queue 0x7"]
                .map(str::to_owned)
                .to_vec()
        )]
    );
}
