//! The long soaks: `kreplay trace --all` and `kreplay audit` (scraped by Prometheus), each
//! against its own paced `callloop`, sampled every few seconds.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use super::{
    CAPACITY_CALLS, DECODED_PACKETS, Options, PERIOD, Running, callloop, paced_for, prom, report,
    sample::Sampler, trace_check,
};
use crate::run::say;

/// Disk one traced call takes at the end of a trace: its stream record (a packed `ApiCall`:
/// 49 bytes measured for the workload's `hipStreamSynchronize(NULL)`, whose unused argument
/// registers `rdx` and `rcx` hold nonzero values) and its two Perfetto packets (70 bytes),
/// both on disk while the trace renders. The report gives the run's measured figure.
const BYTES_PER_CALL: u64 = 120;
/// Disk left free for everyone else while the trace soak runs.
const DISK_RESERVE: u64 = 10 << 30;

/// The simulated runtime's libraries, as named in `--lib` arguments.
const SIM_LIBS: [&str; 2] = ["libamdhip64.so.6", "libhsa-runtime64.so.1"];

/// `--lib` arguments for the copies in `dir`.
fn lib_args(dir: &Path) -> Vec<String> {
    SIM_LIBS
        .iter()
        .flat_map(|l| {
            [
                "--lib".to_string(),
                dir.join(l).to_string_lossy().into_owned(),
            ]
        })
        .collect()
}

/// The audit workload's copy of the simulated runtime (other files, other inodes: the trace's
/// system-wide probes on the worktree's copy do not fire for it), made if missing.
pub fn audit_libs() -> Result<PathBuf> {
    let dir = kreplay_tests::scratch("soak").join("audit-sim");
    std::fs::create_dir_all(&dir)?;
    for l in SIM_LIBS {
        std::fs::copy(kreplay_tests::sim_dir().join(l), dir.join(l))
            .with_context(|| format!("copying {l}"))?;
    }
    Ok(dir)
}

/// Bytes free for unprivileged use on the filesystem holding `path`.
fn disk_free(path: &Path) -> Result<u64> {
    let c = std::ffi::CString::new(path.to_string_lossy().as_bytes())?;
    // SAFETY: statvfs writes into the zeroed struct it is given; c is a valid C string.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        st
    };
    Ok(st.f_bavail * st.f_frsize)
}

/// Bytes of the files in `dir` (the stream directory: files only, no subdirectories); 0 when
/// it cannot be read.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(|e| e.ok()?.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    })
}

/// Seconds of tracing at `rate` calls/s that `free` bytes hold, keeping the reserve, at most
/// `want`.
pub fn trace_seconds(free: u64, rate: u64, want: u64) -> u64 {
    (free.saturating_sub(DISK_RESERVE) / (BYTES_PER_CALL * rate.max(1))).min(want)
}

/// The `kreplay trace --all` soak.
pub fn trace(opts: &Options, out: &mut String) -> Result<()> {
    let scratch = kreplay_tests::scratch("soak");
    let free = disk_free(&scratch)?;
    let secs = trace_seconds(free, opts.rate, opts.minutes * 60);
    say("soak", "trace: bare capacity run");
    let (_, bare_rate) = callloop(1, CAPACITY_CALLS, 0, None)?;
    let trace_file = scratch.join("soak.pftrace");
    let t = trace_file.to_string_lossy().into_owned();
    let mut args = vec!["trace", "--all", "-o", &t];
    let libs = lib_args(&kreplay_tests::sim_dir());
    args.extend(libs.iter().map(String::as_str));
    let trace = Running::start(&args, &scratch.join("trace.err"), "probes attached")?;
    say("soak", "trace: capacity run under the trace");
    let (mut known, probed_rate) = callloop(1, CAPACITY_CALLS, 0, None)?;
    let pid = trace.pid();
    let sampler = Sampler::start(PERIOD, move || vec![("kreplay trace".to_string(), pid)]);
    say("soak", &format!("trace: {secs} s paced at {}/s", opts.rate));
    let (n, paced_rate, runs) = paced_for(secs, opts.rate, None)?;
    known += n;
    let series = sampler.finish();
    let streams_bytes = dir_bytes(&scratch.join("soak.pftrace.streams"));
    let _ = writeln!(
        out,
        "## `kreplay trace --all`, {:.1} min\n\n{}\n\n\
         Command: `kreplay trace --all -o FILE {}` (the worktree's copies of the simulated \
         runtime attached from the start). Workload: `tests/bench/callloop.c` (one thread \
         calling `hipStreamSynchronize(NULL)`) in {runs} processes of at most a minute each, \
         paced to {} calls/s. Unpaced ({CAPACITY_CALLS} calls): **{bare_rate:.0} calls/s bare**, \
         **{probed_rate:.0} calls/s under the trace**; paced, under the trace: \
         **{paced_rate:.0} calls/s** over the {secs} s. The disk had {:.1} GiB free: at about \
         {BYTES_PER_CALL} bytes per traced call (stream record + Perfetto packets, both on disk \
         while the trace renders) and {} GiB kept free for others, it holds {} min at this rate \
         (asked: {} min).\n",
        secs as f64 / 60.0,
        report::load_line("as the trace soak ended"),
        libs.join(" ")
            .replace(&kreplay_tests::workspace_root().display().to_string(), "."),
        opts.rate,
        free as f64 / (1u64 << 30) as f64,
        DISK_RESERVE >> 30,
        trace_seconds(free, opts.rate, u64::MAX) / 60,
        opts.minutes
    );
    report::series_table(out, &series, PERIOD);
    say("soak", "trace: stopping (rendering)");
    let stop_t = Instant::now();
    let (text, ok) = trace.stop(Duration::from_secs(3600))?;
    report::trace_counts(out, &text, ok, known, stop_t.elapsed().as_secs());
    if ok {
        say("soak", "trace: checking the trace");
        let check = trace_check::check(
            &trace_file,
            DECODED_PACKETS,
            &scratch.join("prefix.pftrace"),
        );
        report::trace_validity(out, &check);
        let trace_bytes = std::fs::metadata(&trace_file).map_or(0, |m| m.len());
        report::disk_per_call(out, streams_bytes, trace_bytes, &text);
    }
    let _ = std::fs::remove_file(&trace_file);
    let _ = writeln!(
        out,
        "The trace was deleted after the check (the command makes it again).\n"
    );
    Ok(())
}

