//! Tests of the format versions: a version-1 stream (no pid/tid on the tool's records) still
//! reads, a version-2 body without them is malformed, a version-2 `Restore` reads with no
//! failed regions and a version-3 one must carry them, a newer version is refused by name,
//! a version-6 stream (no GPU descriptions) still reads, a version-7 pass reads with its GPU
//! time unknown and a version-8 one must carry it.

use std::io::Cursor;
use std::path::Path;

use super::*;

/// A stream file with header `version` and one chunk holding `payload`.
fn stream_bytes(version: u16, payload: &[u8]) -> Vec<u8> {
    let mut header = StreamHeader::new(StreamKind::Tool, 31).encode();
    header[8..10].copy_from_slice(&version.to_le_bytes());
    let crc = crc32(&header[..HEADER_LEN - 4]);
    header[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32(payload).to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// `rec` encoded, with the last `cut` body bytes removed (the body length fixed to match).
fn encoded_without_tail(rec: &Record, cut: usize) -> Vec<u8> {
    let mut out = Vec::new();
    codec::encode(rec, &mut out);
    out.truncate(out.len() - cut);
    let body = (out.len() - codec::RECORD_HEADER_LEN) as u32;
    out[1..5].copy_from_slice(&body.to_le_bytes());
    out
}

fn snapshot(pid: u32, tid: u32) -> Snapshot {
    Snapshot {
        correlation: 9,
        start_ns: 100,
        end_ns: 200,
        bytes: 8192,
        regions: 2,
        placement: snapshot_mode::PINNED,
        check: snapshot_mode::HOST_HASH,
        chunk_size: 4096,
        bytes_hashed: 8192,
        pid,
        tid,
    }
}

fn pass(pid: u32, tid: u32) -> ReplayPass {
    timed_pass(pid, tid, 0)
}

fn timed_pass(pid: u32, tid: u32, gpu_ns: u64) -> ReplayPass {
    ReplayPass {
        correlation: 9,
        pass: 1,
        start_ns: 300,
        end_ns: 400,
        pid,
        tid,
        gpu_ns,
    }
}

fn restore(failed: u64) -> Restore {
    Restore {
        correlation: 9,
        pass: 1,
        start_ns: 500,
        end_ns: 600,
        bytes: 4096,
        regions: 1,
        skipped: 0,
        placement: snapshot_mode::PINNED,
        check: snapshot_mode::HOST_HASH,
        bytes_checked: 8192,
        dirty_chunks: 1,
        check_ns: 40,
        pid: 5,
        tid: 6,
        failed,
    }
}

fn read(bytes: &[u8]) -> (Vec<Record>, Option<StreamDamage>) {
    let mut r = StreamReader::new(Cursor::new(bytes), Path::new("old.krs")).unwrap();
    let recs: Vec<Record> = r.by_ref().collect();
    (recs, r.damage().cloned())
}

#[test]
fn a_version_1_stream_reads_with_the_thread_of_the_tools_records_unknown() {
    // Version 1's last Snapshot and ReplayPass bodies: everything but the 8 pid/tid bytes (and
    // the pass's 8-byte GPU time of version 8).
    let mut payload = encoded_without_tail(&snapshot(5, 6).into(), 8);
    payload.extend(encoded_without_tail(&pass(5, 6).into(), 16));
    let bytes = stream_bytes(1, &payload);
    let (recs, damage) = read(&bytes);
    assert_eq!(damage, None);
    assert_eq!(recs, [snapshot(0, 0).into(), pass(0, 0).into()]);
}

#[test]
fn a_version_2_body_without_pid_and_tid_is_malformed_and_the_records_before_it_are_kept() {
    let mut payload = Vec::new();
    codec::encode(&pass(5, 6).into(), &mut payload);
    let bad_at = payload.len();
    payload.extend(encoded_without_tail(&snapshot(5, 6).into(), 8));
    let bytes = stream_bytes(2, &payload);
    let (recs, damage) = read(&bytes);
    assert_eq!(recs, [pass(5, 6).into()]);
    let damage = damage.expect("damage reported");
    assert_eq!(damage.kind, DamageKind::BadRecord { at: bad_at });
    assert_eq!(damage.offset, HEADER_LEN as u64);
    // The same bytes in a version-1 stream are a complete record.
    let (recs, damage) = read(&stream_bytes(1, &payload[bad_at..]));
    assert_eq!((recs, damage), (vec![snapshot(0, 0).into()], None));
}

#[test]
fn a_version_2_stream_carries_the_tools_threads_and_windows() {
    let window = ToolWindow {
        pid: 5,
        tid: 6,
        correlation: 9,
        start_ns: 90,
        end_ns: 410,
    };
    let mut payload = Vec::new();
    for r in [
        Record::from(snapshot(5, 6)),
        pass(5, 6).into(),
        window.clone().into(),
    ] {
        codec::encode(&r, &mut payload);
    }
    let (recs, damage) = read(&stream_bytes(FORMAT_VERSION, &payload));
    assert_eq!(damage, None);
    assert_eq!(
        recs,
        [snapshot(5, 6).into(), pass(5, 6).into(), window.into()]
    );
    assert_eq!(recs[2].timestamp(), 90, "a window merges at its start");
}

#[test]
fn a_stream_of_a_newer_version_is_refused_with_both_versions_named() {
    let bytes = stream_bytes(FORMAT_VERSION + 1, &[]);
    let err = StreamReader::new(Cursor::new(&bytes), Path::new("new.krs"))
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "new.krs: stream format version 9, this reader understands up to 8"
    );
}

#[test]
fn a_version_2_restore_reads_with_no_failed_regions_and_a_version_3_one_must_carry_them() {
    // Version 2's Restore body: everything but version 3's 8-byte failed count.
    let v2 = encoded_without_tail(&restore(3).into(), 8);
    assert_eq!(read(&stream_bytes(2, &v2)), (vec![restore(0).into()], None));
    // The same body in a version-3 stream is cut short.
    let (recs, damage) = read(&stream_bytes(3, &v2));
    assert_eq!(recs, []);
    assert_eq!(
        damage.expect("damage reported").kind,
        DamageKind::BadRecord { at: 0 }
    );
    let mut v3 = Vec::new();
    codec::encode(&restore(3).into(), &mut v3);
    assert_eq!(
        read(&stream_bytes(FORMAT_VERSION, &v3)),
        (vec![restore(3).into()], None)
    );
}

fn dispatch(group_segment: u32, private_segment: u32) -> Dispatch {
    Dispatch {
        pid: 5,
        tid: 6,
        agent: 0xa,
        queue: 0xb,
        kernel: "saxpy".into(),
        correlation: 9,
        kernel_object: 0xc0de,
        grid: [1024, 1, 1],
        workgroup: [256, 1, 1],
        submit_ns: 10,
        start_ns: 20,
        end_ns: 30,
        group_segment,
        private_segment,
    }
}

#[test]
fn a_version_5_dispatch_reads_with_its_segments_unknown_and_a_version_6_one_must_carry_them() {
    // Version 5's Dispatch body: everything but version 6's two u32 segment sizes.
    let v5 = encoded_without_tail(&dispatch(4096, 64).into(), 8);
    assert_eq!(
        read(&stream_bytes(5, &v5)),
        (vec![dispatch(0, 0).into()], None)
    );
    let (recs, damage) = read(&stream_bytes(6, &v5));
    assert_eq!(recs, []);
    assert_eq!(
        damage.expect("damage reported").kind,
        DamageKind::BadRecord { at: 0 }
    );
    // A version-5 writer writes the version-5 body, which a version-5 reader expects.
    let mut old = Vec::new();
    codec::encode_version(&dispatch(4096, 64).into(), 5, &mut old);
    assert_eq!(old, v5);
    let mut v6 = Vec::new();
    codec::encode(&dispatch(4096, 64).into(), &mut v6);
    assert_eq!(
        read(&stream_bytes(FORMAT_VERSION, &v6)),
        (vec![dispatch(4096, 64).into()], None)
    );
}

#[test]
fn a_gpu_copy_round_trips_and_merges_at_its_submit_time() {
    let copy = GpuCopy {
        pid: 5,
        tid: 6,
        device: 0xa,
        engine: 0,
        correlation: 12,
        kind: copy_kind::HOST_TO_DEVICE,
        bytes: 4 << 20,
        submit_ns: 100,
        start_ns: 150,
        end_ns: 900,
    };
    let mut payload = Vec::new();
    codec::encode(&copy.clone().into(), &mut payload);
    // tag, body length, then 4+4+3*8+1+4*8 bytes of fields.
    assert_eq!((payload[0], payload.len()), (17, 5 + 65));
    let (recs, damage) = read(&stream_bytes(FORMAT_VERSION, &payload));
    assert_eq!((recs.clone(), damage), (vec![copy.into()], None));
    assert_eq!(recs[0].timestamp(), 100);
    assert_eq!(copy_kind::name(copy_kind::HOST_TO_DEVICE), "HtoD");
    assert_eq!(copy_kind::name(copy_kind::MEMSET), "memset");
}

fn h200(pid: u32) -> GpuDevice {
    GpuDevice {
        pid,
        device: 0,
        runtime: gpu_runtime::CUDA,
        queues: queue_ids::STREAM_ID,
        ordinal: 0,
        name: "NVIDIA H200".into(),
    }
}

#[test]
fn a_gpu_device_round_trips_timeless_and_a_body_cut_short_is_malformed() {
    let mut payload = Vec::new();
    codec::encode(&h200(5).into(), &mut payload);
    // tag, body length, then pid, device, runtime, queues, ordinal, the name's length and bytes.
    assert_eq!(
        (payload[0], payload.len()),
        (18, 5 + 4 + 8 + 1 + 1 + 4 + 4 + 11)
    );
    let (recs, damage) = read(&stream_bytes(FORMAT_VERSION, &payload));
    assert_eq!((recs.clone(), damage), (vec![h200(5).into()], None));
    assert_eq!(
        (recs[0].timestamp(), recs[0].end_ns(), recs[0].kind()),
        (0, None, "GpuDevice"),
        "merged as soon as seen, as the name records are"
    );
    let cut = encoded_without_tail(&h200(5).into(), 1);
    let (recs, damage) = read(&stream_bytes(FORMAT_VERSION, &cut));
    assert_eq!(recs, []);
    assert_eq!(
        damage.expect("damage reported").kind,
        DamageKind::BadRecord { at: 0 }
    );
}

#[test]
fn a_version_6_stream_without_gpu_descriptions_reads_as_written() {
    // What a version-6 tool wrote for a CUDA kernel and copy: no GpuDevice before them.
    let copy = GpuCopy {
        pid: 5,
        tid: 6,
        device: 0,
        engine: 7,
        correlation: 10,
        kind: copy_kind::HOST_TO_DEVICE,
        bytes: 64,
        submit_ns: 40,
        start_ns: 50,
        end_ns: 60,
    };
    let mut v6 = Vec::new();
    codec::encode_version(&dispatch(4096, 64).into(), 6, &mut v6);
    codec::encode_version(&copy.clone().into(), 6, &mut v6);
    let mut now = Vec::new();
    codec::encode(&dispatch(4096, 64).into(), &mut now);
    codec::encode(&copy.clone().into(), &mut now);
    assert_eq!(v6, now, "version 7 changed no version-6 body");
    assert_eq!(
        read(&stream_bytes(6, &v6)),
        (vec![dispatch(4096, 64).into(), copy.into()], None)
    );
}

#[test]
fn a_version_7_pass_reads_with_its_gpu_time_unknown_and_a_version_8_one_must_carry_it() {
    // Version 7's ReplayPass body: everything but version 8's 8-byte GPU time.
    let v7 = encoded_without_tail(&timed_pass(5, 6, 23_456).into(), 8);
    assert_eq!(read(&stream_bytes(7, &v7)), (vec![pass(5, 6).into()], None));
    let (recs, damage) = read(&stream_bytes(8, &v7));
    assert_eq!(recs, []);
    assert_eq!(
        damage.expect("damage reported").kind,
        DamageKind::BadRecord { at: 0 }
    );
    let mut v8 = Vec::new();
    codec::encode(&timed_pass(5, 6, 23_456).into(), &mut v8);
    assert_eq!(
        read(&stream_bytes(FORMAT_VERSION, &v8)),
        (vec![timed_pass(5, 6, 23_456).into()], None)
    );
}
