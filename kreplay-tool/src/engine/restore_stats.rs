//! What one restore did ([`RestoreStats`]) and the adaptive rule that weighs its check against
//! writing every byte ([`check_pays`]).

/// What one restore did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Regions written back (at least one byte).
    pub regions: u64,
    /// Bytes written back.
    pub bytes: u64,
    /// Regions skipped because they are no longer the captured allocation.
    pub skipped: u64,
    /// Regions whose write-back failed: their memory is neither the snapshot nor the pass's
    /// output.
    pub failed: u64,
    /// Address of the first region whose write-back failed (0: none).
    pub first_failed: u64,
    /// Device bytes read and hashed or compared to find changed chunks.
    pub bytes_checked: u64,
    /// Chunks found changed.
    pub dirty_chunks: u64,
    /// Nanoseconds spent finding changed chunks.
    pub check_ns: u64,
    /// Nanoseconds spent writing back.
    pub write_ns: u64,
    /// The check was skipped (adaptive: it did not pay): every byte was written.
    pub check_skipped: bool,
    /// The one-pass restore covered every region this restore had to check (all of them, or
    /// all of the snapshot's write set), none having been freed.
    pub one_pass_all: bool,
    /// Every piece this restore looked at was compared with the determinism check's
    /// reference as it was hashed (a restore limited to the write set, after pass 0's hashes
    /// were adopted): [`Self::differ_chunks`] is that comparison's result.
    pub compared: bool,
    /// Chunks whose hash differed from the reference (with [`Self::compared`]).
    pub differ_chunks: u64,
}

/// Bytes a restore must write before its write rate is trusted for the adaptive decision.
pub const MEASURE_MIN: u64 = 1 << 20;

/// Whether checking pays, from one restore's measurements: checking costs `check_ns` for
/// `checked` bytes plus writing `written` bytes in `write_ns`; a full restore would write all
/// `checked` bytes as one copy per region. Its rate is the faster of the two measured: the
/// restore's writes (when at least [`MEASURE_MIN`] bytes) and `copy` = (ns, bytes) of the
/// snapshot's own copies (whole regions, the shape of a full restore; a link moves about as
/// fast each way). Scattered dirty runs copy slower than one region-sized copy (about a
/// quarter of its rate for 16 KiB runs: docs/gpu/h200-restore.md), so the writes alone would
/// overestimate a full restore. With neither measured, checking is assumed to pay.
pub fn check_pays(
    check_ns: u64,
    checked: u64,
    write_ns: u64,
    written: u64,
    copy: (u64, u64),
) -> bool {
    let rate = |ns: u64, bytes: u64| (bytes >= MEASURE_MIN).then(|| ns as f64 / bytes as f64);
    let per_byte = match (rate(write_ns, written), rate(copy.0, copy.1)) {
        (Some(w), Some(c)) => w.min(c),
        (Some(r), None) | (None, Some(r)) => r,
        (None, None) => return true,
    };
    checked == 0 || (check_ns + write_ns) as f64 <= per_byte * checked as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_pays_only_when_reading_costs_less_than_the_writes_it_spares() {
        let mib = 1u64 << 20;
        let none = (0, 0);
        // 64 MiB checked in 8 ms, 1 MiB written in 1 ms: a full restore would take 64 ms.
        assert!(check_pays(8_000_000, 64 * mib, 1_000_000, mib, none));
        // The same, but the snapshot copied 64 MiB in 4 ms: a full restore takes 4 ms, less
        // than checking (8 ms) plus writing.
        assert!(!check_pays(
            8_000_000,
            64 * mib,
            1_000_000,
            mib,
            (4_000_000, 64 * mib)
        ));
        // The H200 case: 1 GiB checked in 0.9 ms, 43 MB of scattered runs written in 0.13 ms,
        // the snapshot's 1 GiB copy in 0.51 ms: full restores are cheaper.
        assert!(!check_pays(
            900_000,
            1 << 30,
            130_000,
            43_000_000,
            (510_000, 1 << 30)
        ));
        // A slow snapshot copy does not hide fast writes: the faster rate counts.
        assert!(check_pays(
            8_000_000,
            64 * mib,
            1_000_000,
            mib,
            (640_000_000, 64 * mib)
        ));
        // The host path on a symmetric link: checking 64 MiB costs what writing it does.
        assert!(!check_pays(64_000_000, 64 * mib, 1_000_000, mib, none));
        // Everything dirty: the check is pure overhead.
        assert!(!check_pays(1, 64 * mib, 64_000_000, 64 * mib, none));
        // Too little written: the snapshot's copy rate (1 ns/byte) stands in for it.
        assert!(!check_pays(
            80 * mib,
            64 * mib,
            1_000,
            1,
            (64 * mib, 64 * mib)
        ));
        assert!(check_pays(
            8 * mib,
            64 * mib,
            1_000,
            1,
            (64 * mib, 64 * mib)
        ));
        // Nothing to measure at all: keep checking.
        assert!(check_pays(u64::MAX / 4, 64 * mib, 1_000, mib - 1, none));
    }
}
