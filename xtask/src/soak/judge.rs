//! The soak's verdicts on a sampled series: is resident memory flat, did descriptors leak.
//!
//! Rules (stated in `docs/bench/soak.md` by [`RULES`]): the first [`WARMUP_PERCENT`] % of the
//! samples are warm-up and not judged; the rest is cut into thirds. Memory is *flat* when the
//! last third's highest RSS is at most the first third's highest plus [`RSS_MARGIN_PERCENT`] %
//! of it plus [`RSS_SLACK_KB`]; descriptors *do not leak* when the last third's highest count
//! is at most the first third's highest.

/// Share of the samples, from the start, that is warm-up (percent).
pub const WARMUP_PERCENT: usize = 10;
/// Growth of the highest RSS allowed between the first and the last third (percent).
pub const RSS_MARGIN_PERCENT: u64 = 5;
/// Growth allowed on top of the margin (KiB): allocator noise on a small process.
pub const RSS_SLACK_KB: u64 = 1024;
/// Fewest judged samples (after warm-up) for a verdict.
pub const MIN_SAMPLES: usize = 6;

/// The rules, as the results file states them.
pub const RULES: &str = "The first 10 % of each series is warm-up and not judged; the rest is \
    cut into thirds. RSS is **flat** when the last third's highest VmRSS ≤ the first third's \
    highest × 1.05 + 1 MiB. Descriptors **do not leak** when the last third's highest open-fd \
    count ≤ the first third's highest. A series with fewer than 6 samples after warm-up gets \
    no verdict. Replay is judged on the samples taken while the application runs (kreplay's \
    merge afterwards is reported). Prometheus: every scrape it made succeeded, and it made \
    ≥ 95 % of the one-per-second scrapes expected (it runs late itself on a loaded machine).";

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The series passes: first third's max, last third's max.
    Pass { first: u64, last: u64 },
    /// The series grew past the rule: first third's max, last third's max.
    Fail { first: u64, last: u64 },
    /// Too few samples after warm-up to judge (how many there were).
    TooShort(usize),
}

impl Verdict {
    /// Whether it is a pass.
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Pass { .. })
    }
}

/// The first and last thirds' maxima of `series` after warm-up, or the judged count when it
/// is under [`MIN_SAMPLES`].
fn thirds(series: &[u64]) -> Result<(u64, u64), usize> {
    let skip = series.len() * WARMUP_PERCENT / 100;
    let judged = &series[skip..];
    if judged.len() < MIN_SAMPLES {
        return Err(judged.len());
    }
    let third = judged.len() / 3;
    let first = judged[..third].iter().copied().max().unwrap_or(0);
    let last = judged[judged.len() - third..]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    Ok((first, last))
}

/// Whether resident memory (KiB samples) stayed flat.
pub fn rss_flat(series_kb: &[u64]) -> Verdict {
    match thirds(series_kb) {
        Err(n) => Verdict::TooShort(n),
        Ok((first, last)) => {
            let allowed = first + first * RSS_MARGIN_PERCENT / 100 + RSS_SLACK_KB;
            if last <= allowed {
                Verdict::Pass { first, last }
            } else {
                Verdict::Fail { first, last }
            }
        }
    }
}

/// Whether open descriptors (count samples) stayed put.
pub fn fds_steady(series: &[u64]) -> Verdict {
    match thirds(series) {
        Err(n) => Verdict::TooShort(n),
        Ok((first, last)) if last <= first => Verdict::Pass { first, last },
        Ok((first, last)) => Verdict::Fail { first, last },
    }
}

/// Successful scrapes against expected ones: the share (percent, one decimal) and whether it
/// reaches `min_percent`.
pub fn scrape_share(succeeded: u64, expected: u64, min_percent: f64) -> (f64, bool) {
    if expected == 0 {
        return (0.0, false);
    }
    let pct = (succeeded as f64 * 1000.0 / expected as f64).round() / 10.0;
    (pct, pct >= min_percent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_skipped_and_thirds_compared() {
        // 20 samples: the first 2 are warm-up (a big start-up peak that must not count),
        // judged 18 → thirds of 6; first third max 1000, last third max 1050.
        let mut s = vec![9000, 9000];
        s.extend([1000, 990, 1000, 980, 1000, 1000]);
        s.extend([1010, 1020, 1030, 1030, 1040, 1040]);
        s.extend([1050, 1040, 1050, 1030, 1050, 1050]);
        assert_eq!(
            rss_flat(&s),
            Verdict::Pass {
                first: 1000,
                last: 1050
            }
        );
    }

    #[test]
    fn growth_past_margin_and_slack_fails() {
        // first third max 100_000 KiB: allowed 100_000 + 5_000 + 1_024 = 106_024.
        let mut s = vec![100_000u64; 10];
        s.extend([106_024; 10]);
        assert!(rss_flat(&s[..]).passed());
        let mut s = vec![100_000u64; 10];
        s.extend([106_025; 10]);
        assert_eq!(
            rss_flat(&s),
            Verdict::Fail {
                first: 100_000,
                last: 106_025
            }
        );
    }

    #[test]
    fn one_more_fd_at_the_end_is_a_leak() {
        let steady = [12u64, 12, 13, 12, 12, 12, 12, 13, 12, 12];
        assert_eq!(
            fds_steady(&steady),
            Verdict::Pass {
                first: 13,
                last: 13
            }
        );
        let leak = [12u64, 12, 12, 12, 13, 13, 14, 14, 15, 15];
        // 10 samples: 1 warm-up, 9 judged, thirds of 3: [12,12,12] and [14,15,15].
        assert_eq!(
            fds_steady(&leak),
            Verdict::Fail {
                first: 12,
                last: 15
            }
        );
    }

    #[test]
    fn too_few_samples_get_no_verdict() {
        assert_eq!(rss_flat(&[1, 2, 3, 4, 5]), Verdict::TooShort(5));
        assert!(rss_flat(&[1, 2, 3, 4, 5, 6]).passed());
        assert_eq!(fds_steady(&[1, 2, 3, 4, 5]), Verdict::TooShort(5));
        assert!(!fds_steady(&[]).passed());
    }

    #[test]
    fn scrape_share_rounds_to_one_decimal() {
        assert_eq!(scrape_share(1790, 1800, 99.0), (99.4, true));
        assert_eq!(scrape_share(1700, 1800, 99.0), (94.4, false));
        assert_eq!(scrape_share(0, 0, 99.0), (0.0, false));
    }
}
