//! Rendering an audit [`Report`] as a text table or as one line of JSON (schema in
//! docs/audit-json.md).
use std::fmt::Write as _;

use kreplay_common::audit::bucket_upper_ns;

use super::report::{Report, ReportKind};

/// Version of the JSON schema (docs/audit-json.md); bumped on incompatible changes.
pub const JSON_SCHEMA: &str = "kreplay-audit/1";

/// A duration in ns, human-readable (`850ns`, `12.3us`, `2.10ms`, `1.50s`).
pub fn human_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", v / 1e6)
    } else {
        format!("{:.2}s", v / 1e9)
    }
}

fn quantile_text(q: Option<u64>) -> String {
    match q {
        Some(ns) => human_ns(ns),
        None => format!(
            ">{}",
            human_ns(bucket_upper_ns(kreplay_common::audit::HIST_BUCKETS - 2).unwrap_or(0))
        ),
    }
}

/// The report as a table: one block per process, most expensive first.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let what = match r.kind {
        ReportKind::Interval => "last interval",
        ReportKind::Final => "whole audit",
    };
    let _ = writeln!(
        s,
        "== kreplay audit at {:.1}s: {what} ({:.1}s), {} processes{}",
        r.elapsed_s,
        r.window_s,
        r.processes.len(),
        if r.omitted > 0 {
            format!(" (+{} more not shown)", r.omitted)
        } else {
            String::new()
        }
    );
    for p in &r.processes {
        let _ = writeln!(
            s,
            "{} (pid {}): {} calls, {:.2}% of wall time in runtime calls",
            p.comm,
            p.pid,
            p.calls,
            p.runtime_share * 100.0
        );
        let _ = writeln!(
            s,
            "  {:<30} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10}",
            "API", "calls", "calls/s", "p50<=", "p90<=", "p99<=", "total"
        );
        for a in &p.apis {
            let _ = writeln!(
                s,
                "  {:<30} {:>10} {:>10.1} {:>9} {:>9} {:>9} {:>10}",
                a.api,
                a.calls,
                a.calls_per_s,
                quantile_text(a.quantiles_ns[0]),
                quantile_text(a.quantiles_ns[1]),
                quantile_text(a.quantiles_ns[2]),
                human_ns(a.total_ns)
            );
        }
    }
    let o = &r.overhead;
    match o.ns_per_call {
        Some(ns) => {
            let _ = writeln!(
                s,
                "kreplay's own cost: {ns:.0} ns of BPF program time per intercepted call ({} calls)",
                o.intercepted_calls
            );
        }
        None if !o.measured => {
            let _ = writeln!(
                s,
                "kreplay's own cost: not measured (BPF statistics unavailable)"
            );
        }
        None => {}
    }
    let l = &r.lost;
    if l.starts_full + l.missing_entry + l.stats_full > 0 {
        let _ = writeln!(
            s,
            "uncounted calls: {} (in-flight map full), {} (return without entry), {} (stats map full)",
            l.starts_full, l.missing_entry, l.stats_full
        );
    }
    s
}

/// Appends `text` as a JSON string literal.
pub fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

fn json_opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".into(), |n| n.to_string())
}

