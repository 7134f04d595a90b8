//! The replay soak: `kreplay replay --probes` over 10,000 dispatches of the simulated ROCm
//! runtime's `high_qps`, sampling the CLI's processes and the application, and the sim's count
//! of live allocations at shutdown (`KRSIM_REPORT_LIVE`) against a bare run and a short one.
use std::{
    fmt::Write as _,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use super::{
    Series, report,
    sample::{Sampler, comm, descendants},
};
use crate::run::say;

/// Threads of `high_qps`; each runs `dispatches / THREADS` iterations of one kernel launch.
const THREADS: u64 = 4;
/// Dispatches of the soak run.
const DISPATCHES: u64 = 10_000;
/// Dispatches of the comparison run.
const SHORT: u64 = 1_000;
/// Role suffix of the samples taken after the application exited.
const AFTER: &str = ", after the application";

/// `krsim: live allocations at shutdown: N (B bytes) of M made` → (N, B, M).
pub fn live_line(stderr: &str) -> Option<(u64, u64, u64)> {
    let rest = stderr
        .lines()
        .find_map(|l| l.strip_prefix("krsim: live allocations at shutdown: "))?;
    let mut w = rest.split_whitespace();
    let n = w.next()?.parse().ok()?;
    let bytes = w.next()?.strip_prefix('(')?.parse().ok()?;
    let made = w.nth(2)?.parse().ok()?;
    Some((n, bytes, made))
}

/// `kreplay: N dispatches replayed (P passes)` → N.
pub fn replayed(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let rest = l.strip_prefix("kreplay: ")?;
        let (n, tail) = rest.split_once(' ')?;
        tail.starts_with("dispatches replayed")
            .then(|| n.parse().ok())?
    })
}

/// One run of `high_qps` for `dispatches` (under `kreplay replay --probes` with `kreplay`
/// given); returns its stderr.
fn run(kreplay: Option<&Path>, dispatches: u64, sample: bool) -> Result<(String, super::Series)> {
    let app = kreplay_tests::workload("high_qps");
    let iterations = (dispatches / THREADS).to_string();
    let trace = kreplay_tests::scratch("soak").join("replay.pftrace");
    let mut c = match kreplay {
        Some(k) => {
            let mut c = Command::new(k);
            c.args(["replay", "--probes", "--passes", "2", "-o"])
                .arg(&trace)
                .arg("--")
                .arg(&app);
            c
        }
        None => Command::new(&app),
    };
    c.args([&THREADS.to_string(), &iterations])
        .env("KRSIM_REPORT_LIVE", "1");
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting high_qps")?;
    let root = child.id();
    let sampler = sample.then(|| {
        Sampler::start(Duration::from_millis(250), move || {
            let kids: Vec<(u32, String)> = descendants(root)
                .into_iter()
                .filter_map(|p| Some((p, comm(p)?)))
                .collect();
            let app = kids.iter().find(|(_, c)| c == "high_qps").map(|(p, _)| *p);
            // Judged while the application runs; after it, kreplay merges (reported only).
            let phase = if app.is_some() { "" } else { AFTER };
            let mut roles = vec![(format!("kreplay replay{phase}"), root)];
            if let Some((p, _)) = kids.iter().find(|(_, c)| c == "kreplay") {
                roles.push((format!("kreplay trace (--probes){phase}"), *p));
            }
            if let Some(p) = app {
                roles.push(("application (high_qps)".to_string(), p));
            }
            roles
        })
    });
    let out = child.wait_with_output().context("running high_qps")?;
    let series = sampler.map(Sampler::finish).unwrap_or_default();
    let _ = std::fs::remove_file(&trace);
    // kreplay's table and closing line are on stdout, the sim's line on stderr.
    let stderr =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("high_qps run failed ({}): {stderr}", out.status);
    }
    Ok((stderr, series))
}

/// Runs the replay soak and writes its section.
pub fn soak(kreplay: &Path, out: &mut String) -> Result<()> {
    say("soak", "replay: bare run");
    let (bare, _) = run(None, DISPATCHES, false)?;
    say("soak", &format!("replay: {SHORT} dispatches"));
    let (short, short_series) = run(Some(kreplay), SHORT, true)?;
    say("soak", &format!("replay: {DISPATCHES} dispatches"));
    let t0 = std::time::Instant::now();
    let (long, series) = run(Some(kreplay), DISPATCHES, true)?;
    let secs = t0.elapsed().as_secs_f64();
    let _ = writeln!(
        out,
        "## `kreplay replay --probes` over {DISPATCHES} dispatches\n\n{}\n\n\
         Application: the simulated ROCm runtime's `high_qps {THREADS} {}` ({THREADS} threads, \
         each launching one kernel per iteration and allocating and freeing device memory), \
         `--passes 2`; the run took {secs:.1} s.\n",
        report::load_line("at the replay"),
        DISPATCHES / THREADS
    );
    let (after, during): (Series, Series) =
        series.into_iter().partition(|(r, _)| r.ends_with(AFTER));
    let _ = writeln!(out, "While the application runs (the dispatches):\n");
    report::series_table(out, &during, Duration::from_millis(250));
    let _ = writeln!(
        out,
        "After it exits kreplay merges the tool's and the probes' streams into the trace; that \
         phase's memory grows with the trace, so it is reported, not judged:\n"
    );
    report::peaks_table(out, &short_series, &after, &during);
    let _ = writeln!(
        out,
        "Live allocations of the simulated runtime when HSA shuts down (after the tool's \
         `OnUnload`; `KRSIM_REPORT_LIVE=1`), and dispatches replayed:\n\n\
         | run | dispatches replayed | live at shutdown | live bytes | allocations made |\n\
         |---|---:|---:|---:|---:|"
    );
    let mut lives = vec![];
    for (name, text) in [
        ("bare (no kreplay)", &bare),
        ("replay, 1,000 dispatches", &short),
        ("replay, 10,000 dispatches", &long),
    ] {
        let (n, b, m) = live_line(text).context("no krsim live-allocation line")?;
        lives.push((n, b));
        let _ = writeln!(
            out,
            "| {name} | {} | {n} | {b} | {m} |",
            replayed(text).map_or("—".into(), |r| r.to_string())
        );
    }
    let wrote = long
        .lines()
        .filter(|l| l.starts_with("kreplay: wrote") || l.starts_with("kreplay: kreplay's own"))
        .collect::<Vec<_>>()
        .join("\n");
    let _ = writeln!(
        out,
        "\nkreplay's closing lines of the 10,000-dispatch run:\n\n```\n{wrote}\n```"
    );
    let bare_live = lives[0];
    let leak = lives[1..]
        .iter()
        .any(|&(n, b)| n > bare_live.0 || b > bare_live.1);
    let _ = writeln!(
        out,
        "\nSnapshot allocations: {} (the rule: no replay run ends with more live allocations, \
         or more live bytes, than the bare run; what the bare run leaves is the simulated \
         runtime's own, per HSA queue, and varies with scheduling).\n",
        if leak { "**LEAK**" } else { "no leak" }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sims_live_line_and_the_replay_count_are_read() {
        let stderr = "launches: 10000\n\
            krsim: live allocations at shutdown: 2 (8388608 bytes) of 757 made\n\
            kreplay: 200 dispatches replayed (400 passes); 0.018 s of the run's 0.038 s\n";
        assert_eq!(live_line(stderr), Some((2, 8_388_608, 757)));
        assert_eq!(replayed(stderr), Some(200));
        assert_eq!(live_line("launches: 1\n"), None);
        assert_eq!(replayed("kreplay: wrote x.pftrace\n"), None);
    }
}
