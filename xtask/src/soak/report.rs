//! The soak's results file: header, sampled series with their verdicts, the trace's counts and
//! validity, Prometheus's scrape record.
use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use anyhow::Result;

use super::{
    judge,
    prom::Prometheus,
    sample::{Descriptors, Sample, Series},
    trace_check::TraceCheck,
};

/// The results file's opening: what the soaks do and the rules (each section says when and
/// how it was run).
pub fn header() -> String {
    format!(
        "# kreplay soak\n\nProduced by `cargo xtask soak` (as root, not in CI); each section \
         says when, with which arguments and on which machine it was run, and a run with \
         `--only` replaces only the sections of the soaks it ran. The trace and the audit soaks \
         run side by side, each in a PID namespace of its own (`unshare --pid --mount-proc`) \
         with its own workload: `trace --all` and the audit see, and rescan, only those \
         processes, and their workloads load different copies of the simulated runtime. The \
         replay soak runs afterwards. Memory and descriptors are read from `/proc/PID/status` \
         (VmRSS, VmHWM) and `/proc/PID/fd`; for the audit, also what each descriptor is open \
         on (its link there), so that one that stays open is told from one open for a moment.\n\n{}\n\n",
        judge::RULES
    )
}

/// The load average now, as a sentence.
pub fn load_line(when: &str) -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "Load average {when}: {} (2 cores shared with other work).",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn verdict_text(v: judge::Verdict, unit: &str) -> String {
    match v {
        judge::Verdict::Pass { first, last } | judge::Verdict::Fail { first, last } => format!(
            "{} ({first} → {last}{unit})",
            if v.passed() { "pass" } else { "**FAIL**" }
        ),
        judge::Verdict::TooShort(n) => format!("no verdict ({n} samples)"),
    }
}

/// One row per sampled process: samples, RSS and fds first/last/min/max, peak, verdicts.
pub fn series_table(out: &mut String, series: &Series, period: Duration) {
    let _ = writeln!(
        out,
        "Sampled every {} s. RSS in KiB; verdicts compare the first and last thirds' highest \
         values after warm-up.\n\n\
         | process | samples | RSS first | RSS last | RSS min–max | VmHWM at end | fds first | fds last | fds min–max | RSS flat | fds |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        period.as_secs_f64()
    );
    for (role, s) in series {
        row(out, role, s);
    }
    let _ = writeln!(out);
}

/// The merge phase of the long run, and each process's peaks in the short and the long run.
pub fn peaks_table(out: &mut String, short: &Series, after: &Series, during: &Series) {
    let _ = writeln!(
        out,
        "| process | samples after the application | RSS min–max then | fds min–max then | VmHWM, 1,000 dispatches | VmHWM, 10,000 dispatches | peak fds, 1,000 | peak fds, 10,000 |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|"
    );
    let peak = |s: &Series, role: &str, f: fn(&Sample) -> u64| {
        s.iter()
            .filter(|(r, _)| r.starts_with(role))
            .flat_map(|(_, v)| v.iter().map(f))
            .max()
            .unwrap_or(0)
    };
    let mut long = during.clone();
    long.extend(after.iter().map(|(r, v)| (r.clone(), v.clone())));
    for role in during.keys() {
        let then = after.iter().find(|(r, _)| r.starts_with(role.as_str()));
        let mm = |f: fn(&Sample) -> u64| {
            then.map_or("—".to_string(), |(_, v)| {
                format!(
                    "{}–{}",
                    v.iter().map(f).min().unwrap_or(0),
                    v.iter().map(f).max().unwrap_or(0)
                )
            })
        };
        let _ = writeln!(
            out,
            "| {role} | {} | {} | {} | {} | {} | {} | {} |",
            then.map_or(0, |(_, v)| v.len()),
            mm(|x| x.rss_kb),
            mm(|x| x.fds),
            peak(short, role, |x| x.hwm_kb),
            peak(&long, role, |x| x.hwm_kb),
            peak(short, role, |x| x.fds),
            peak(&long, role, |x| x.fds),
        );
    }
    let _ = writeln!(out);
}

