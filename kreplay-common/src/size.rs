//! Byte sizes as people type them (`4096`, `64K`, `16M`, `2G`; binary units) and as kreplay
//! prints them back: one parser and one label for the CLI's flags and the tool's settings.

/// Bytes of `123`, `64K`, `16M`, `2G` (binary units, either case); `None` for anything else or
/// an overflow.
pub fn parse(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, shift) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// `n` in the largest unit that divides it exactly: `64K`, `1M`, `3G`, `1000`.
pub fn label(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units_and_print_back() {
        for (text, bytes) in [
            ("4096", 4096),
            ("64K", 65536),
            ("64k", 65536),
            ("16M", 16 << 20),
            (" 2G ", 2 << 30),
        ] {
            assert_eq!(parse(text), Some(bytes), "{text}");
        }
        for bad in ["", "K", "4 K", "-1", "1.5M", "12T", "99999999999G"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            [0, 1000, 40960, 1 << 20, 3 << 30].map(label),
            ["0", "1000", "40K", "1M", "3G"]
        );
        assert_eq!(parse(&label(40960)), Some(40960));
    }
}
