//! Tests of the packed `ApiCall` (tag 15, format version 4): its exact bytes, round trips with
//! any words present, older-version writers keeping the full form, and damaged or truncated
//! packed records.

use std::io::Cursor;
use std::path::Path;

use super::codec::{Decoded, RECORD_HEADER_LEN};
use super::*;

fn call(ret: u64, args: [u64; 6], extra: [u64; 5], out: u64) -> ApiCall {
    ApiCall {
        pid: 0x0102_0304,
        tid: 0x0506_0708,
        api: 0x090a,
        enter_ns: 0x1112_1314_1516_1718,
        exit_ns: 0x2122_2324_2526_2728,
        ret,
        args,
        extra,
        out,
    }
}

fn packed(c: &ApiCall) -> Vec<u8> {
    let mut out = Vec::new();
    codec::encode(&c.clone().into(), &mut out);
    out
}

fn read_all(bytes: &[u8]) -> (Vec<Record>, Option<StreamDamage>) {
    let mut r = StreamReader::new(Cursor::new(bytes), Path::new("p.krs")).unwrap();
    let recs: Vec<Record> = r.by_ref().collect();
    (recs, r.damage().cloned())
}

/// A stream of `header_version` holding `payload` in one chunk.
fn one_chunk(header_version: u16, payload: &[u8]) -> Vec<u8> {
    let mut header = StreamHeader::new(StreamKind::Probes, 9);
    header.version = header_version;
    let mut bytes = header.encode().to_vec();
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32(payload).to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn a_call_with_no_nonzero_word_packs_to_33_bytes() {
    let c = call(0, [0; 6], [0; 5], 0);
    let out = packed(&c);
    let mut want = vec![15u8, 28, 0, 0, 0];
    want.extend_from_slice(&0x0102_0304u32.to_le_bytes());
    want.extend_from_slice(&0x0506_0708u32.to_le_bytes());
    want.extend_from_slice(&0x090au16.to_le_bytes());
    want.extend_from_slice(&0x1112_1314_1516_1718u64.to_le_bytes());
    want.extend_from_slice(&0x2122_2324_2526_2728u64.to_le_bytes());
    want.extend_from_slice(&[0, 0]);
    assert_eq!(out, want);
    assert_eq!(out.len(), 33);
    assert_eq!(codec::decode(&out, 0, 4), Decoded::Record(c.into(), 33));
}

#[test]
fn only_the_nonzero_words_are_written_in_ret_args_extra_out_order() {
    let c = call(7, [0, 0x41, 0, 0, 0, 0x42], [0, 0, 0x51, 0, 0], 0x61);
    let out = packed(&c);
    // ret (bit 0), args[1] (bit 2), args[5] (bit 6), extra[2] (bit 9), out (bit 12).
    let mask: u16 = 1 | 1 << 2 | 1 << 6 | 1 << 9 | 1 << 12;
    assert_eq!(
        out[RECORD_HEADER_LEN + 26..RECORD_HEADER_LEN + 28],
        mask.to_le_bytes()
    );
    assert_eq!(
        u32::from_le_bytes(out[1..5].try_into().unwrap()),
        28 + 5 * 8
    );
    let words: Vec<u64> = out[RECORD_HEADER_LEN + 28..]
        .chunks(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(words, [7, 0x41, 0x42, 0x51, 0x61]);
    assert_eq!(codec::decode(&out, 0, 4), Decoded::Record(c.into(), 73));
}

#[test]
fn a_call_with_every_word_set_round_trips_two_bytes_longer_than_the_full_form() {
    let c = call(u64::MAX, [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11], 12);
    let out = packed(&c);
    assert_eq!(out.len(), RECORD_HEADER_LEN + 28 + 13 * 8);
    assert_eq!(out.len(), 137);
    assert_eq!(codec::decode(&out, 0, 4), Decoded::Record(c.into(), 137));
}

#[test]
fn a_writer_of_version_3_writes_the_full_form_and_one_of_version_4_the_packed_one() {
    let c = call(0, [0x10, 0, 0, 0, 0, 0], [0; 5], 0);
    let sizes: Vec<(u16, usize, Vec<Record>)> = [3u16, 4]
        .into_iter()
        .map(|version| {
            let mut header = StreamHeader::new(StreamKind::Probes, 9);
            header.version = version;
            let mut w = StreamWriter::new(Vec::new(), &header).unwrap();
            w.push(&c.clone().into()).unwrap();
            let bytes = w.into_inner().unwrap();
            let len = bytes.len() - HEADER_LEN - CHUNK_HEADER_LEN;
            assert_eq!(
                bytes[HEADER_LEN + CHUNK_HEADER_LEN],
                [3, 15][version as usize - 3]
            );
            let (recs, damage) = read_all(&bytes);
            assert_eq!(damage, None);
            (version, len, recs)
        })
        .collect();
    let rec: Record = c.into();
    assert_eq!(
        sizes,
        [(3, 135, vec![rec.clone()]), (4, 41, vec![rec.clone()])]
    );
}

#[test]
fn appending_to_a_version_3_stream_keeps_writing_the_full_form() {
    let path = std::env::temp_dir().join(format!("kreplay-packed-{}.krs", std::process::id()));
    let mut header = StreamHeader::new(StreamKind::Probes, 9);
    header.version = 3;
    let c = call(0, [0; 6], [0; 5], 0);
    let mut w = StreamWriter::create(&path, &header).unwrap();
    w.push(&c.clone().into()).unwrap();
    w.flush().unwrap();
    let chunks = w.chunks_written();
    drop(w);
    let mut w = StreamWriter::append(&path, chunks).unwrap();
    w.push(&c.clone().into()).unwrap();
    w.flush().unwrap();
    drop(w);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    // Two chunks of one 135-byte full record each.
    assert_eq!(bytes.len(), HEADER_LEN + 2 * (CHUNK_HEADER_LEN + 135));
    assert_eq!(read_all(&bytes), (vec![c.clone().into(), c.into()], None));
}

#[test]
fn a_packed_body_short_of_its_words_is_malformed_and_the_records_before_it_are_kept() {
    let whole = call(1, [2, 0, 0, 0, 0, 0], [0; 5], 3);
    let mut payload = packed(&whole);
    let bad_at = payload.len();
    // The mask names three words; the body carries two.
    let mut cut = packed(&whole);
    cut.truncate(cut.len() - 8);
    let body = (cut.len() - RECORD_HEADER_LEN) as u32;
    cut[1..5].copy_from_slice(&body.to_le_bytes());
    assert_eq!(codec::decode(&cut, 0, 4), Decoded::Malformed);
    payload.extend_from_slice(&cut);
    let (recs, damage) = read_all(&one_chunk(4, &payload));
    assert_eq!(recs, [whole.into()]);
    let damage = damage.expect("damage reported");
    assert_eq!(damage.kind, DamageKind::BadRecord { at: bad_at });
    assert_eq!(damage.offset, HEADER_LEN as u64);
    // A body shorter than the fixed fields is malformed too.
    let mut tiny = vec![15u8];
    tiny.extend_from_slice(&27u32.to_le_bytes());
    tiny.extend_from_slice(&[0; 27]);
    assert_eq!(codec::decode(&tiny, 0, 4), Decoded::Malformed);
}

#[test]
fn mask_bits_above_the_known_words_and_their_words_are_skipped() {
    let c = call(5, [0; 6], [0; 5], 0);
    let mut out = packed(&c);
    // A newer writer's word 13, after the known ones.
    let mask: u16 = 1 | 1 << 13;
    out[RECORD_HEADER_LEN + 26..RECORD_HEADER_LEN + 28].copy_from_slice(&mask.to_le_bytes());
    out.extend_from_slice(&0xeeu64.to_le_bytes());
    out[1..5].copy_from_slice(&(28u32 + 16).to_le_bytes());
    assert_eq!(codec::decode(&out, 0, 4), Decoded::Record(c.into(), 49));
}

#[test]
fn truncation_at_every_offset_of_a_packed_stream_keeps_the_complete_chunks() {
    let mut w = StreamWriter::new(Vec::new(), &StreamHeader::new(StreamKind::Probes, 9))
        .unwrap()
        .with_chunk_threshold(100);
    let calls: Vec<Record> = (0..12u64)
        .map(|i| call(i % 2, [i, 0, 0, 0, 0, 0], [0; 5], i * 3).into())
        .collect();
    for c in &calls {
        w.push(c).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    // Records of 33 + 8 × (nonzero words) bytes; chunks close at 100 payload bytes.
    let mut bounds = vec![HEADER_LEN];
    let mut per_chunk = vec![];
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let mut n = 0;
        let mut p = 0;
        while p < len {
            let body = bytes[at + CHUNK_HEADER_LEN + p + 1..][..4]
                .try_into()
                .unwrap();
            p += RECORD_HEADER_LEN + u32::from_le_bytes(body) as usize;
            n += 1;
        }
        per_chunk.push(n);
        at += CHUNK_HEADER_LEN + len;
        bounds.push(at);
    }
    assert_eq!(per_chunk.iter().sum::<usize>(), 12);
    for end in HEADER_LEN..bytes.len() {
        let (recs, damage) = read_all(&bytes[..end]);
        let whole = bounds.iter().filter(|&&b| b <= end).count() - 1;
        let kept: usize = per_chunk[..whole].iter().sum();
        assert_eq!(recs, calls[..kept], "cut at {end}");
        let damage = damage.filter(|_| !bounds.contains(&end));
        if bounds.contains(&end) {
            continue;
        }
        let damage = damage.expect("a cut inside a chunk is reported");
        assert_eq!(damage.offset, bounds[whole] as u64, "cut at {end}");
        assert_eq!(damage.chunks_kept, whole as u64, "cut at {end}");
    }
}

#[test]
fn a_packed_record_reads_in_a_stream_of_any_version() {
    let c = call(0, [9, 0, 0, 0, 0, 0], [0; 5], 0);
    for version in 1..=FORMAT_VERSION {
        assert_eq!(
            read_all(&one_chunk(version, &packed(&c))),
            (vec![c.clone().into()], None),
            "version {version}"
        );
    }
}
