//! Byte encoding of records inside a chunk payload: `tag u8, body_len u32, body`, fields
//! little-endian in declaration order, strings as `len u32` + UTF-8 bytes.
//!
//! A decoder skips a tag it does not know (a newer writer's record) and ignores body bytes
//! past the fields it knows (a newer writer's appended fields): that is the format's forward
//! compatibility. A body shorter than the fields its stream's version has is malformed; fields
//! a version appended are read as 0 from an older version's stream.

use super::record::{
    Annotation, ApiCall, Correlation, Decline, Drops, KernelName, Nondeterministic, ProcessName,
    Record, ReplayPass, ReplayStep, Restore, Snapshot, ThreadName, ToolWindow,
};

mod calls;
mod gpu;
use calls::{API_CALL_BODY, api_call, api_call_packed, encode_packed};

/// Bytes before each record body: the tag and the body length.
pub const RECORD_HEADER_LEN: usize = 5;
/// Strings longer than this are cut (at a character boundary) when encoded.
pub const MAX_STRING: usize = 64 * 1024;

/// Tag numbers; never reuse one.
mod tag {
    pub const THREAD_NAME: u8 = 1;
    pub const PROCESS_NAME: u8 = 2;
    pub const API_CALL: u8 = 3;
    pub const DISPATCH: u8 = 4;
    pub const REPLAY_PASS: u8 = 5;
    pub const SNAPSHOT: u8 = 6;
    pub const RESTORE: u8 = 7;
    pub const DECLINE: u8 = 8;
    pub const NONDETERMINISTIC: u8 = 9;
    pub const CORRELATION: u8 = 10;
    pub const DROPS: u8 = 11;
    pub const KERNEL_NAME: u8 = 12;
    pub const TOOL_WINDOW: u8 = 13;
    pub const REPLAY_STEP: u8 = 14;
    /// Version 4: an `ApiCall` with only its nonzero words ([`super::API_CALL_PACKED_FIXED`]).
    pub const API_CALL_PACKED: u8 = 15;
    /// Version 5: a user annotation (roctx, NVTX).
    pub const ANNOTATION: u8 = 16;
    /// Version 6: a copy or memset with its GPU times.
    pub const GPU_COPY: u8 = 17;
    /// Version 7: a GPU's description (runtime, queue ids, ordinal, name).
    pub const GPU_DEVICE: u8 = 18;
}

/// The first format version whose `Dispatch` carries its group and private segment sizes.
pub const DISPATCH_SEGMENTS_SINCE: u16 = 6;

/// The first format version whose writers write `ApiCall` packed (tag 15).
pub const PACKED_CALLS_SINCE: u16 = 4;
/// Bytes of a packed `ApiCall` body before its words: pid, tid, api, enter, exit, present.
pub const API_CALL_PACKED_FIXED: usize = 4 + 4 + 2 + 8 + 8 + 2;
/// The `present` bits a packed `ApiCall` can set: ret (bit 0), args (1-6), extra (7-11), out
/// (12).
const PACKED_WORDS: usize = 13;

/// Appends little-endian fields to a buffer.
struct Enc<'a>(&'a mut Vec<u8>);

impl Enc<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32s(&mut self, v: &[u32]) {
        v.iter().for_each(|&x| self.u32(x));
    }
    fn u64s(&mut self, v: &[u64]) {
        v.iter().for_each(|&x| self.u64(x));
    }
    fn str(&mut self, s: &str) {
        let mut end = s.len().min(MAX_STRING);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u32(end as u32);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
}

/// Reads little-endian fields from a record body; `None` when the body is too short.
struct Dec<'a> {
    b: &'a [u8],
}

impl Dec<'_> {
    fn u8(&mut self) -> Option<u8> {
        self.take().map(|[b]: [u8; 1]| b)
    }
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.b.split_first_chunk::<N>()?;
        self.b = rest;
        Some(*head)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn u32s<const N: usize>(&mut self) -> Option<[u32; N]> {
        let mut out = [0u32; N];
        for v in &mut out {
            *v = self.u32()?;
        }
        Some(out)
    }
    fn u64s<const N: usize>(&mut self) -> Option<[u64; N]> {
        let mut out = [0u64; N];
        for v in &mut out {
            *v = self.u64()?;
        }
        Some(out)
    }
    fn str(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        if len > self.b.len() {
            return None;
        }
        let (s, rest) = self.b.split_at(len);
        self.b = rest;
        String::from_utf8(s.to_vec()).ok()
    }
}

