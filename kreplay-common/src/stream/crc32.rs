//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the chunk and header checksum.
//!
//! [`crc32`] is the `crc32fast` crate's: carry-less multiplication (PCLMULQDQ) folding 64 bytes
//! per step where the CPU has it, else slicing-by-16 tables. The chunk checksum was the largest
//! single cost of `kreplay trace`'s reader (27% of its CPU with the slicing-by-8 loop kept here
//! as [`crc32_slice8`]; docs/bench/probe-cost-2026-11-30-d.md). The result is bit-for-bit the
//! classic byte-at-a-time CRC ([`crc32_bytewise`], kept as the reference and the benchmark's
//! baseline), so the stream format is unchanged.

/// The reflected IEEE polynomial.
const POLY: u32 = 0xEDB8_8320;

/// `TABLES[0]` is the classic byte table; `TABLES[k][b]` is the CRC of byte `b` followed by
/// `k` zero bytes, which lets one step fold the byte `k` positions ahead.
static TABLES: [[u32; 256]; 8] = build_tables();

const fn build_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

/// Folds `bytes` into the running (pre-inverted) state `crc` one byte at a time.
#[inline]
fn fold_bytes(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc = TABLES[0][((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

/// CRC-32 of `bytes` (the zlib / PNG / Ethernet checksum).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The same CRC-32 by slicing-by-8 tables, eight bytes per step: the previous implementation,
/// kept as a second reference for the tests and the merge benchmark.
pub fn crc32_slice8(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let lo = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) ^ crc;
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        crc = TABLES[7][(lo & 0xFF) as usize]
            ^ TABLES[6][((lo >> 8) & 0xFF) as usize]
            ^ TABLES[5][((lo >> 16) & 0xFF) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xFF) as usize]
            ^ TABLES[2][((hi >> 8) & 0xFF) as usize]
            ^ TABLES[1][((hi >> 16) & 0xFF) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    !fold_bytes(crc, words.remainder())
}

/// The same CRC-32, one byte per step: the reference implementation and benchmark baseline.
pub fn crc32_bytewise(bytes: &[u8]) -> u32 {
    !fold_bytes(!0u32, bytes)
}

#[cfg(test)]
mod tests {
    use super::{crc32, crc32_bytewise, crc32_slice8};

    #[test]
    fn matches_the_standard_check_values() {
        // The catalogue check value of CRC-32/ISO-HDLC, and zlib's crc32 of the empty input.
        for f in [crc32, crc32_slice8, crc32_bytewise] {
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
    fn every_implementation_equals_bytewise_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for len in (0..=300).chain([1023, 1024, 1025, 4000]) {
                let s = &data[start..start + len];
                let want = crc32_bytewise(s);
                assert_eq!(crc32(s), want, "start {start} len {len}");
                assert_eq!(crc32_slice8(s), want, "slice8 start {start} len {len}");
            }
        }
    }
}