/// The report as one line of JSON (no trailing newline).
pub fn json(r: &Report, host: &str) -> String {
    let mut s = String::with_capacity(1024);
    s.push_str("{\"schema\":");
    json_string(&mut s, JSON_SCHEMA);
    s.push_str(",\"host\":");
    json_string(&mut s, host);
    let _ = write!(
        s,
        ",\"kind\":\"{}\",\"elapsed_s\":{},\"window_s\":{},\"omitted_processes\":{},\"processes\":[",
        r.kind.as_str(),
        json_f64(r.elapsed_s),
        json_f64(r.window_s),
        r.omitted
    );
    for (i, p) in r.processes.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{{\"pid\":{},\"comm\":", p.pid);
        json_string(&mut s, &p.comm);
        let _ = write!(
            s,
            ",\"calls\":{},\"runtime_ns\":{},\"runtime_share\":{},\"apis\":[",
            p.calls,
            p.runtime_ns,
            json_f64(p.runtime_share)
        );
        for (j, a) in p.apis.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"api\":\"{}\",\"layer\":\"{}\",\"calls\":{},\"calls_per_s\":{},\"total_ns\":{},\
                 \"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"buckets\":[",
                a.api,
                a.layer,
                a.calls,
                json_f64(a.calls_per_s),
                a.total_ns,
                json_opt(a.quantiles_ns[0]),
                json_opt(a.quantiles_ns[1]),
                json_opt(a.quantiles_ns[2]),
            );
            let mut first = true;
            for (b, &n) in a.buckets.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                if !first {
                    s.push(',');
                }
                first = false;
                let _ = write!(
                    s,
                    "{{\"le_ns\":{},\"count\":{n}}}",
                    json_opt(bucket_upper_ns(b))
                );
            }
            s.push_str("]}");
        }
        s.push_str("]}");
    }
    let o = &r.overhead;
    let _ = write!(
        s,
        "],\"overhead\":{{\"measured\":{},\"bpf_run_time_ns\":{},\"intercepted_calls\":{},\"ns_per_call\":{}}}",
        o.measured,
        o.bpf_run_time_ns,
        o.intercepted_calls,
        o.ns_per_call.map_or_else(|| "null".into(), json_f64)
    );
    let l = &r.lost;
    let _ = write!(
        s,
        ",\"uncounted\":{{\"starts_full\":{},\"missing_entry\":{},\"stats_full\":{}}}}}",
        l.starts_full, l.missing_entry, l.stats_full
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{
        maps::Lost,
        report::{ApiRow, Overhead, ProcessRow},
    };
    use kreplay_common::audit::{HIST_BUCKETS, bucket_of};

    fn sample() -> Report {
        let mut buckets = [0; HIST_BUCKETS];
        buckets[bucket_of(2_000_000)] = 2;
        Report {
            kind: ReportKind::Final,
            elapsed_s: 2.0,
            window_s: 2.0,
            processes: vec![ProcessRow {
                pid: 42,
                comm: "a \"b\"\n".into(),
                calls: 2,
                runtime_ns: 4_000_000,
                runtime_share: 0.002,
                apis: vec![ApiRow {
                    api: "hipDeviceSynchronize",
                    layer: "hip",
                    calls: 2,
                    calls_per_s: 1.0,
                    total_ns: 4_000_000,
                    quantiles_ns: [Some(1 << 21), Some(1 << 21), None],
                    buckets,
                }],
            }],
            omitted: 0,
            lost: Lost::default(),
            overhead: Overhead {
                measured: true,
                bpf_run_time_ns: 300,
                intercepted_calls: 2,
                ns_per_call: Some(150.0),
            },
        }
    }

    #[test]
    fn json_is_exact() {
        assert_eq!(
            json(&sample(), "h"),
            "{\"schema\":\"kreplay-audit/1\",\"host\":\"h\",\"kind\":\"final\",\"elapsed_s\":2,\
             \"window_s\":2,\"omitted_processes\":0,\"processes\":[{\"pid\":42,\"comm\":\"a \\\"b\\\"\\n\",\
             \"calls\":2,\"runtime_ns\":4000000,\"runtime_share\":0.002,\"apis\":[{\"api\":\
             \"hipDeviceSynchronize\",\"layer\":\"hip\",\"calls\":2,\"calls_per_s\":1,\"total_ns\":4000000,\
             \"p50_ns\":2097152,\"p90_ns\":2097152,\"p99_ns\":null,\"buckets\":[{\"le_ns\":2097152,\
             \"count\":2}]}]}],\"overhead\":{\"measured\":true,\"bpf_run_time_ns\":300,\
             \"intercepted_calls\":2,\"ns_per_call\":150},\"uncounted\":{\"starts_full\":0,\
             \"missing_entry\":0,\"stats_full\":0}}"
        );
    }

    #[test]
    fn table_shows_quantiles_and_cost() {
        let t = table(&sample());
        assert!(t.contains("(pid 42): 2 calls, 0.20% of wall time"), "{t}");
        assert!(t.contains("hipDeviceSynchronize"), "{t}");
        assert!(t.contains("2.10ms   >68.72s"), "{t}");
        assert!(
            t.contains("150 ns of BPF program time per intercepted call (2 calls)"),
            "{t}"
        );
        assert_eq!(human_ns(850), "850ns");
        assert_eq!(human_ns(12_345), "12.3us");
        assert_eq!(human_ns(1_500_000_000), "1.50s");
    }
}