/// The `kreplay audit` soak, scraped every second by Prometheus.
pub fn audit(opts: &Options, out: &mut String) -> Result<()> {
    let scratch = kreplay_tests::scratch("soak");
    let libs_dir = audit_libs()?;
    let addr = format!("127.0.0.1:{}", prom::free_port()?);
    let mut args = vec!["audit", "--prometheus", &addr, "--interval", "60s"];
    let libs = lib_args(&libs_dir);
    args.extend(libs.iter().map(String::as_str));
    let audit = Running::start(&args, &scratch.join("audit.err"), "metrics at")?;
    let prometheus = prom::Prometheus::start(&scratch.join("prometheus"), addr.parse()?)?;
    // Counted from its first scrape, which comes a few seconds after it is ready.
    while prometheus.query_value("count(up)")?.is_none() {
        std::thread::sleep(Duration::from_millis(200));
    }
    let ready = Instant::now();
    say("soak", "audit: capacity run under the audit");
    let (mut known, probed_rate) = callloop(1, CAPACITY_CALLS, 0, Some(&libs_dir))?;
    let pid = audit.pid();
    let sampler = Sampler::start(PERIOD, move || vec![("kreplay audit".to_string(), pid)]);
    let secs = opts.minutes * 60;
    say("soak", &format!("audit: {secs} s paced at {}/s", opts.rate));
    let (n, paced_rate, runs) = paced_for(secs, opts.rate, Some(&libs_dir))?;
    known += n;
    let (series, descriptors) = sampler.finish_with_descriptors();
    let _ = writeln!(
        out,
        "## `kreplay audit`, {} min, scraped every second by Prometheus\n\n{}\n\n\
         Command: `kreplay audit --prometheus {addr} --interval 60s --lib …` (a copy of the \
         simulated runtime of its own). Workload: `callloop` in {runs} processes of at most a \
         minute each, paced to {} calls/s: **{paced_rate:.0} calls/s** achieved; unpaced under the audit \
         ({CAPACITY_CALLS} calls): {probed_rate:.0} calls/s.\n",
        opts.minutes,
        report::load_line("as the audit soak ended"),
        opts.rate
    );
    report::series_table(out, &series, PERIOD);
    report::descriptor_changes(out, &descriptors);
    report::scrapes(out, &prometheus, ready.elapsed().as_secs())?;
    let report_file = audit.stdout.clone();
    let (_, ok) = audit.stop(Duration::from_secs(60))?;
    drop(prometheus);
    let text = std::fs::read_to_string(report_file).unwrap_or_default();
    report::audit_counts(out, &text, ok, known);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::trace_seconds;

    #[test]
    fn the_trace_is_cut_to_what_the_disk_holds() {
        // 60 GiB free, 10 kept: 50 GiB / (120 B × 220,000/s) = 2033 s.
        assert_eq!(trace_seconds(60 << 30, 220_000, 3600), 2033);
        assert_eq!(trace_seconds(40 << 30, 220_000, 1800), 1220);
        assert_eq!(trace_seconds(600 << 30, 220_000, 1800), 1800);
        assert_eq!(trace_seconds(10 << 30, 220_000, 1800), 0);
    }
}
