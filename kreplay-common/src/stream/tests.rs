//! Round-trip, forward-compatibility and crash-safety tests of the stream format (merging
//! streams: `merge_tests.rs`).

use std::io::Cursor;
use std::path::Path;

use super::*;

/// The `i`th of a run of api calls on three threads, every field derived from `i`.
pub(super) fn api_call(i: u64) -> Record {
    ApiCall {
        pid: 77,
        tid: 1000 + (i % 3) as u32,
        api: (i % 40) as u16,
        enter_ns: 1_000 + i * 10,
        exit_ns: 1_005 + i * 10,
        ret: i,
        args: [i, 1, 2, 3, 4, 5],
        extra: [6, 7, 8, 9, i * 2],
        out: 0xdead_0000 + i,
    }
    .into()
}

/// One record of every type, with distinct field values.
fn one_of_each() -> Vec<Record> {
    vec![
        ProcessName {
            pid: 77,
            name: "python3".into(),
        }
        .into(),
        ThreadName {
            tid: 78,
            name: "worker-ü".into(),
        }
        .into(),
        api_call(5),
        Dispatch {
            pid: 77,
            tid: 78,
            agent: 0xa9e,
            queue: 0x9e,
            kernel: "void gemm<float>(float*, int)".into(),
            correlation: 42,
            kernel_object: 0x7f00_1234,
            grid: [1024, 2, 1],
            workgroup: [256, 1, 1],
            submit_ns: 10,
            start_ns: 20,
            end_ns: 30,
            group_segment: 4096,
            private_segment: 64,
        }
        .into(),
        GpuCopy {
            pid: 77,
            tid: 78,
            device: 0xa9e,
            engine: 0x51,
            correlation: 43,
            kind: copy_kind::DEVICE_TO_HOST,
            bytes: 1 << 20,
            submit_ns: 11,
            start_ns: 31,
            end_ns: 41,
        }
        .into(),
        GpuDevice {
            pid: 77,
            device: 0xa9e,
            runtime: gpu_runtime::HSA,
            queues: queue_ids::HANDLE,
            ordinal: 1,
            name: "AMD Instinct MI300X (gfx942)".into(),
        }
        .into(),
        ReplayPass {
            correlation: 42,
            pass: 3,
            start_ns: 40,
            end_ns: 50,
            pid: 77,
            tid: 79,
            gpu_ns: 7,
        }
        .into(),
        Snapshot {
            correlation: 42,
            start_ns: 31,
            end_ns: 33,
            bytes: 1 << 20,
            regions: 4,
            placement: 2,
            check: 2,
            chunk_size: 65536,
            bytes_hashed: 1 << 20,
            pid: 77,
            tid: 79,
        }
        .into(),
        Restore {
            correlation: 42,
            pass: 3,
            start_ns: 35,
            end_ns: 39,
            bytes: 4096,
            regions: 1,
            skipped: 3,
            placement: 1,
            check: 4,
            bytes_checked: 1 << 20,
            dirty_chunks: 1,
            check_ns: 2,
            pid: 77,
            tid: 79,
            failed: 0,
        }
        .into(),
        Decline {
            correlation: 43,
            ts_ns: 60,
            reason: "uses host-visible memory".into(),
        }
        .into(),
        Nondeterministic {
            correlation: 42,
            pass: 2,
            ts_ns: 55,
            region: 0x1000,
            offset: 12,
        }
        .into(),
        Correlation {
            tid: 78,
            ts_ns: 9,
            external_id: 555,
            correlation: 42,
        }
        .into(),
        Drops {
            ts_ns: 70,
            source: "per-thread".into(),
            count: 17,
        }
        .into(),
        KernelName {
            pid: 7,
            ts_ns: 80,
            handle: 0x4010,
            name: "saxpy(float, float const*, float*, unsigned long)".into(),
        }
        .into(),
        ToolWindow {
            pid: 77,
            tid: 79,
            correlation: 42,
            start_ns: 31,
            end_ns: 51,
        }
        .into(),
        annotation_push(),
    ]
}

fn annotation_push() -> Record {
    Annotation {
        pid: 77,
        tid: 78,
        ts_ns: 61,
        kind: annotation::PUSH,
        source: annotation::NVTX,
        category: 3,
        id: 0,
        domain: "my-lib".into(),
        name: "forward ü".into(),
    }
    .into()
}

