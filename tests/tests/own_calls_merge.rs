//! `kreplay merge` of synthesized streams: the tool's windows (written when they end, after
//! the calls they cover, as the tool does) move exactly the calls made inside them on their
//! thread to that thread's "kreplay (replay)" track; other threads' calls, the enclosing
//! launch and the application's allocations stay the application's; a version-1 tool stream
//! (no threads on its records) moves nothing.
use std::path::Path;
use std::process::Command;

use kreplay_common::api::id_of;
use kreplay_common::stream::{
    ApiCall, ProcessName, Record, ReplayPass, Restore, Snapshot, StreamHeader, StreamKind,
    StreamWriter, ThreadName, ToolWindow,
};
use kreplay_tests::{decode_trace, kreplay_bin, scratch};
use serde_json::Value;

const PID: u32 = 700;
const MAIN: u32 = 701;
const WORKER: u32 = 702;
const POOL: u64 = 0x9000;

fn call(tid: u32, api: &str, enter_ns: u64, exit_ns: u64, size: u64, ptr: u64) -> Record {
    let mut args = [0u64; 6];
    let mut out = 0;
    match api {
        "hsa_amd_memory_pool_allocate" => {
            args[0] = POOL;
            args[1] = size;
            out = ptr;
        }
        "hsa_amd_memory_pool_free" => args[0] = ptr,
        "hsa_amd_memory_async_copy" => args[4] = size,
        _ => {}
    }
    ApiCall {
        pid: PID,
        tid,
        api: id_of(api).unwrap(),
        enter_ns,
        exit_ns,
        ret: 0,
        args,
        extra: [0; 5],
        out,
    }
    .into()
}

fn write(path: &Path, kind: StreamKind, version: u16, records: &[Record]) {
    let mut header = StreamHeader::new(kind, PID);
    header.version = version;
    let mut w = StreamWriter::create(path, &header).unwrap();
    for r in records {
        w.push(r).unwrap();
    }
    w.flush().unwrap();
}

/// The tool's records of one replay on MAIN over [90, 520], in the order the tool writes
/// them: each when it ends, the window last.
fn tool_records(tid: u32) -> Vec<Record> {
    vec![
        Snapshot {
            correlation: 1,
            start_ns: 100,
            end_ns: 200,
            bytes: 1 << 20,
            regions: 1,
            placement: 2,
            check: 2,
            chunk_size: 65536,
            bytes_hashed: 1 << 20,
            pid: PID,
            tid,
        }
        .into(),
        ReplayPass {
            correlation: 1,
            pass: 0,
            start_ns: 210,
            end_ns: 300,
            pid: PID,
            tid,
            gpu_ns: 0,
        }
        .into(),
        Restore {
            correlation: 1,
            pass: 1,
            start_ns: 310,
            end_ns: 400,
            bytes: 65536,
            regions: 1,
            skipped: 0,
            placement: 2,
            check: 2,
            bytes_checked: 1 << 20,
            dirty_chunks: 1,
            check_ns: 10,
            pid: PID,
            tid,
            failed: 0,
        }
        .into(),
        ReplayPass {
            correlation: 1,
            pass: 1,
            start_ns: 410,
            end_ns: 500,
            pid: PID,
            tid,
            gpu_ns: 0,
        }
        .into(),
    ]
}

/// MAIN's calls in return order (as the probes write them): kreplay's inside the launch that
/// it replayed, then the launch, then the application's allocation and kreplay's late free.
fn main_calls() -> Vec<Record> {
    let mut v: Vec<Record> = vec![
        ProcessName {
            pid: PID,
            name: "app".into(),
        }
        .into(),
        ThreadName {
            tid: MAIN,
            name: "main".into(),
        }
        .into(),
    ];
    v.extend([
        // kreplay's snapshot copy: inside the window, before the snapshot record's span.
        call(
            MAIN,
            "hsa_amd_memory_pool_allocate",
            95,
            99,
            1 << 20,
            0xd000,
        ),
        call(MAIN, "hsa_amd_memory_async_copy", 120, 150, 1 << 20, 0),
        // Hashing pass 0's output, between the pass and the restore.
        call(MAIN, "hsa_amd_memory_async_copy", 302, 308, 1 << 20, 0),
        // Exactly on the window's edges.
        call(MAIN, "hsa_queue_create", 90, 520, 0, 0),
        call(MAIN, "hipLaunchKernel", 80, 600, 0, 0),
        call(MAIN, "hsa_amd_memory_pool_allocate", 610, 620, 4096, 0xa000),
        // kreplay's buffer freed long after its window (a kept arena).
        call(MAIN, "hsa_amd_memory_pool_free", 700, 710, 0, 0xd000),
    ]);
    v
}

fn worker_calls() -> Vec<Record> {
    vec![
        ThreadName {
            tid: WORKER,
            name: "worker".into(),
        }
        .into(),
        // During the window, on another thread: the application's.
        call(WORKER, "hsa_amd_memory_async_copy", 150, 160, 512, 0),
    ]
}

