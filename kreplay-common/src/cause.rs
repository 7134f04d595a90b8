//! A message's cause: its hex addresses shown as `0x…` and its decimal numbers (with a size
//! unit, `4M`) as `N`, so one cause reported for many regions, sizes or passes is one group.
//! The CLI groups decline reasons by it; the tool says each warning once per cause.

/// `message` with addresses and numbers masked; digits inside words (`sm_90`, `_v2`) stay.
pub fn of(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let b = message.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_';
        if word_start && b[i] == b'0' && b.get(i + 1) == Some(&b'x') {
            let mut j = i + 2;
            while j < b.len() && b[j].is_ascii_hexdigit() {
                j += 1;
            }
            out.push_str("0x…");
            i = j;
        } else if word_start && b[i].is_ascii_digit() {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j < b.len() && matches!(b[j], b'K' | b'M' | b'G') {
                j += 1;
            }
            out.push('N');
            i = j;
        } else {
            let c = message[i..].chars().next().unwrap_or('?');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn causes_mask_addresses_sizes_and_counts() {
        assert_eq!(
            of("device allocation of 16384 bytes for region 0x7f7e8a21e000 failed"),
            "device allocation of N bytes for region 0x… failed"
        );
        assert_eq!(
            of("footprint 4M (4194304 bytes) exceeds --snapshot-budget 1M"),
            "footprint N (N bytes) exceeds --snapshot-budget N"
        );
        assert_eq!(
            of("sm_90 cuMemcpyDtoH_v2 pass 12"),
            "sm_90 cuMemcpyDtoH_v2 pass N"
        );
    }
}