#[test]
fn an_annotation_encodes_its_fields_in_order() {
    let mut out = Vec::new();
    codec::encode(&annotation_push(), &mut out);
    let mut want = vec![16u8];
    let body_len = 4 + 4 + 8 + 1 + 1 + 4 + 8 + (4 + 6) + (4 + 10);
    want.extend_from_slice(&(body_len as u32).to_le_bytes());
    want.extend_from_slice(&77u32.to_le_bytes());
    want.extend_from_slice(&78u32.to_le_bytes());
    want.extend_from_slice(&61u64.to_le_bytes());
    want.extend_from_slice(&[1, 2]);
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&0u64.to_le_bytes());
    want.extend_from_slice(&6u32.to_le_bytes());
    want.extend_from_slice(b"my-lib");
    want.extend_from_slice(&10u32.to_le_bytes());
    want.extend_from_slice("forward ü".as_bytes());
    assert_eq!(out, want);
    assert_eq!(
        codec::decode(&out, 0, FORMAT_VERSION),
        codec::Decoded::Record(annotation_push(), out.len())
    );
    assert_eq!(annotation_push().timestamp(), 61);
    // Without its name's bytes the body is malformed.
    let mut short = out[..out.len() - 10].to_vec();
    short[1..5].copy_from_slice(&((body_len - 10) as u32).to_le_bytes());
    assert_eq!(
        codec::decode(&short, 0, FORMAT_VERSION),
        codec::Decoded::Malformed
    );
}

/// A stream of `n` api calls in chunks of about `threshold` bytes; returns bytes and the
/// file offsets where each chunk starts (plus the end of file).
fn write_stream(n: u64, threshold: usize) -> (Vec<u8>, Vec<usize>) {
    let header = StreamHeader::new(StreamKind::Tool, 77);
    let mut w = StreamWriter::new(Vec::new(), &header)
        .unwrap()
        .with_chunk_threshold(threshold);
    for i in 0..n {
        w.push(&api_call(i)).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    // The chunk boundaries, by walking the length fields.
    let mut bounds = vec![HEADER_LEN];
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += CHUNK_HEADER_LEN + len;
        bounds.push(at);
    }
    (bytes, bounds)
}

fn read_all(bytes: &[u8]) -> (Vec<Record>, Option<StreamDamage>) {
    let mut r = StreamReader::new(Cursor::new(bytes), Path::new("t.krs")).unwrap();
    let recs: Vec<Record> = r.by_ref().collect();
    (recs, r.damage().cloned())
}