fn merged(name: &str, version: u16) -> (Value, String) {
    let dir = scratch("own-calls-merge").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut tool = tool_records(MAIN);
    if version >= 2 {
        tool.push(
            ToolWindow {
                pid: PID,
                tid: MAIN,
                correlation: 1,
                start_ns: 90,
                end_ns: 520,
            }
            .into(),
        );
    }
    write(&dir.join("tool.krs"), StreamKind::Tool, version, &tool);
    write(&dir.join("main.krs"), StreamKind::Probes, 2, &main_calls());
    write(
        &dir.join("worker.krs"),
        StreamKind::Probes,
        2,
        &worker_calls(),
    );
    let trace = dir.join("out.pftrace");
    let out = Command::new(kreplay_bin())
        .arg("merge")
        .arg(dir.join("main.krs"))
        .arg(dir.join("worker.krs"))
        .arg(dir.join("tool.krs"))
        .arg("-o")
        .arg(&trace)
        .output()
        .expect("run kreplay merge");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = decode_trace(&trace);
    assert_eq!(d["errors"], serde_json::json!([]), "decoder errors");
    (d, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn track(d: &Value, kind: &str, name: &str) -> Option<String> {
    let found: Vec<String> = d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == kind && t["name"] == name)
        .map(|(u, _)| u.clone())
        .collect();
    assert!(found.len() <= 1, "{found:?}");
    found.into_iter().next()
}

/// (name, ts, depth) of a track's slices.
fn slices(d: &Value, uuid: &str) -> Vec<(String, u64, u64)> {
    d["slices"][uuid]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["ts"].as_u64().unwrap(),
                s["depth"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn s(name: &str, ts: u64, depth: u64) -> (String, u64, u64) {
    (name.to_owned(), ts, depth)
}

fn live_bytes(d: &Value) -> Vec<i64> {
    let t = track(d, "counter", &format!("live bytes (HSA pool {POOL:#x})")).unwrap();
    d["counters"][&t]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .collect()
}

#[test]
fn calls_inside_the_tools_window_on_its_thread_move_to_the_kreplay_track() {
    let (d, stderr) = merged("v2", 2);
    let main = track(&d, "thread", "main").unwrap();
    let worker = track(&d, "thread", "worker").unwrap();
    let own = track(&d, "named", "kreplay (replay)").unwrap();
    assert_eq!(d["tracks"][&own]["parent"].to_string(), main);
    assert_eq!(
        slices(&d, &main),
        [
            s("hipLaunchKernel", 80, 0),
            s("hsa_amd_memory_pool_allocate", 610, 0)
        ]
    );
    assert_eq!(
        slices(&d, &own),
        [
            s("hsa_queue_create", 90, 0),
            s("hsa_amd_memory_pool_allocate", 95, 1),
            s("hsa_amd_memory_async_copy", 120, 1),
            s("hsa_amd_memory_async_copy", 302, 1),
            s("hsa_amd_memory_pool_free", 700, 0),
        ]
    );
    assert_eq!(
        slices(&d, &worker),
        [s("hsa_amd_memory_async_copy", 150, 0)]
    );
    // The application's 4096 bytes only: kreplay's MiB never counted.
    assert_eq!(live_bytes(&d), [4096]);
    assert!(
        stderr.contains(
            "kreplay: kreplay's own runtime calls (on the \"kreplay (replay)\" tracks): \
             hsa_amd_memory_async_copy x2, hsa_amd_memory_pool_allocate x1, \
             hsa_amd_memory_pool_free x1, hsa_queue_create x1\n"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("out of order"), "{stderr}");
}

#[test]
fn a_version_1_tool_stream_moves_nothing() {
    let (d, stderr) = merged("v1", 1);
    assert!(!stderr.contains("own runtime calls"), "{stderr}");
    assert_eq!(track(&d, "named", "kreplay (replay)"), None);
    let main = track(&d, "thread", "main").unwrap();
    assert_eq!(slices(&d, &main).len(), 7);
    assert_eq!(live_bytes(&d), [1 << 20, (1 << 20) + 4096, 4096]);
}

#[test]
fn a_window_further_out_of_order_than_the_merge_reorders_is_warned_about() {
    let dir = scratch("own-calls-merge").join("late");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // More records than the merge's reorder window of a tool stream between the window's start
    // and the window record.
    let n = kreplay_common::stream::TOOL_WINDOW as u64 + 76;
    let mut tool: Vec<Record> = (0..n)
        .map(|i| {
            kreplay_common::stream::Decline {
                correlation: 2 + i,
                ts_ns: 1000 + i,
                reason: "busy".into(),
            }
            .into()
        })
        .collect();
    tool.push(
        ToolWindow {
            pid: PID,
            tid: MAIN,
            correlation: 1,
            start_ns: 90,
            end_ns: 5000,
        }
        .into(),
    );
    write(&dir.join("tool.krs"), StreamKind::Tool, 2, &tool);
    let main = [
        call(MAIN, "hsa_amd_memory_async_copy", 95, 99, 64, 0),
        call(MAIN, "hsa_amd_memory_async_copy", 2200, 2210, 64, 0),
    ];
    write(&dir.join("main.krs"), StreamKind::Probes, 2, &main);
    let trace = dir.join("out.pftrace");
    let out = Command::new(kreplay_bin())
        .arg("merge")
        .arg(dir.join("tool.krs"))
        .arg(dir.join("main.krs"))
        .arg("-o")
        .arg(&trace)
        .output()
        .expect("run kreplay merge");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "kreplay: warning: 1 of the tool's windows arrived out of order: calls kreplay made \
             before them may show as the application's\n"
        ),
        "{stderr}"
    );
    let d = decode_trace(&trace);
    // The call merged before its window could not be known as kreplay's; the one after it is.
    let thread = track(&d, "thread", "thread 701").unwrap();
    let own = track(&d, "named", "kreplay (replay)").unwrap();
    assert_eq!(slices(&d, &thread), [s("hsa_amd_memory_async_copy", 95, 0)]);
    assert_eq!(slices(&d, &own), [s("hsa_amd_memory_async_copy", 2200, 0)]);
}