/// Per process, what its descriptors were open on: at the first judged sample (after the
/// warm-up) and at the last, what the last had that the first did not (what stayed open), and
/// what some samples had beyond the first (open for a moment: a scrape's connection, a `/proc`
/// file being read), with the number of samples that saw each.
pub fn descriptor_changes(out: &mut String, descriptors: &Descriptors) {
    for (role, samples) in descriptors {
        let skip = samples.len() * judge::WARMUP_PERCENT / 100;
        let (Some(start), Some(end)) = (samples.get(skip), samples.last()) else {
            continue;
        };
        let stayed = beyond(end, start);
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &samples[skip..] {
            let mut extra = beyond(s, start);
            extra.dedup();
            for k in extra {
                *seen.entry(k).or_default() += 1;
            }
        }
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "Descriptors of {role}, by what they are open on: {} at the first judged sample, {} at \
             the last; open at the last and not at the first: {}; beyond the first's in some \
             samples: {}.\n",
            start.len(),
            end.len(),
            list(stayed.iter().map(|k| format!("`{k}`")).collect()),
            list(
                seen.iter()
                    .map(|(k, n)| format!("`{k}` in {n} of {} samples", samples.len() - skip))
                    .collect()
            )
        );
    }
}

/// The kinds `a` holds more often than `b` (both sorted), once per extra one.
fn beyond<'a>(a: &'a [String], b: &[String]) -> Vec<&'a str> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for k in b {
        *left.entry(k).or_default() += 1;
    }
    let mut extra = vec![];
    for k in a {
        match left.get_mut(k.as_str()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => extra.push(k.as_str()),
        }
    }
    extra
}

/// A table row: the sampled columns and the thirds' verdicts.
fn row(out: &mut String, role: &str, s: &[Sample]) {
    let (Some(first), Some(last)) = (s.first(), s.last()) else {
        return;
    };
    let rss: Vec<u64> = s.iter().map(|x| x.rss_kb).collect();
    let fds: Vec<u64> = s.iter().map(|x| x.fds).collect();
    let mm = |v: &[u64]| {
        format!(
            "{}–{}",
            v.iter().min().unwrap_or(&0),
            v.iter().max().unwrap_or(&0)
        )
    };
    let _ = write!(
        out,
        "| {role} | {} | {} | {} | {} | {} | {} | {} | {} |",
        s.len(),
        first.rss_kb,
        last.rss_kb,
        mm(&rss),
        last.hwm_kb,
        first.fds,
        last.fds,
        mm(&fds),
    );
    let _ = writeln!(
        out,
        " {} | {} |",
        verdict_text(judge::rss_flat(&rss), " KiB"),
        verdict_text(judge::fds_steady(&fds), "")
    );
}

/// Prometheus's record of the audit's scrapes over the `secs` seconds since its first.
pub fn scrapes(out: &mut String, p: &Prometheus, secs: u64) -> Result<()> {
    let q = |e: &str| p.query_value(&format!("{e}(up{{job=\"kreplay-audit\"}}[{secs}s])"));
    let attempted = q("count_over_time")?.unwrap_or(0.0) as u64;
    let succeeded = q("sum_over_time")?.unwrap_or(0.0) as u64;
    let (pct, enough) = judge::scrape_share(attempted, secs, 95.0);
    let slowest = p
        .query_value(&format!(
            "max_over_time(scrape_duration_seconds{{job=\"kreplay-audit\"}}[{secs}s])"
        ))?
        .unwrap_or(0.0);
    let series = p
        .query_value("count(kreplay_audit_calls_total)")?
        .unwrap_or(0.0);
    let _ = writeln!(
        out,
        "Prometheus at {} (Debian's `prometheus` package), scraping the audit's `/metrics` on \
         loopback every 1 s, over the {secs} s since its first scrape: {attempted} scrapes \
         recorded (`count_over_time(up[{secs}s])`), {succeeded} successful \
         (`sum_over_time`), {} failed; {secs} expected, so **{pct} %** made — {} (the rule: no \
         failed scrape, ≥ 95 % of the expected made). The slowest scrape took {:.1} ms. At \
         the end it held {series:.0} `kreplay_audit_calls_total` series.\n",
        p.addr,
        attempted - succeeded.min(attempted),
        if enough && attempted == succeeded {
            "pass"
        } else {
            "**FAIL**"
        },
        slowest * 1e3
    );
    Ok(())
}