/// Appends `rec` (header and body) to `out` as this build's format version writes it.
pub fn encode(rec: &Record, out: &mut Vec<u8>) {
    encode_version(rec, super::FORMAT_VERSION, out);
}

/// Appends `rec` as a writer of format `version` writes it: from version 4 on an `ApiCall` is
/// packed (tag 15), before it every word is written (tag 3).
pub fn encode_version(rec: &Record, version: u16, out: &mut Vec<u8>) {
    if let Record::ApiCall(r) = rec
        && version >= PACKED_CALLS_SINCE
    {
        return encode_packed(r, out);
    }
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_HEADER_LEN]);
    let mut e = Enc(out);
    let tag = match rec {
        Record::ThreadName(r) => {
            e.u32(r.tid);
            e.str(&r.name);
            tag::THREAD_NAME
        }
        Record::ProcessName(r) => {
            e.u32(r.pid);
            e.str(&r.name);
            tag::PROCESS_NAME
        }
        Record::ApiCall(r) => {
            e.u32(r.pid);
            e.u32(r.tid);
            e.u16(r.api);
            e.u64s(&[r.enter_ns, r.exit_ns, r.ret]);
            e.u64s(&r.args);
            e.u64s(&r.extra);
            e.u64(r.out);
            tag::API_CALL
        }
        Record::Dispatch(r) => gpu::encode_dispatch(&mut e, r, version),
        Record::ReplayPass(r) => {
            e.u64(r.correlation);
            e.u32(r.pass);
            e.u64s(&[r.start_ns, r.end_ns]);
            // Version 2.
            e.u32(r.pid);
            e.u32(r.tid);
            // Version 8.
            e.u64(r.gpu_ns);
            tag::REPLAY_PASS
        }
        Record::Snapshot(r) => {
            e.u64s(&[r.correlation, r.start_ns, r.end_ns, r.bytes, r.regions]);
            // Appended after version 1's fields (readers before them ignore them).
            e.u8(r.placement);
            e.u8(r.check);
            e.u64s(&[r.chunk_size, r.bytes_hashed]);
            // Version 2.
            e.u32(r.pid);
            e.u32(r.tid);
            tag::SNAPSHOT
        }
        Record::Restore(r) => {
            e.u64(r.correlation);
            e.u32(r.pass);
            e.u64s(&[r.start_ns, r.end_ns, r.bytes, r.regions, r.skipped]);
            // Appended after version 1's fields (readers before them ignore them).
            e.u8(r.placement);
            e.u8(r.check);
            e.u64s(&[r.bytes_checked, r.dirty_chunks, r.check_ns]);
            // Version 2.
            e.u32(r.pid);
            e.u32(r.tid);
            // Version 3.
            e.u64(r.failed);
            tag::RESTORE
        }
        Record::Decline(r) => {
            e.u64s(&[r.correlation, r.ts_ns]);
            e.str(&r.reason);
            tag::DECLINE
        }
        Record::Nondeterministic(r) => {
            e.u64(r.correlation);
            e.u32(r.pass);
            e.u64s(&[r.ts_ns, r.region, r.offset]);
            tag::NONDETERMINISTIC
        }
        Record::Correlation(r) => {
            e.u32(r.tid);
            e.u64s(&[r.ts_ns, r.external_id, r.correlation]);
            tag::CORRELATION
        }
        Record::Drops(r) => {
            e.u64s(&[r.ts_ns, r.count]);
            e.str(&r.source);
            tag::DROPS
        }
        Record::KernelName(r) => {
            e.u32(r.pid);
            e.u64s(&[r.ts_ns, r.handle]);
            e.str(&r.name);
            tag::KERNEL_NAME
        }
        Record::ToolWindow(r) => {
            e.u32(r.pid);
            e.u32(r.tid);
            e.u64s(&[r.correlation, r.start_ns, r.end_ns]);
            tag::TOOL_WINDOW
        }
        Record::ReplayStep(r) => {
            e.u32(r.pid);
            e.u32(r.tid);
            e.u64(r.correlation);
            e.u8(r.step);
            e.u32(r.pass);
            e.u64s(&[r.start_ns, r.end_ns, r.bytes]);
            tag::REPLAY_STEP
        }
        Record::Annotation(r) => {
            e.u32(r.pid);
            e.u32(r.tid);
            e.u64(r.ts_ns);
            e.u8(r.kind);
            e.u8(r.source);
            e.u32(r.category);
            e.u64(r.id);
            e.str(&r.domain);
            e.str(&r.name);
            tag::ANNOTATION
        }
        Record::GpuCopy(r) => gpu::encode_copy(&mut e, r),
        Record::GpuDevice(r) => gpu::encode_device(&mut e, r),
    };
    let body_len = (out.len() - start - RECORD_HEADER_LEN) as u32;
    out[start] = tag;
    out[start + 1..start + RECORD_HEADER_LEN].copy_from_slice(&body_len.to_le_bytes());
}

