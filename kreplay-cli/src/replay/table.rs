//! How `kreplay replay` shows its summary: the per-kernel table and the restore table for a
//! terminal (demangled kernel names shortened to fit, declines grouped by cause with one
//! example), the closing lines (time inside kreplay, kernels left out by `--kernel` or
//! `--max-dispatches`), and the same rows as JSON lines for scripts (`docs/replay-json.md`).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::audit::render::json_string;
use crate::trace::kernels::demangle;

use crate::replay::summary::KernelRow;

/// Widest kernel name in the tables; longer names lose their middle.
pub const NAME_WIDTH: usize = 40;

/// A kernel name for a terminal: demangled without return type or parameters, template
/// arguments shown as `<…>`, `(anonymous namespace)` as `(anon)`, no spaces, and the middle
/// elided past [`NAME_WIDTH`] characters. The full name goes to the trace and the JSON.
pub fn short_name(raw: &str) -> String {
    let full = demangle(raw);
    let mut out = String::new();
    let mut depth = 0usize;
    let mut parens = 0usize;
    let base = full.replace("(anonymous namespace)", "(anon)");
    for c in base.chars() {
        if parens > 0 {
            match c {
                '(' => parens += 1,
                ')' => parens -= 1,
                _ => {}
            }
            continue;
        }
        match c {
            '<' => {
                if depth == 0 {
                    out.push_str("<…>");
                }
                depth += 1;
            }
            '>' => depth = depth.saturating_sub(1),
            // The parameter list (a demangled function's first parenthesis outside templates).
            '(' if depth == 0 && !out.is_empty() && !out.ends_with("::") => parens = 1,
            _ if depth > 0 => {}
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    // `void f(int)` -> `voidf`: a return type shows as a prefix glued to the name; drop it.
    if let Some((ret, name)) = base.split_once(' ')
        && !ret.contains('<')
        && !ret.contains('(')
        && out.starts_with(ret)
        && !name.is_empty()
    {
        out.drain(..ret.len());
    }
    elide(&out, NAME_WIDTH)
}

/// `s` cut to `width` characters by replacing its middle with `…`.
pub fn elide(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_owned();
    }
    let head = (width - 1) * 2 / 3;
    let tail = width - 1 - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// Unique short names for `rows` (a `#2`, `#3` suffix where two kernels shorten alike).
pub(crate) fn labels(rows: &BTreeMap<String, KernelRow>) -> Vec<String> {
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    rows.keys()
        .map(|raw| {
            // A row of one process among several (`name [pid N]`): the pid stays whole.
            let s = match raw.rsplit_once(" [pid ") {
                Some((name, pid)) if pid.ends_with(']') => {
                    let tag = format!(" [pid {pid}");
                    let short = short_name(name);
                    let room = NAME_WIDTH.saturating_sub(tag.chars().count()).max(8);
                    format!("{}{tag}", elide(&short, room))
                }
                _ => short_name(raw),
            };
            let n = seen.entry(s.clone()).or_default();
            *n += 1;
            if *n == 1 { s } else { format!("{s}#{n}") }
        })
        .collect()
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// `5`, or `1-5` when dispatches ran different numbers of passes, `-` with none replayed.
fn passes_label(k: &KernelRow) -> String {
    match k.passes_per_dispatch {
        None => "-".into(),
        Some((a, b)) if a == b => a.to_string(),
        Some((a, b)) => format!("{a}-{b}"),
    }
}

/// The declines column: `3x cause example; 1x other` (`-` for none).
fn declines_label(k: &KernelRow) -> String {
    if k.declines.is_empty() {
        return "-".into();
    }
    let mut v: Vec<_> = k.declines.values().collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(a.example.cmp(&b.example)));
    v.iter()
        .map(|d| format!("{}x {}", d.count, d.example))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The per-kernel table, then (for kernels that were restored) the restore table.
pub fn render(rows: &BTreeMap<String, KernelRow>) -> String {
    let mut s = String::new();
    let w = NAME_WIDTH;
    let _ = writeln!(
        s,
        "{:<w$} {:>10} {:>8} {:>6} {:>10} {:>10} {:>10} {:>4} {:>11} {:>14} {:>10} {:>6} {:>6}  declines",
        "kernel",
        "dispatches",
        "replayed",
        "passes",
        "min_us",
        "median_us",
        "max_us",
        "time",
        "snapshot_us",
        "snapshot_bytes",
        "restore_us",
        "failed",
        "nondet"
    );
    for (label, k) in labels(rows).iter().zip(rows.values()) {
        let (pass_ns, on_gpu) = k.shown_pass_ns();
        let _ = writeln!(
            s,
            "{:<w$} {:>10} {:>8} {:>6} {:>10} {:>10} {:>10} {:>4} {:>11} {:>14} {:>10} {:>6} {:>6}  {}",
            label,
            k.dispatches,
            k.replayed,
            passes_label(k),
            us(pass_ns.min()),
            us(pass_ns.median()),
            us(pass_ns.max()),
            match (k.pass_ns.count(), on_gpu) {
                (0, _) => "-",
                (_, true) => "gpu",
                (_, false) => "host",
            },
            us(k.snapshot_ns.median()),
            k.snapshot_bytes_each(),
            us(k.restore_ns.median()),
            k.failed_restores,
            k.nondeterministic,
            declines_label(k),
        );
    }
    let restored: Vec<_> = labels(rows)
        .into_iter()
        .zip(rows.values())
        .filter(|(_, k)| !k.modes.is_empty())
        .collect();
    if restored.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\n{:<w$} {:>28} {:>8} {:>14} {:>14} {:>14} {:>12} {:>10} {:>14}",
        "restore",
        "mode",
        "restores",
        "bytes_hashed",
        "bytes_checked",
        "bytes_restored",
        "dirty_chunks",
        "check_us",
        "us_per_restore"
    );
    for (label, k) in restored {
        let modes: Vec<&str> = k.modes.iter().map(String::as_str).collect();
        let _ = writeln!(
            s,
            "{:<w$} {:>28} {:>8} {:>14} {:>14} {:>14} {:>12} {:>10} {:>14}",
            label,
            modes.join(","),
            k.restore_ns.count(),
            k.bytes_hashed,
            k.bytes_checked,
            k.bytes_restored,
            k.dirty_chunks,
            us(k.check_ns),
            us(k.restore_ns
                .sum()
                .checked_div(k.restore_ns.count())
                .unwrap_or(0)),
        );
    }
    s
}

/// What the run as a whole reports after the tables.
pub struct RunTotals {
    /// Wall time of the command, in ns.
    pub wall_ns: u64,
    /// Time the application's threads spent inside kreplay, in ns.
    pub inside_ns: u64,
    /// `--kernel`, when given.
    pub kernel_filter: Option<regex::Regex>,
    /// `--max-dispatches`, when given.
    pub max_dispatches: Option<u64>,
    /// `--passes`.
    pub passes: u32,
}

/// The closing lines: dispatches replayed and time inside kreplay, and which kernels ran
/// once because `--kernel` or `--max-dispatches` left them out.
pub fn footer(rows: &BTreeMap<String, KernelRow>, t: &RunTotals) -> String {
    let mut s = String::new();
    let replayed: u64 = rows.values().map(|k| k.replayed).sum();
    let passes: u64 = rows.values().map(|k| k.passes).sum();
    let share = if t.wall_ns == 0 {
        0.0
    } else {
        100.0 * t.inside_ns as f64 / t.wall_ns as f64
    };
    let _ = writeln!(
        s,
        "kreplay: {replayed} dispatches replayed ({passes} passes); {:.3} s of the run's {:.3} s inside kreplay ({share:.1}%)",
        t.inside_ns as f64 / 1e9,
        t.wall_ns as f64 / 1e9,
    );
    if t.passes == 1 {
        let _ = writeln!(
            s,
            "kreplay: with --passes 1 every dispatch runs once, as without kreplay: nothing is snapshotted or replayed (2 or more passes replay)"
        );
    }
    if let Some(re) = &t.kernel_filter {
        let (n, d) = rows
            .iter()
            .filter(|(name, _)| !re.is_match(name) && !re.is_match(&demangle(name)))
            .fold((0u64, 0u64), |(n, d), (_, k)| (n + 1, d + k.left_out));
        if d > 0 {
            let _ = writeln!(
                s,
                "kreplay: {d} dispatches of {n} kernels not matched by --kernel {:?} ran once",
                re.as_str()
            );
        }
    }
    if let Some(m) = t.max_dispatches {
        let over: u64 = rows
            .iter()
            .filter(|(name, _)| {
                t.kernel_filter
                    .as_ref()
                    .is_none_or(|re| re.is_match(name) || re.is_match(&demangle(name)))
            })
            .map(|(_, k)| k.left_out)
            .sum();
        if over > 0 {
            let _ = writeln!(
                s,
                "kreplay: {over} dispatches after the first {m} (--max-dispatches) ran once"
            );
        }
    }
    s
}

/// Writes [`json`]'s lines to `path`: under a temporary name beside it, renamed over it once
/// complete.
pub fn write_json(
    path: &std::path::Path,
    rows: &BTreeMap<String, KernelRow>,
    t: &RunTotals,
) -> std::io::Result<()> {
    let (pending, mut file) = crate::output::PendingFile::create(path)?;
    std::io::Write::write_all(&mut file, json(rows, t).as_bytes())?;
    pending.commit(file)
}

/// The rows and the run as JSON lines (schema `kreplay-replay/1`, `docs/replay-json.md`).
pub fn json(rows: &BTreeMap<String, KernelRow>, t: &RunTotals) -> String {
    let mut s = String::new();
    for (raw, k) in rows {
        s.push_str("{\"schema\":\"kreplay-replay/1\",\"kind\":\"kernel\",\"kernel\":");
        json_string(&mut s, &demangle(raw));
        s.push_str(",\"mangled\":");
        json_string(&mut s, raw);
        let (lo, hi) = k.passes_per_dispatch.unwrap_or((0, 0));
        let _ = write!(
            s,
            ",\"dispatches\":{},\"replayed\":{},\"passes\":{},\"passes_per_dispatch\":{{\"min\":{lo},\"max\":{hi}}},\"pass_ns\":{{\"min\":{},\"median\":{},\"max\":{}}},\"snapshots\":{},\"snapshot_ns_median\":{},\"snapshot_bytes\":{},\"restores\":{},\"restore_ns_median\":{},\"failed_restores\":{},\"nondeterministic\":{}",
            k.dispatches,
            k.replayed,
            k.passes,
            k.pass_ns.min(),
            k.pass_ns.median(),
            k.pass_ns.max(),
            k.snapshot_ns.count(),
            k.snapshot_ns.median(),
            k.snapshot_bytes,
            k.restore_ns.count(),
            k.restore_ns.median(),
            k.failed_restores,
            k.nondeterministic,
        );
        if k.gpu_ns.count() > 0 {
            let _ = write!(
                s,
                ",\"pass_gpu_ns\":{{\"passes\":{},\"min\":{},\"median\":{},\"max\":{}}}",
                k.gpu_ns.count(),
                k.gpu_ns.min(),
                k.gpu_ns.median(),
                k.gpu_ns.max()
            );
        } else {
            s.push_str(",\"pass_gpu_ns\":null");
        }
        let _ = write!(
            s,
            ",\"bytes_hashed\":{},\"bytes_checked\":{},\"bytes_restored\":{},\"dirty_chunks\":{},\"check_ns\":{},\"modes\":[",
            k.bytes_hashed, k.bytes_checked, k.bytes_restored, k.dirty_chunks, k.check_ns
        );
        for (i, m) in k.modes.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            json_string(&mut s, m);
        }
        s.push_str("],\"declines\":[");
        for (i, (cause, d)) in k.declines.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"cause\":");
            json_string(&mut s, cause);
            let _ = write!(s, ",\"count\":{},\"example\":", d.count);
            json_string(&mut s, &d.example);
            s.push('}');
        }
        s.push_str("]}\n");
    }
    let _ = writeln!(
        s,
        "{{\"schema\":\"kreplay-replay/1\",\"kind\":\"run\",\"wall_ns\":{},\"inside_ns\":{},\"dispatches\":{},\"replayed\":{}}}",
        t.wall_ns,
        t.inside_ns,
        rows.values().map(|k| k.dispatches).sum::<u64>(),
        rows.values().map(|k| k.replayed).sum::<u64>(),
    );
    s
}