/// The `calls` column of `api`'s rows in the audit's last (whole-run) report, summed over its
/// processes.
pub fn audit_whole_calls(report: &str, api: &str) -> Option<u64> {
    let start = report.rfind("whole audit")?;
    report[start..]
        .lines()
        .filter_map(|l| summary_calls(l, api))
        .reduce(|a, b| a + b)
}

/// The audit's whole-run count against the calls the workload made.
pub fn audit_counts(out: &mut String, report: &str, ok: bool, known: u64) {
    let counted = audit_whole_calls(report, "hipStreamSynchronize");
    let _ = writeln!(
        out,
        "The audit stopped on SIGINT and exited {}; Prometheus was stopped. The audit's \
         whole-run report counted {} `hipStreamSynchronize` calls, the workload made {known} — \
         {}.\n",
        if ok { "0" } else { "with an error" },
        counted.map_or("?".into(), |c| c.to_string()),
        if counted == Some(known) {
            "exact"
        } else {
            "**MISMATCH**"
        }
    );
}

/// The `API calls` column of `api`'s row in the trace summary.
pub fn summary_calls(stderr: &str, api: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()? == api).then(|| w.next()?.parse().ok())?
    })
}

/// The trace's counts against the calls the workload made.
pub fn trace_counts(out: &mut String, stderr: &str, ok: bool, known: u64, render_s: u64) {
    let recorded = summary_calls(stderr, "hipStreamSynchronize");
    let dropped = crate::numbers::field(stderr, "events dropped:").map(|d| d as u64);
    let verdict = match (recorded, dropped) {
        (Some(r), Some(d)) if r + d == known => "pass: recorded + dropped = made".to_string(),
        (Some(r), Some(d)) => format!("**FAIL**: recorded + dropped = {}, made {known}", r + d),
        _ => "**FAIL**: no summary".to_string(),
    };
    let _ = writeln!(
        out,
        "`kreplay trace --all` stopped on SIGINT and exited {} after {render_s} s of \
         rendering. `hipStreamSynchronize` calls the workload made: {known}; the trace's \
         summary: {} recorded, {} events dropped — {verdict}.\n\nIts closing lines:\n\n```\n{}\n```\n",
        if ok { "0" } else { "with an error" },
        recorded.map_or("?".into(), |r| r.to_string()),
        dropped.map_or("?".into(), |r| r.to_string()),
        stderr
            .lines()
            .filter(|l| !l.starts_with("kreplay: tracing") && !l.contains("events/s"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Disk per recorded call: the stream files as the paced run ended (`streams`) and the
/// rendered trace (`trace`), over the calls the summary in `stderr` recorded.
pub fn disk_per_call(out: &mut String, streams: u64, trace: u64, stderr: &str) {
    let Some(recorded) = summary_calls(stderr, "hipStreamSynchronize").filter(|&r| r > 0) else {
        return;
    };
    let per = |b: u64| b as f64 / recorded as f64;
    let _ = writeln!(
        out,
        "Disk per recorded call: the stream files held {streams} bytes as the paced run ended \
         ({:.1} bytes per call, `ApiCall` packed: `docs/stream-format.md`), the trace {trace} \
         bytes ({:.1} per call): {:.1} bytes per call on disk while the trace renders.\n",
        per(streams),
        per(trace),
        per(streams + trace)
    );
}

/// The trace file's size and checks.
pub fn trace_validity(out: &mut String, check: &Result<TraceCheck>) {
    match check {
        Ok(c) => {
            let valid = c.errors.is_empty()
                && c.decoded_packets == c.framing.packets.min(super::DECODED_PACKETS);
            let _ = writeln!(
                out,
                "The trace: {} bytes ({:.1} GiB), {} packets, every byte in a well-formed \
                 `Trace.packet`. Its first {} packets ({} bytes) decoded with the `perfetto` \
                 PyPI package's protos (`tests/python/decode_trace.py`): {} slices, {} \
                 errors{}, {} slices left open by the cut — {}.\n",
                c.bytes,
                c.bytes as f64 / (1u64 << 30) as f64,
                c.framing.packets,
                c.decoded_packets,
                c.framing.prefix_bytes,
                c.decoded_slices,
                c.errors.len(),
                if c.errors.is_empty() {
                    String::new()
                } else {
                    format!(" (first: {})", c.errors[0])
                },
                c.open_at_cut,
                if valid { "valid" } else { "**INVALID**" }
            );
        }
        Err(e) => {
            let _ = writeln!(out, "The trace: **INVALID**: {e:#}.\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Descriptors, audit_whole_calls, descriptor_changes, summary_calls};

    #[test]
    fn descriptors_that_stay_and_that_pass_are_told_apart() {
        let v = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // 10 samples: the first is warm-up; judged from the second (two sockets).
        let mut samples = vec![v(&["pipe"]), v(&["socket", "socket"])];
        samples.extend((0..5).map(|_| v(&["socket", "socket"])));
        samples.push(v(&["/proc/N/maps", "socket", "socket", "socket"]));
        samples.push(v(&["socket", "socket", "socket"]));
        samples.push(v(&["anon_inode:bpf-map", "socket", "socket"]));
        let d = Descriptors::from([("kreplay audit".to_string(), samples)]);
        let mut out = String::new();
        descriptor_changes(&mut out, &d);
        assert_eq!(
            out,
            "Descriptors of kreplay audit, by what they are open on: 2 at the first judged sample, \
             3 at the last; open at the last and not at the first: `anon_inode:bpf-map`; beyond \
             the first's in some samples: `/proc/N/maps` in 1 of 9 samples, \
             `anon_inode:bpf-map` in 1 of 9 samples, `socket` in 2 of 9 samples.\n\n"
        );
    }

    #[test]
    fn summary_rows_are_read_by_api_name() {
        let stderr = "API                              calls  errors\n\
            hipStreamSynchronize          4000000       0      812.000\n\
            hipMalloc                           1       0\n\
            events dropped: 3\n";
        assert_eq!(
            summary_calls(stderr, "hipStreamSynchronize"),
            Some(4_000_000)
        );
        assert_eq!(summary_calls(stderr, "hipMalloc"), Some(1));
        assert_eq!(summary_calls(stderr, "hipFree"), None);
    }

    #[test]
    fn the_audits_last_report_is_summed_over_processes() {
        let report = "== kreplay audit at 60.0s: last interval (60.0s), 1 processes\n\
            callloop (pid 7): 5 calls\n  hipStreamSynchronize  5  1.0\n\
            == kreplay audit at 62.2s: whole audit (62.2s), 2 processes\n\
            callloop (pid 7): 9 calls\n  API  calls\n  hipStreamSynchronize  9  1.0\n\
            callloop (pid 8): 2000000 calls\n  hipStreamSynchronize  2000000  1.0\n";
        assert_eq!(
            audit_whole_calls(report, "hipStreamSynchronize"),
            Some(2_000_009)
        );
        assert_eq!(audit_whole_calls(report, "hipMalloc"), None);
        assert_eq!(audit_whole_calls("no report", "hipStreamSynchronize"), None);
    }
}
