//! The discovery section of `cargo xtask bench`: what `kreplay trace --all` costs to find
//! runtime libraries as processes map them — its own CPU while the host idles, with and without
//! thousands of other processes; the mapping check's time per `mmap`; what starting a process
//! costs beside a bare start; and how long a process that maps a runtime library file not
//! probed yet is held.
use std::{
    fmt::Write as _,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::numbers::median;
use crate::run::say;

/// Other processes on the host in the crowded runs.
const CROWD: usize = 2000;
/// How long kreplay's own CPU is measured while nothing maps a runtime.
const IDLE: Duration = Duration::from_secs(10);
/// Process starts per exec loop.
const EXECS: usize = 500;
/// Fresh copies of the runtime, each held once per file.
const COPIES: usize = 5;

/// kreplay's CPU time so far (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit(") ").next().context("stat")?;
    let f: Vec<&str> = rest.split(' ').collect();
    Ok(f.get(11).context("utime")?.parse::<u64>()? + f.get(12).context("stime")?.parse::<u64>()?)
}

/// Microseconds per start of `/bin/true`, over [`EXECS`] starts.
fn exec_us() -> Result<f64> {
    let t = Instant::now();
    for _ in 0..EXECS {
        Command::new("/bin/true").status()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / EXECS as f64)
}

/// A fresh copy of the simulated runtime and the saxpy workload under `dir`; the workload.
fn fresh_copy(dir: &Path) -> Result<PathBuf> {
    let sim = kreplay_tests::sim_dir();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("workloads"))?;
    for lib in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        std::fs::copy(sim.join(lib), dir.join(lib))?;
    }
    let wl = dir.join("workloads/saxpy");
    std::fs::copy(sim.join("workloads/saxpy"), &wl)?;
    Ok(wl)
}

/// Milliseconds one short saxpy run takes.
fn run_ms(wl: &Path) -> Result<f64> {
    let t = Instant::now();
    let st = Command::new(wl)
        .args(["1", "16", "1"])
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        bail!("{} failed", wl.display());
    }
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// One measured run of `kreplay trace --all` with `crowd` other processes on the host.
struct Figures {
    idle_pct: f64,
    exec_bare: f64,
    exec_traced: f64,
    first_ms: Vec<f64>,
    bare_ms: Vec<f64>,
    stderr: String,
}

fn measure(bin: &Path, dir: &Path, crowd: usize) -> Result<Figures> {
    let mut sleepers: Vec<Child> = (0..crowd)
        .map(|_| Command::new("sleep").arg("3600").spawn())
        .collect::<std::io::Result<_>>()?;
    let result = (|| {
        // The crowd settles before anything is timed.
        std::thread::sleep(Duration::from_secs(2));
        let exec_before = exec_us()?;
        let copies: Vec<PathBuf> = (0..COPIES)
            .map(|i| fresh_copy(&dir.join(format!("copy{i}"))))
            .collect::<Result<_>>()?;
        let mut k = Command::new(bin)
            .args(["trace", "--all", "-q", "--no-summary", "--bpf-stats", "-o"])
            .arg(dir.join("all.pftrace"))
            .stderr(Stdio::piped())
            .spawn()
            .context("starting kreplay")?;
        let mut err = BufReader::new(k.stderr.take().context("stderr")?);
        let drain = std::thread::spawn(move || {
            let mut all = String::new();
            let mut line = String::new();
            while err.read_line(&mut line).unwrap_or(0) > 0 {
                all.push_str(&line);
                line.clear();
            }
            all
        });
        // `-q` prints no tracing line: wait for the probes the way a user would not need to.
        std::thread::sleep(Duration::from_secs(3));
        let c0 = cpu_ticks(k.id())?;
        std::thread::sleep(IDLE);
        let ticks = cpu_ticks(k.id())? - c0;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let idle_pct = ticks as f64 / hz / IDLE.as_secs_f64() * 100.0;
        let exec_traced = exec_us()?;
        let first_ms: Vec<f64> = copies.iter().map(|c| run_ms(c)).collect::<Result<_>>()?;
        // SAFETY: plain signal send to the kreplay this bench started.
        unsafe { libc::kill(k.id() as i32, libc::SIGINT) };
        k.wait()?;
        let stderr = drain.join().unwrap_or_default();
        let bare_ms: Vec<f64> = copies.iter().map(|c| run_ms(c)).collect::<Result<_>>()?;
        let exec_bare = exec_before.min(exec_us()?);
        Ok(Figures {
            idle_pct,
            exec_bare,
            exec_traced,
            first_ms,
            bare_ms,
            stderr,
        })
    })();
    for s in &mut sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
    result
}

/// The text after `prefix` on the first stderr line that starts with it.
fn line_after<'a>(stderr: &'a str, prefix: &str) -> &'a str {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or("(not reported)")
}

/// Appends the discovery figures to `out`.
pub fn run(out: &mut String) -> Result<()> {
    if !kreplay_tests::is_root() {
        say("bench", "discovery: skipped (needs root to load BPF)");
        let _ = writeln!(out, "## Discovery\n\nskipped: not root\n");
        return Ok(());
    }
    let bin = kreplay_tests::target_dir().join("release").join("kreplay");
    let dir = kreplay_tests::scratch("bench-discovery");
    let _ = writeln!(
        out,
        "## Discovery\n\n`kreplay trace --all -q --no-summary --bpf-stats` on a host with its own \
         processes and with {CROWD} more (`sleep`). *kreplay CPU idle*: its user+system time over \
         {}s while nothing maps a runtime, in % of one core. *exec*: µs per start of `/bin/true` \
         ({EXECS} starts) while kreplay traces, beside bare (the faster of a loop before kreplay \
         starts and one after it ends). *first run*: ms of a \
         short `saxpy 1 16 1` from a fresh copy of the simulated runtime in a directory of its \
         own (HIP then HSA: two new files, each holds the process once), under kreplay, beside \
         the same copy run bare after; median of {COPIES} copies. *held*: kreplay's own report \
         of the holds; *map_hook*: the kernel's statistics for the check on every `mmap` \
         (statistics on: they add two clock reads per run).\n\n\
         | other processes | kreplay CPU idle | exec bare µs | exec traced µs | first run ms | bare ms |\n\
         |---:|---:|---:|---:|---:|---:|",
        IDLE.as_secs()
    );
    let mut notes = Vec::new();
    for crowd in [0, CROWD] {
        say("bench", &format!("discovery: {crowd} other processes"));
        let f = measure(&bin, &dir, crowd)?;
        let _ = writeln!(
            out,
            "| {crowd} | {:.1}% | {:.0} | {:.0} | {:.1} | {:.1} |",
            f.idle_pct,
            f.exec_bare,
            f.exec_traced,
            median(f.first_ms.clone()),
            median(f.bare_ms.clone()),
        );
        notes.push(format!(
            "- {crowd} other processes: held: {}; {}",
            line_after(&f.stderr, "new runtime library files: "),
            line_after(&f.stderr, "bpf program time: map_hook ")
        ));
    }
    let _ = writeln!(out, "\n{}\n", notes.join("\n"));
    Ok(())
}
