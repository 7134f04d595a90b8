//! `ApiCall` bodies, the stream's most common record: the full form (tag 3) read from a
//! fixed-size array, and the packed form (tag 15, version 4) that leaves zero words out.

use super::super::record::ApiCall;
use super::{API_CALL_PACKED_FIXED, Enc, PACKED_WORDS, RECORD_HEADER_LEN, tag};

/// The words of `r` in packed order: ret, args, extra, out.
pub(super) fn words(r: &ApiCall) -> [u64; PACKED_WORDS] {
    let mut w = [0u64; PACKED_WORDS];
    w[0] = r.ret;
    w[1..7].copy_from_slice(&r.args);
    w[7..12].copy_from_slice(&r.extra);
    w[12] = r.out;
    w
}

/// Appends `r` packed: the fixed fields, a `present` mask, then only the nonzero words.
pub(super) fn encode_packed(r: &ApiCall, out: &mut Vec<u8>) {
    let w = words(r);
    let present = w
        .iter()
        .enumerate()
        .fold(0u16, |m, (i, &v)| m | (u16::from(v != 0) << i));
    let body_len = API_CALL_PACKED_FIXED + 8 * present.count_ones() as usize;
    out.reserve(RECORD_HEADER_LEN + body_len);
    out.push(tag::API_CALL_PACKED);
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    let mut e = Enc(out);
    e.u32(r.pid);
    e.u32(r.tid);
    e.u16(r.api);
    e.u64s(&[r.enter_ns, r.exit_ns]);
    e.u16(present);
    for v in w.into_iter().filter(|&v| v != 0) {
        e.u64(v);
    }
}

/// Decodes a packed `ApiCall` body; `None` when it is shorter than the words its mask names.
/// Mask bits above the known words are a newer writer's: their words follow the known ones and
/// are ignored like any appended field.
pub(super) fn api_call_packed(b: &[u8]) -> Option<ApiCall> {
    let (fixed, mut rest) = b.split_first_chunk::<API_CALL_PACKED_FIXED>()?;
    let u64_at = |at: usize| u64::from_le_bytes(fixed[at..at + 8].try_into().expect("8 bytes"));
    let present = u16::from_le_bytes([fixed[26], fixed[27]]);
    let mut w = [0u64; PACKED_WORDS];
    for (i, v) in w.iter_mut().enumerate() {
        if present & (1 << i) != 0 {
            let (head, tail) = rest.split_first_chunk::<8>()?;
            *v = u64::from_le_bytes(*head);
            rest = tail;
        }
    }
    Some(ApiCall {
        pid: u32::from_le_bytes(fixed[0..4].try_into().expect("4 bytes")),
        tid: u32::from_le_bytes(fixed[4..8].try_into().expect("4 bytes")),
        api: u16::from_le_bytes([fixed[8], fixed[9]]),
        enter_ns: u64_at(10),
        exit_ns: u64_at(18),
        ret: w[0],
        args: w[1..7].try_into().expect("6 words"),
        extra: w[7..12].try_into().expect("5 words"),
        out: w[12],
    })
}

/// Bytes of an `ApiCall` body: pid, tid, api, enter, exit, ret, 6 args, 5 extra, out.
pub(super) const API_CALL_BODY: usize = 4 + 4 + 2 + 8 * 3 + 8 * 6 + 8 * 5 + 8;

/// Decodes an `ApiCall` body (the same fields as [`decode_body`] reads, in the same order).
pub(super) fn api_call(b: &[u8; API_CALL_BODY]) -> ApiCall {
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    ApiCall {
        pid: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
        tid: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
        api: u16::from_le_bytes([b[8], b[9]]),
        enter_ns: u64_at(10),
        exit_ns: u64_at(18),
        ret: u64_at(26),
        args: core::array::from_fn(|i| u64_at(34 + 8 * i)),
        extra: core::array::from_fn(|i| u64_at(82 + 8 * i)),
        out: u64_at(122),
    }
}
