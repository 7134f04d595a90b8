//! Protobuf wire encoding by hand for the hot packets: varints, tags and in-place
//! length-delimited fields with back-patched lengths.
//!
//! A packet is encoded through a `Cursor` over the spare capacity of the writer's output
//! buffer, reserved once per packet from an upper bound of its size: no per-byte capacity
//! check, no temporary buffer, no size pre-pass, no heap allocation. A length-delimited field
//! is opened with a one-byte length placeholder and closed by writing the real length there;
//! only a body of 128 bytes or more (rare for trace events) moves to make room for a longer
//! varint, into slack the bound accounts for.

use std::mem::MaybeUninit;

/// Wire type of varint fields (`uint64`, `int64`, `bool`, enums).
const VARINT: u32 = 0;
/// Wire type of `fixed64` and `double` fields.
const FIXED64: u32 = 1;
/// Wire type of length-delimited fields (strings, messages).
const LEN: u32 = 2;

/// Bytes a varint field can take at most: a key of up to 2 bytes (fields below 2048) and a
/// 10-byte value.
pub(crate) const MAX_VARINT_FIELD: usize = 12;
/// Upper bound of an opened and closed message's framing: key, length and `CLOSE_SLACK`.
pub(crate) const MAX_FRAMING: usize = 2 + CLOSE_SLACK;
/// Extra bytes a `close` may need beyond the one-byte placeholder (a length ≥ 2^28 is never
/// written: packets are far smaller).
pub(crate) const CLOSE_SLACK: usize = 3;

/// Number of bytes `value` takes as a varint (1..=10).
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // Each byte carries 7 bits; 0 still takes one byte.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The encoded key of field `field` with wire type `wire_type`, as a varint value.
#[inline]
const fn key(field: u32, wire_type: u32) -> u64 {
    ((field << 3) | wire_type) as u64
}

/// A varint field encoded once and copied into every packet that needs it (a track's
/// `track_uuid`, a sequence's id and flags).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Preencoded {
    bytes: [u8; 2 * MAX_VARINT_FIELD],
    len: u8,
}

impl Preencoded {
    /// Appends varint field `field` = `value` to the pre-encoded bytes.
    pub(crate) fn uint(mut self, field: u32, value: u64) -> Self {
        let mut v = Vec::with_capacity(MAX_VARINT_FIELD);
        append(&mut v, MAX_VARINT_FIELD, |c| c.uint(field, value));
        let start = usize::from(self.len);
        self.bytes[start..start + v.len()].copy_from_slice(&v);
        self.len += v.len() as u8;
        self
    }

    /// The encoded bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Writes into the spare capacity of a `Vec<u8>`; see `append`.
pub(crate) struct Cursor<'a> {
    out: &'a mut [MaybeUninit<u8>],
    pos: usize,
}