#[test]
fn every_record_type_round_trips() {
    let header = StreamHeader::new(StreamKind::Probes, 4242);
    let mut w = StreamWriter::new(Vec::new(), &header).unwrap();
    for r in one_of_each() {
        w.push(&r).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    let mut r = StreamReader::new(Cursor::new(&bytes), Path::new("p.krs")).unwrap();
    assert_eq!(r.header(), &header);
    assert_eq!(r.header().clock_id, CLOCK_MONOTONIC_ID);
    let got: Vec<Record> = r.by_ref().collect();
    assert_eq!(got, one_of_each());
    assert_eq!(r.damage(), None);
    assert_eq!(r.chunks_read(), 1);
}

#[test]
fn api_call_encodes_to_its_fixed_size_in_a_version_3_stream() {
    let mut out = Vec::new();
    codec::encode_version(&api_call(1), 3, &mut out);
    // tag + len, pid + tid + api, 3 times, 6 args, 5 extras, out.
    assert_eq!(out.len(), 5 + (4 + 4 + 2) + 3 * 8 + 6 * 8 + 5 * 8 + 8);
    assert_eq!(out[0], 3);
    assert_eq!(u32::from_le_bytes(out[1..5].try_into().unwrap()), 130);
}

#[test]
fn api_call_decodes_every_field_and_ignores_appended_bytes_but_not_missing_ones() {
    let rec = ApiCall {
        pid: 0x0102_0304,
        tid: 0x0506_0708,
        api: 0x090a,
        enter_ns: 11,
        exit_ns: 12,
        ret: u64::MAX - 1,
        args: [21, 22, 23, 24, 25, 26],
        extra: [31, 32, 33, 34, 35],
        out: 0x7f00_0000_0041,
    };
    let mut out = Vec::new();
    codec::encode_version(&rec.clone().into(), 3, &mut out);
    assert_eq!(
        codec::decode(&out, 0, 3),
        codec::Decoded::Record(rec.clone().into(), out.len())
    );
    // A newer writer's appended field: skipped.
    let mut longer = out.clone();
    longer[1..5].copy_from_slice(&134u32.to_le_bytes());
    longer.extend_from_slice(&[0xee; 4]);
    assert_eq!(
        codec::decode(&longer, 0, 3),
        codec::Decoded::Record(rec.into(), longer.len())
    );
    // One byte short of the fields: malformed.
    let mut shorter = out[..out.len() - 1].to_vec();
    shorter[1..5].copy_from_slice(&129u32.to_le_bytes());
    assert_eq!(codec::decode(&shorter, 0, 3), codec::Decoded::Malformed);
}

#[test]
fn a_version_1_restore_body_without_the_chunk_fields_decodes_with_zeros() {
    let full = Restore {
        correlation: 5,
        pass: 1,
        start_ns: 10,
        end_ns: 20,
        bytes: 4096,
        regions: 1,
        skipped: 0,
        placement: snapshot_mode::PINNED,
        check: snapshot_mode::HOST_HASH,
        bytes_checked: 8192,
        dirty_chunks: 1,
        check_ns: 7,
        pid: 0,
        tid: 0,
        failed: 0,
    };
    let mut out = Vec::new();
    codec::encode(&full.clone().into(), &mut out);
    // The first version-1 body: correlation u64, pass u32, five u64s; the 26 bytes appended
    // later in version 1, version 2's pid and tid and version 3's failed count cut off.
    let v1_len = 8 + 4 + 5 * 8;
    assert_eq!(out.len(), 5 + v1_len + 2 + 3 * 8 + 2 * 4 + 8);
    out.truncate(5 + v1_len);
    out[1..5].copy_from_slice(&(v1_len as u32).to_le_bytes());
    let want = Restore {
        placement: 0,
        check: 0,
        bytes_checked: 0,
        dirty_chunks: 0,
        check_ns: 0,
        ..full
    };
    assert_eq!(
        codec::decode(&out, 0, 1),
        codec::Decoded::Record(want.into(), out.len())
    );
    assert_eq!(snapshot_mode::label(2, 2), "pinned/host-hash");
}

#[test]
fn unknown_tags_and_appended_fields_are_skipped() {
    // Hand-build a chunk: an unknown tag 200, then a Correlation with 3 extra trailing bytes.
    let mut payload = vec![200u8];
    payload.extend_from_slice(&4u32.to_le_bytes());
    payload.extend_from_slice(&[1, 2, 3, 4]);
    let mut corr = Vec::new();
    let rec: Record = Correlation {
        tid: 1,
        ts_ns: 2,
        external_id: 3,
        correlation: 4,
    }
    .into();
    codec::encode(&rec, &mut corr);
    let body_len = u32::from_le_bytes(corr[1..5].try_into().unwrap()) + 3;
    corr[1..5].copy_from_slice(&body_len.to_le_bytes());
    corr.extend_from_slice(&[9, 9, 9]);
    payload.extend_from_slice(&corr);
    let mut bytes = StreamHeader::new(StreamKind::Tool, 1).encode().to_vec();
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32(&payload).to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&payload);
    let mut r = StreamReader::new(Cursor::new(&bytes), Path::new("f.krs")).unwrap();
    assert_eq!(r.peek_timestamp(), Some(2));
    assert_eq!(r.next(), Some(rec));
    assert_eq!(r.next(), None);
    assert_eq!(r.unknown_skipped(), 1);
    assert_eq!(r.damage(), None);
}

#[test]
fn header_errors_name_the_file() {
    let mut bytes = StreamHeader::new(StreamKind::Tool, 1).encode().to_vec();
    bytes[8] = 10; // version 10
    let err = StreamReader::new(Cursor::new(&bytes), Path::new("v.krs"))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "v.krs: stream format version 10, this reader understands up to 8"
    );
    let err = StreamReader::new(Cursor::new(b"NOTASTREAM__"), Path::new("m.krs"))
        .err()
        .unwrap();
    assert!(matches!(err, StreamError::BadMagic { .. }), "{err}");
    let mut bytes = StreamHeader::new(StreamKind::Tool, 1).encode().to_vec();
    bytes[17] ^= 1; // pid byte: header checksum must catch it
    let err = StreamReader::new(Cursor::new(&bytes), Path::new("c.krs"))
        .err()
        .unwrap();
    assert!(matches!(err, StreamError::BadHeader { .. }), "{err}");
}

#[test]
fn a_header_on_another_clock_is_refused_by_name() {
    let mut h = StreamHeader::new(StreamKind::Probes, 7);
    h.clock_id = 7; // CLOCK_BOOTTIME
    let err = StreamReader::new(Cursor::new(h.encode().to_vec()), Path::new("b.krs"))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "b.krs: stream timestamps use clock id 7; this reader knows only 1 (CLOCK_MONOTONIC)"
    );
}