/// What [`decode`] found at a payload position.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A record, and the payload position after it.
    Record(Record, usize),
    /// A record with a tag this build does not know, skipped; the position after it.
    Unknown(u8, usize),
    /// The bytes at this position are not a well-formed record.
    Malformed,
}

/// Decodes the record starting at `pos` of a chunk payload (`pos < payload.len()`) of a
/// stream written in format `version` (which fields a body must have).
pub fn decode(payload: &[u8], pos: usize, version: u16) -> Decoded {
    let Some(head) = payload.get(pos..pos + RECORD_HEADER_LEN) else {
        return Decoded::Malformed;
    };
    let tag = head[0];
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let body_start = pos + RECORD_HEADER_LEN;
    let Some(body) = payload.get(body_start..body_start + len) else {
        return Decoded::Malformed;
    };
    let next = body_start + len;
    // The common record, read from a fixed-size array: one length check, not one per field.
    if tag == tag::API_CALL
        && let Some(b) = body.first_chunk::<API_CALL_BODY>()
    {
        return Decoded::Record(api_call(b).into(), next);
    }
    if tag == tag::API_CALL_PACKED {
        return match api_call_packed(body) {
            Some(call) => Decoded::Record(call.into(), next),
            None => Decoded::Malformed,
        };
    }
    match decode_body(tag, &mut Dec { b: body }, version) {
        Some(Some(rec)) => Decoded::Record(rec, next),
        Some(None) => Decoded::Unknown(tag, next),
        None => Decoded::Malformed,
    }
}

/// The fields version 2 appended (`pid`, `tid`): required in a version-2 stream, absent (0) in
/// a version-1 one.
fn v2_thread(d: &mut Dec<'_>, version: u16) -> Option<(u32, u32)> {
    if version >= 2 {
        Some((d.u32()?, d.u32()?))
    } else {
        Some((0, 0))
    }
}

/// Version 1's optional appended field: required from version 2 on (later fields follow it).
fn appended<T: Default>(v: Option<T>, version: u16) -> Option<T> {
    if version >= 2 {
        v
    } else {
        Some(v.unwrap_or_default())
    }
}