/// Encodes `f`'s output at the end of `buf`, through a cursor over at least `bound` bytes of
/// spare capacity (reserved here); returns the bytes appended. `f` must not write more than
/// `bound` bytes (the cursor's bounds checks panic rather than write past the reservation).
#[inline]
pub(crate) fn append(buf: &mut Vec<u8>, bound: usize, f: impl FnOnce(&mut Cursor<'_>)) -> usize {
    buf.reserve(bound);
    let mut cursor = Cursor {
        out: buf.spare_capacity_mut(),
        pos: 0,
    };
    f(&mut cursor);
    let written = cursor.pos;
    let len = buf.len() + written;
    // SAFETY: the cursor wrote (initialised) every byte of buf's spare capacity in
    // [0, written): `byte`, `bytes` and `preencoded` advance `pos` only over bytes they wrote
    // (`preencoded` may write more than it advances over), and
    // `close_long` only moves initialised bytes right and fills the gap with the varint before
    // restoring `pos`. The cursor's slice was the spare capacity, so `len <= capacity`.
    unsafe { buf.set_len(len) };
    written
}

impl Cursor<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.out[self.pos] = MaybeUninit::new(b);
        self.pos += 1;
    }

    /// Appends `value` as a base-128 varint.
    #[inline]
    pub(crate) fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// Appends raw bytes (pre-encoded fields).
    #[inline]
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        self.out[self.pos..end].write_copy_of_slice(bytes);
        self.pos = end;
    }

    /// Appends pre-encoded fields. Where the reservation has room it copies the whole
    /// fixed-size array (a few moves) and keeps its used part, rather than calling `memcpy`
    /// for a slice of 2 to 6 bytes; the bytes copied past the used part are overwritten or
    /// left out of the buffer's length.
    #[inline]
    pub(crate) fn preencoded(&mut self, p: &Preencoded) {
        let end = self.pos + p.bytes.len();
        if end <= self.out.len() {
            self.out[self.pos..end].write_copy_of_slice(&p.bytes);
            self.pos += usize::from(p.len);
        } else {
            self.bytes(p.as_slice());
        }
    }

    /// Appends a varint field (`uint64`, `uint32`, enum, `bool`).
    #[inline]
    pub(crate) fn uint(&mut self, field: u32, value: u64) {
        self.varint(key(field, VARINT));
        self.varint(value);
    }

    /// Appends an `int64` field: negative values are their two's complement (10 bytes), as
    /// protobuf specifies for non-zigzag signed types.
    #[inline]
    pub(crate) fn int(&mut self, field: u32, value: i64) {
        self.uint(field, value as u64);
    }

    /// Appends a `fixed64` field.
    #[inline]
    pub(crate) fn fixed64(&mut self, field: u32, value: u64) {
        self.varint(key(field, FIXED64));
        self.bytes(&value.to_le_bytes());
    }

    /// Appends a `double` field.
    #[inline]
    pub(crate) fn double(&mut self, field: u32, value: f64) {
        self.fixed64(field, value.to_bits());
    }

    /// Appends a `string` field.
    #[inline]
    pub(crate) fn str(&mut self, field: u32, value: &str) {
        self.varint(key(field, LEN));
        self.varint(value.len() as u64);
        self.bytes(value.as_bytes());
    }

    /// Opens a length-delimited field: writes its key and a one-byte length placeholder, and
    /// returns the placeholder's position for `close`.
    #[inline]
    pub(crate) fn open(&mut self, field: u32) -> usize {
        self.varint(key(field, LEN));
        self.byte(0);
        self.pos - 1
    }

    /// Closes the field opened at `at`: writes the body's length into the placeholder, moving
    /// the body right when the length needs more than one byte.
    #[inline]
    pub(crate) fn close(&mut self, at: usize) {
        let len = self.pos - at - 1;
        if len < 0x80 {
            self.out[at] = MaybeUninit::new(len as u8);
        } else {
            self.close_long(at, len);
        }
    }

    /// The slow half of `close`, kept out of line so the common path inlines small.
    #[cold]
    fn close_long(&mut self, at: usize, len: usize) {
        let extra = varint_len(len as u64) - 1;
        self.out.copy_within(at + 1..self.pos, at + 1 + extra);
        let end = self.pos + extra;
        self.pos = at;
        self.varint(len as u64);
        self.pos = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    /// Encodes with a cursor into a fresh vector.
    fn encode(bound: usize, f: impl FnOnce(&mut Cursor<'_>)) -> Vec<u8> {
        let mut buf = Vec::new();
        append(&mut buf, bound, f);
        buf
    }

    #[test]
    fn preencoded_fields_are_copied_whole_or_exactly_when_the_room_is_short() {
        let p = Preencoded::default().uint(10, 300).uint(13, 2);
        let want = [0x50, 0xac, 0x02, 0x68, 0x02];
        assert_eq!(p.as_slice(), want);
        // Room for the whole array: the used part lands, and what follows overwrites the rest.
        let with_room = encode(64, |c| {
            c.preencoded(&p);
            c.uint(1, 7);
        });
        assert_eq!(with_room, [0x50, 0xac, 0x02, 0x68, 0x02, 0x08, 0x07]);
        // Exactly the used part's room: the exact copy.
        let mut tight = Vec::with_capacity(5);
        assert_eq!(tight.capacity(), 5);
        assert_eq!(append(&mut tight, 5, |c| c.preencoded(&p)), 5);
        assert_eq!(tight, want);
    }

    #[test]
    fn varint_matches_the_protobuf_reference_bytes() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 0x01]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(value, bytes) in cases {
            assert_eq!(encode(10, |c| c.varint(value)), bytes, "varint of {value}");
            assert_eq!(varint_len(value), bytes.len(), "varint_len of {value}");
            // prost is the independent reference.
            assert_eq!(prost::encoding::encoded_len_varint(value), bytes.len());
        }
    }

    #[test]
    fn varint_len_agrees_with_prost_at_every_boundary() {
        for shift in 0..64 {
            for value in [(1u64 << shift) - 1, 1u64 << shift, (1u64 << shift) + 1] {
                assert_eq!(
                    varint_len(value),
                    prost::encoding::encoded_len_varint(value),
                    "value {value}"
                );
            }
        }
    }

    #[test]
    fn negative_int64_takes_ten_bytes_and_round_trips() {
        let buf = encode(MAX_VARINT_FIELD, |c| c.int(4, -2));
        assert_eq!(buf.len(), 11, "key + 10-byte varint");
        let decoded = crate::perfetto::proto::DebugAnnotation::decode(buf.as_slice()).unwrap();
        assert_eq!(
            decoded.value,
            Some(crate::perfetto::proto::AnnotationValue::IntValue(-2))
        );
    }

    #[test]
    fn close_patches_short_and_long_bodies() {
        for body_len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let body: Vec<u8> = (0..body_len).map(|i| (i % 251) as u8).collect();
            let buf = encode(body_len + 2 + CLOSE_SLACK, |c| {
                let at = c.open(2);
                c.bytes(&body);
                c.close(at);
            });
            let mut expected = vec![0x12];
            expected.extend(encode(10, |c| c.varint(body_len as u64)));
            expected.extend_from_slice(&body);
            assert_eq!(buf, expected, "body of {body_len} bytes");
        }
    }

    #[test]
    fn nested_long_fields_decode_with_prost() {
        use crate::perfetto::proto::{InternedData, InternedString};
        let long = "n".repeat(200);
        let buf = encode(300, |c| {
            let outer = c.open(2);
            c.uint(1, 7);
            c.str(2, &long);
            c.close(outer);
        });
        let decoded = InternedData::decode(buf.as_slice()).unwrap();
        assert_eq!(
            decoded.event_names,
            vec![InternedString {
                iid: Some(7),
                name: Some(long)
            }]
        );
    }

    #[test]
    fn preencoded_fields_concatenate() {
        let p = Preencoded::default().uint(10, 3).uint(13, 2);
        assert_eq!(p.as_slice(), [0x50, 0x03, 0x68, 0x02]);
        let uuid = Preencoded::default().uint(11, u64::MAX);
        assert_eq!(uuid.as_slice().len(), 11);
    }

    #[test]
    fn append_adds_after_existing_bytes() {
        let mut buf = vec![1, 2, 3];
        let written = append(&mut buf, 4, |c| c.uint(1, 5));
        assert_eq!(written, 2);
        assert_eq!(buf, [1, 2, 3, 0x08, 0x05]);
    }

    #[test]
    #[should_panic(expected = "out of range for slice")]
    fn writing_past_the_reservation_panics_instead_of_overflowing() {
        let mut buf = Vec::new();
        append(&mut buf, 0, |c| {
            let room = c.out.len();
            c.bytes(&vec![7; room + 1]);
        });
    }
}
