//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the chunk and header checksum: the
//! `crc32fast` crate's, which folds 64 bytes per step with carry-less multiplication
//! (PCLMULQDQ) where the CPU has it and uses slicing-by-16 tables elsewhere. The values are the
//! classic CRC-32/ISO-HDLC (zlib, PNG, Ethernet), so the stream format does not depend on the
//! implementation; the tests check them against a bit-at-a-time reference.

/// CRC-32 of `bytes` (the zlib / PNG / Ethernet checksum).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::crc32;

    /// The definition, one bit at a time: the reference the fast implementation must equal.
    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    0xEDB8_8320 ^ (crc >> 1)
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn matches_the_standard_check_values() {
        // The catalogue check value of CRC-32/ISO-HDLC, and zlib's crc32 of the empty input.
        for f in [crc32, crc32_bitwise] {
            assert_eq!(f(b"123456789"), 0xCBF4_3926);
            assert_eq!(f(b""), 0);
            assert_eq!(f(b"a"), 0xE8B7_BE43);
            assert_eq!(f(b"abc"), 0x3524_41C2);
            assert_eq!(
                f(b"The quick brown fox jumps over the lazy dog"),
                0x414F_A339
            );
            // 32 zero bytes and 32 0xFF bytes (the iSCSI/RFC 3720 test patterns, CRC-32 values).
            assert_eq!(f(&[0u8; 32]), 0x190A_55AD);
            assert_eq!(f(&[0xFFu8; 32]), 0xFF6C_AB0B);
        }
    }

    #[test]
    fn equals_the_bitwise_definition_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for len in (0..=300).chain([1023, 1024, 1025, 4000]) {
                let s = &data[start..start + len];
                assert_eq!(crc32(s), crc32_bitwise(s), "start {start} len {len}");
            }
        }
    }
}