/// `Some(None)` for an unknown tag, `None` for a body too short for the tag's fields.
fn decode_body(tag: u8, d: &mut Dec<'_>, version: u16) -> Option<Option<Record>> {
    let rec: Record = match tag {
        tag::THREAD_NAME => ThreadName {
            tid: d.u32()?,
            name: d.str()?,
        }
        .into(),
        tag::PROCESS_NAME => ProcessName {
            pid: d.u32()?,
            name: d.str()?,
        }
        .into(),
        tag::API_CALL => ApiCall {
            pid: d.u32()?,
            tid: d.u32()?,
            api: d.u16()?,
            enter_ns: d.u64()?,
            exit_ns: d.u64()?,
            ret: d.u64()?,
            args: d.u64s()?,
            extra: d.u64s()?,
            out: d.u64()?,
        }
        .into(),
        tag::DISPATCH => gpu::dispatch(d, version)?.into(),
        tag::REPLAY_PASS => {
            let (correlation, pass) = (d.u64()?, d.u32()?);
            let [start_ns, end_ns] = d.u64s()?;
            let (pid, tid) = v2_thread(d, version)?;
            let gpu_ns = if version >= 8 { d.u64()? } else { 0 };
            ReplayPass {
                correlation,
                pass,
                start_ns,
                end_ns,
                pid,
                tid,
                gpu_ns,
            }
            .into()
        }
        tag::SNAPSHOT => {
            let [correlation, start_ns, end_ns, bytes, regions] = d.u64s()?;
            // Appended in version 1: absent (0) in records of writers before them.
            let (placement, check) = (appended(d.u8(), version)?, appended(d.u8(), version)?);
            let [chunk_size, bytes_hashed] = appended(d.u64s(), version)?;
            let (pid, tid) = v2_thread(d, version)?;
            Snapshot {
                correlation,
                start_ns,
                end_ns,
                bytes,
                regions,
                placement,
                check,
                chunk_size,
                bytes_hashed,
                pid,
                tid,
            }
            .into()
        }
        tag::RESTORE => {
            let (correlation, pass) = (d.u64()?, d.u32()?);
            let [start_ns, end_ns, bytes, regions, skipped] = d.u64s()?;
            // Appended in version 1: absent (0) in records of writers before them.
            let (placement, check) = (appended(d.u8(), version)?, appended(d.u8(), version)?);
            let [bytes_checked, dirty_chunks, check_ns] = appended(d.u64s(), version)?;
            let (pid, tid) = v2_thread(d, version)?;
            let failed = if version >= 3 { d.u64()? } else { 0 };
            Restore {
                correlation,
                pass,
                start_ns,
                end_ns,
                bytes,
                regions,
                skipped,
                placement,
                check,
                bytes_checked,
                dirty_chunks,
                check_ns,
                pid,
                tid,
                failed,
            }
            .into()
        }
        tag::DECLINE => Decline {
            correlation: d.u64()?,
            ts_ns: d.u64()?,
            reason: d.str()?,
        }
        .into(),
        tag::NONDETERMINISTIC => Nondeterministic {
            correlation: d.u64()?,
            pass: d.u32()?,
            ts_ns: d.u64()?,
            region: d.u64()?,
            offset: d.u64()?,
        }
        .into(),
        tag::CORRELATION => Correlation {
            tid: d.u32()?,
            ts_ns: d.u64()?,
            external_id: d.u64()?,
            correlation: d.u64()?,
        }
        .into(),
        tag::DROPS => {
            let [ts_ns, count] = d.u64s()?;
            Drops {
                ts_ns,
                source: d.str()?,
                count,
            }
            .into()
        }
        tag::KERNEL_NAME => KernelName {
            pid: d.u32()?,
            ts_ns: d.u64()?,
            handle: d.u64()?,
            name: d.str()?,
        }
        .into(),
        // New in version 2; a version-1 writer never wrote this tag.
        tag::TOOL_WINDOW => ToolWindow {
            pid: d.u32()?,
            tid: d.u32()?,
            correlation: d.u64()?,
            start_ns: d.u64()?,
            end_ns: d.u64()?,
        }
        .into(),
        tag::REPLAY_STEP => ReplayStep {
            pid: d.u32()?,
            tid: d.u32()?,
            correlation: d.u64()?,
            step: d.u8()?,
            pass: d.u32()?,
            start_ns: d.u64()?,
            end_ns: d.u64()?,
            bytes: d.u64()?,
        }
        .into(),
        tag::ANNOTATION => Annotation {
            pid: d.u32()?,
            tid: d.u32()?,
            ts_ns: d.u64()?,
            kind: d.u8()?,
            source: d.u8()?,
            category: d.u32()?,
            id: d.u64()?,
            domain: d.str()?,
            name: d.str()?,
        }
        .into(),
        tag::GPU_COPY => gpu::copy(d)?.into(),
        tag::GPU_DEVICE => gpu::device(d)?.into(),
        _ => return Some(None),
    };
    Some(Some(rec))
}
