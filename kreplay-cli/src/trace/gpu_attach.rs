//! `kreplay trace -p PID --gpu`: each running process gets kreplay-tool in observe mode with
//! the GPU timeline on, writing its stream into the run's stream directory, for as long as
//! the trace runs ([`crate::attach`]). A process that cannot have it is named in one line and
//! traced without it (its API calls are still probed).

use std::path::Path;
use std::time::Instant;

use kreplay_common::replay_config::ReplaySettings;
use kreplay_common::stream::{Record, StreamKind, StreamReader};

use crate::attach::{self, Session};

/// The settings of a GPU-timeline session writing to `dir`.
pub fn settings(dir: &Path) -> ReplaySettings {
    ReplaySettings {
        gpu_timeline: Some(true),
        output_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

/// Opens a session with each of `pids`; prints one line per process (unless `quiet` and it
/// worked).
pub fn open_all(pids: &[u32], tool: &Path, dir: &Path, quiet: bool) -> Vec<(Session, u32)> {
    let mut out = Vec::new();
    for &pid in pids {
        let t = Instant::now();
        match attach::open(pid as i32, tool, &settings(dir)) {
            Ok((s, opened)) => {
                if !quiet {
                    eprintln!(
                        "kreplay: process {pid}: GPU timeline on ({}, its thread held {:.1} ms, ready after {:.0} ms)",
                        if opened.loaded_now {
                            "kreplay-tool loaded"
                        } else {
                            "kreplay-tool already loaded"
                        },
                        (opened.load_pause + opened.entry_pause).as_secs_f64() * 1e3,
                        t.elapsed().as_secs_f64() * 1e3
                    );
                }
                out.push((s, opened.nspid));
            }
            Err(e) => eprintln!(
                "kreplay: --gpu: no GPU timeline for process {pid}: {e}; tracing its API calls only"
            ),
        }
    }
    out
}

/// Ends every session: each tool stops, flushes and closes its stream before this returns
/// (or its time is up, which is said in one line). Unless `quiet`, says per process how many
/// GPU records its stream holds and when the first began, counted from kreplay's start.
pub fn end_all(sessions: Vec<(Session, u32)>, dir: &Path, quiet: bool) {
    for (s, nspid) in sessions {
        let pid = s.pid();
        if let Err(e) = s.end() {
            eprintln!("kreplay: process {pid}: ending the GPU timeline: {e}");
        }
        if quiet {
            continue;
        }
        let (n, first) = gpu_records(&dir.join(StreamKind::Tool.file_name(nspid)));
        let since = match (first, started_ns()) {
            (Some(f), Some(s)) => format!(
                ", the first {:.0} ms after kreplay started",
                f.saturating_sub(s) as f64 / 1e6
            ),
            _ => String::new(),
        };
        eprintln!("kreplay: process {pid}: GPU timeline off: {n} GPU records{since}");
    }
}

/// The GPU records (kernels, copies) of a tool stream, and the earliest start among them.
fn gpu_records(path: &Path) -> (u64, Option<u64>) {
    let Ok(r) = StreamReader::open(path) else {
        return (0, None);
    };
    let (mut n, mut first) = (0u64, None::<u64>);
    for rec in r {
        let start = match rec {
            Record::Dispatch(d) => d.start_ns,
            Record::GpuCopy(c) => c.start_ns,
            _ => continue,
        };
        n += 1;
        if start > 0 {
            first = Some(first.map_or(start, |f| f.min(start)));
        }
    }
    (n, first)
}

/// When this process started, on CLOCK_MONOTONIC: `/proc/self/stat`'s start time is in clock
/// ticks (10 ms steps) on CLOCK_BOOTTIME, which runs ahead of CLOCK_MONOTONIC by the time the
/// machine spent suspended (a VM restored from a snapshot: hours).
fn started_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks: u64 = stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let boot_ns = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    };
    let ahead = boot_ns(libc::CLOCK_BOOTTIME)?.saturating_sub(boot_ns(libc::CLOCK_MONOTONIC)?);
    Some((ticks * 1_000_000_000 / hz as u64).saturating_sub(ahead))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_started_before_now_on_the_monotonic_clock() {
        let s = started_ns().unwrap();
        let now = kreplay_common::stream::monotonic_ns();
        assert!(s <= now && now - s < 3_600_000_000_000, "{s} {now}");
    }
}
