//! Protobuf wire encoding by hand for the hot packets: varints, tags and in-place
//! length-delimited fields with back-patched lengths.
//!
//! A length-delimited field is opened with a one-byte length placeholder and closed by writing
//! the real length there; only a body of 128 bytes or more (rare for trace events) moves the
//! body to make room for a longer varint. So a packet is encoded straight into the writer's
//! output buffer with no temporary buffer, no size pre-pass and no heap allocation.

/// Wire type of varint fields (`uint64`, `int64`, `bool`, enums).
pub(crate) const VARINT: u32 = 0;
/// Wire type of `fixed64` and `double` fields.
pub(crate) const FIXED64: u32 = 1;
/// Wire type of length-delimited fields (strings, messages).
pub(crate) const LEN: u32 = 2;

/// Number of bytes `value` takes as a varint (1..=10).
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // Each byte carries 7 bits; 0 still takes one byte.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Appends `value` as a base-128 varint.
#[inline]
pub(crate) fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// Appends the key of field `field` with wire type `wire_type`.
#[inline]
pub(crate) fn put_tag(buf: &mut Vec<u8>, field: u32, wire_type: u32) {
    put_varint(buf, u64::from((field << 3) | wire_type));
}

/// Appends a varint field (`uint64`, `uint32`, enum, `bool`).
#[inline]
pub(crate) fn put_uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(buf, field, VARINT);
    put_varint(buf, value);
}

/// Appends an `int64` field: negative values are their two's complement (10 bytes), as
/// protobuf specifies for non-zigzag signed types.
#[inline]
pub(crate) fn put_int(buf: &mut Vec<u8>, field: u32, value: i64) {
    put_uint(buf, field, value as u64);
}

/// Appends a `fixed64` field.
#[inline]
pub(crate) fn put_fixed64(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(buf, field, FIXED64);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Appends a `double` field.
#[inline]
pub(crate) fn put_double(buf: &mut Vec<u8>, field: u32, value: f64) {
    put_fixed64(buf, field, value.to_bits());
}

/// Appends a `string` field.
#[inline]
pub(crate) fn put_str(buf: &mut Vec<u8>, field: u32, value: &str) {
    put_tag(buf, field, LEN);
    put_varint(buf, value.len() as u64);
    buf.extend_from_slice(value.as_bytes());
}

/// Opens a length-delimited field: writes its key and a one-byte length placeholder, and
/// returns the placeholder's position for `close`.
#[inline]
pub(crate) fn open(buf: &mut Vec<u8>, field: u32) -> usize {
    put_tag(buf, field, LEN);
    buf.push(0);
    buf.len() - 1
}

/// Closes the field opened at `at`: writes the body's length into the placeholder, moving the
/// body right when the length needs more than one byte.
#[inline]
pub(crate) fn close(buf: &mut Vec<u8>, at: usize) {
    let body_start = at + 1;
    let len = buf.len() - body_start;
    if len < 0x80 {
        buf[at] = len as u8;
        return;
    }
    close_long(buf, at, len);
}

/// The slow half of `close`, kept out of line so the common path inlines small.
#[cold]
fn close_long(buf: &mut Vec<u8>, at: usize, len: usize) {
    let body_start = at + 1;
    let extra = varint_len(len as u64) - 1;
    let old_end = buf.len();
    buf.resize(old_end + extra, 0);
    buf.copy_within(body_start..old_end, body_start + extra);
    let mut value = len as u64;
    let mut pos = at;
    while value >= 0x80 {
        buf[pos] = (value as u8) | 0x80;
        value >>= 7;
        pos += 1;
    }
    buf[pos] = value as u8;
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

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
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(buf, bytes, "varint of {value}");
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
        let mut buf = Vec::new();
        put_int(&mut buf, 4, -2);
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
            let mut buf = vec![0xAA];
            let at = open(&mut buf, 2);
            let body: Vec<u8> = (0..body_len).map(|i| (i % 251) as u8).collect();
            buf.extend_from_slice(&body);
            close(&mut buf, at);
            let mut expected = vec![0xAA, 0x12];
            put_varint(&mut expected, body_len as u64);
            expected.extend_from_slice(&body);
            assert_eq!(buf, expected, "body of {body_len} bytes");
        }
    }

    #[test]
    fn nested_long_fields_decode_with_prost() {
        use crate::perfetto::proto::{InternedData, InternedString};
        let long = "n".repeat(200);
        let mut buf = Vec::new();
        let outer = open(&mut buf, 2);
        put_uint(&mut buf, 1, 7);
        put_str(&mut buf, 2, &long);
        close(&mut buf, outer);
        let decoded = InternedData::decode(buf.as_slice()).unwrap();
        assert_eq!(
            decoded.event_names,
            vec![InternedString {
                iid: Some(7),
                name: Some(long)
            }]
        );
    }
}