#[test]
fn truncation_at_every_offset_of_the_last_chunk_keeps_the_complete_chunks() {
    let (bytes, bounds) = write_stream(200, 2048);
    let chunks = bounds.len() - 1;
    assert!(chunks >= 4, "want several chunks, got {chunks}");
    let (all, damage) = read_all(&bytes);
    assert_eq!(all.len(), 200);
    assert_eq!(damage, None);
    let last_start = bounds[chunks - 1];
    // Records in the complete chunks before the last one.
    let (kept_expected, _) = read_all(&bytes[..last_start]);
    assert!(kept_expected.len() < 200 && !kept_expected.is_empty());
    assert_eq!(kept_expected[..], all[..kept_expected.len()]);
    for cut in last_start + 1..bytes.len() {
        let (got, damage) = read_all(&bytes[..cut]);
        assert_eq!(got, kept_expected, "cut at {cut}");
        let damage = damage.unwrap_or_else(|| panic!("no damage reported for cut at {cut}"));
        assert_eq!(damage.offset, last_start as u64, "cut at {cut}");
        assert_eq!(damage.chunks_kept, (chunks - 1) as u64);
        assert_eq!(damage.path, Path::new("t.krs"));
        let have = (cut - last_start) as u64;
        if have < CHUNK_HEADER_LEN as u64 {
            assert_eq!(damage.kind, DamageKind::TornChunkHeader { have });
        } else {
            let expected = (bytes.len() - last_start - CHUNK_HEADER_LEN) as u32;
            let have = have - CHUNK_HEADER_LEN as u64;
            assert_eq!(damage.kind, DamageKind::TornPayload { expected, have });
        }
    }
    // Cut exactly at a chunk boundary: clean end, no damage.
    let (got, damage) = read_all(&bytes[..last_start]);
    assert_eq!((got.len(), damage), (kept_expected.len(), None));
}

#[test]
fn a_corrupt_byte_in_a_middle_chunk_stops_there_and_reports_its_offset() {
    let (mut bytes, bounds) = write_stream(200, 2048);
    let mid = (bounds.len() - 1) / 2;
    let (start, end) = (bounds[mid], bounds[mid + 1]);
    let (before, _) = read_all(&bytes[..start]);
    bytes[(start + CHUNK_HEADER_LEN + end) / 2] ^= 0x40;
    let (got, damage) = read_all(&bytes);
    assert_eq!(got, before);
    let damage = damage.unwrap();
    assert_eq!(damage.offset, start as u64);
    assert_eq!(damage.chunks_kept, mid as u64);
    assert!(
        matches!(damage.kind, DamageKind::ChecksumMismatch { .. }),
        "{:?}",
        damage.kind
    );
    assert!(
        damage
            .to_string()
            .starts_with("t.krs: chunk checksum mismatch"),
        "{damage}"
    );
    assert!(
        damage
            .to_string()
            .contains(&format!("at byte offset {start};")),
        "{damage}"
    );
}

#[test]
fn a_repeated_chunk_is_a_sequence_gap() {
    let (bytes, bounds) = write_stream(60, 1024);
    let mut doubled = bytes[..bounds[2]].to_vec();
    doubled.extend_from_slice(&bytes[bounds[1]..bounds[2]]);
    let (got, damage) = read_all(&doubled);
    let (two_chunks, _) = read_all(&bytes[..bounds[2]]);
    assert_eq!(got, two_chunks);
    let damage = damage.unwrap();
    assert_eq!(
        damage.kind,
        DamageKind::SequenceGap {
            expected: 2,
            found: 1
        }
    );
    assert_eq!(damage.offset, bounds[2] as u64);
}

#[test]
fn a_huge_length_field_is_rejected_without_allocating_it() {
    let (mut bytes, bounds) = write_stream(30, 1024);
    bytes[bounds[1]..bounds[1] + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, damage) = read_all(&bytes);
    assert_eq!(
        damage.unwrap().kind,
        DamageKind::BadLength { len: u32::MAX }
    );
}

#[test]
fn peek_does_not_consume() {
    let (bytes, _) = write_stream(3, 1024);
    let mut r = StreamReader::new(Cursor::new(&bytes), Path::new("t.krs")).unwrap();
    assert_eq!(r.peek_timestamp(), Some(1_000));
    assert_eq!(r.peek_timestamp(), Some(1_000));
    assert_eq!(r.next().map(|r| r.timestamp()), Some(1_000));
    assert_eq!(r.peek_timestamp(), Some(1_010));
    assert_eq!(r.by_ref().count(), 2);
    assert_eq!(r.peek_timestamp(), None);
}

#[test]
fn long_strings_are_cut_at_a_char_boundary() {
    let name = "é".repeat(codec::MAX_STRING); // 2 bytes each
    let mut out = Vec::new();
    codec::encode(&ThreadName { tid: 1, name }.into(), &mut out);
    match codec::decode(&out, 0, FORMAT_VERSION) {
        codec::Decoded::Record(Record::ThreadName(t), next) => {
            assert_eq!(t.name.len(), codec::MAX_STRING);
            assert_eq!(next, out.len());
        }
        other => panic!("{other:?}"),
    }
}
