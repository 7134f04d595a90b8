//! Checking a Perfetto trace too large to decode whole: walk its framing end to end (every
//! byte belongs to a well-formed `Trace.packet` field), then decode a prefix of whole packets
//! with the independent decoder (`tests/python/decode_trace.py`).
use std::{
    fs::File,
    io::{BufReader, Read, Write},
    path::Path,
    process::Command,
};

use anyhow::{Context, Result, bail};

/// `Trace.packet` (field 1, length-delimited).
const PACKET_TAG: u64 = (1 << 3) | 2;

/// Reads one varint; `None` at a clean end of input.
fn varint(r: &mut impl Read) -> Result<Option<u64>> {
    let (mut v, mut shift) = (0u64, 0u32);
    let mut byte = [0u8; 1];
    loop {
        if r.read(&mut byte)? == 0 {
            if shift == 0 {
                return Ok(None);
            }
            bail!("truncated varint");
        }
        if shift >= 64 {
            bail!("varint longer than 10 bytes");
        }
        v |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(Some(v));
        }
        shift += 7;
    }
}

/// What the framing walk found.
#[derive(Debug, PartialEq, Eq)]
pub struct Framing {
    /// Packets in the file.
    pub packets: u64,
    /// Bytes of the first `prefix_packets` packets, tag and length included.
    pub prefix_bytes: u64,
}

/// Walks `r` packet by packet; the byte length of the first `prefix_packets` packets is
/// noted. Fails on anything that is not a `Trace.packet` field or on a truncated one.
pub fn walk(r: &mut impl Read, prefix_packets: u64) -> Result<Framing> {
    let mut f = Framing {
        packets: 0,
        prefix_bytes: 0,
    };
    let mut offset = 0u64;
    let mut sink = vec![0u8; 1 << 16];
    while let Some(tag) = varint(r)? {
        if tag != PACKET_TAG {
            bail!("field tag {tag} at byte {offset}: not a Trace.packet");
        }
        let len = varint(r)?.context("packet length missing")?;
        let mut left = len;
        while left > 0 {
            let n = left.min(sink.len() as u64) as usize;
            r.read_exact(&mut sink[..n])
                .with_context(|| format!("packet at byte {offset} truncated"))?;
            left -= n as u64;
        }
        offset += varint_len(tag) + varint_len(len) + len;
        f.packets += 1;
        if f.packets == prefix_packets {
            f.prefix_bytes = offset;
        }
    }
    if f.packets < prefix_packets {
        f.prefix_bytes = offset;
    }
    Ok(f)
}

fn varint_len(mut v: u64) -> u64 {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The result of checking a trace file.
#[derive(Debug)]
pub struct TraceCheck {
    /// File size in bytes.
    pub bytes: u64,
    /// The framing walk.
    pub framing: Framing,
    /// Packets the decoder read in the prefix.
    pub decoded_packets: u64,
    /// Slices the decoder rebuilt in the prefix.
    pub decoded_slices: u64,
    /// Decoder errors other than slices left open by the cut.
    pub errors: Vec<String>,
    /// Slices left open where the prefix was cut.
    pub open_at_cut: u64,
}

/// Checks `trace`: framing of the whole file, then the first `prefix_packets` packets decoded
/// (written to `scratch` for the decoder, then removed).
pub fn check(trace: &Path, prefix_packets: u64, scratch: &Path) -> Result<TraceCheck> {
    let bytes = std::fs::metadata(trace)?.len();
    let mut r = BufReader::with_capacity(1 << 20, File::open(trace)?);
    let framing = walk(&mut r, prefix_packets)?;
    let mut prefix = vec![0u8; framing.prefix_bytes as usize];
    File::open(trace)?.read_exact(&mut prefix)?;
    File::create(scratch)?.write_all(&prefix)?;
    drop(prefix);
    kreplay_tests::ensure_decoder();
    let script = kreplay_tests::workspace_root().join("tests/python/decode_trace.py");
    let out = Command::new("python3").arg(script).arg(scratch).output()?;
    let _ = std::fs::remove_file(scratch);
    if !out.status.success() {
        bail!(
            "decoder failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let all: Vec<String> = v["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let (open, errors): (Vec<String>, Vec<String>) =
        all.into_iter().partition(|e| e.ends_with("never ends"));
    let decoded_slices = v["slices"].as_object().map_or(0, |m| {
        m.values()
            .filter_map(|s| s.as_array())
            .map(|s| s.len() as u64)
            .sum()
    });
    Ok(TraceCheck {
        bytes,
        framing,
        decoded_packets: v["packets"].as_u64().unwrap_or(0),
        decoded_slices,
        errors,
        open_at_cut: open.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_counted_and_the_prefix_measured() {
        // Three packets of 2, 0 and 200 bytes (200 needs a two-byte length varint).
        let mut file = vec![0x0a, 2, 0xaa, 0xbb, 0x0a, 0];
        file.extend([0x0a, 0xc8, 0x01]);
        file.extend([7u8; 200]);
        let f = walk(&mut &file[..], 2).unwrap();
        assert_eq!(
            f,
            Framing {
                packets: 3,
                prefix_bytes: 6
            }
        );
        let f = walk(&mut &file[..], 10).unwrap();
        assert_eq!(f.prefix_bytes, file.len() as u64);
    }

    #[test]
    fn a_truncated_or_foreign_field_is_an_error() {
        let cut = [0x0a, 5, 1, 2];
        assert!(
            walk(&mut &cut[..], 1)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        let foreign = [0x10, 1];
        assert!(
            walk(&mut &foreign[..], 1)
                .unwrap_err()
                .to_string()
                .contains("field tag 16 at byte 0")
        );
    }
}
