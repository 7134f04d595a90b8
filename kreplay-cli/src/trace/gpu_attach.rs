//! `kreplay trace -p PID --gpu`: each running process gets kreplay-tool in observe mode with
//! the GPU timeline on, writing its stream into the run's stream directory, for as long as
//! the trace runs ([`crate::attach`]). A process that cannot have it is named in one line and
//! traced without it (its API calls are still probed).

use std::path::Path;
use std::time::Instant;

use kreplay_common::replay_config::ReplaySettings;

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
pub fn open_all(pids: &[u32], tool: &Path, dir: &Path, quiet: bool) -> Vec<Session> {
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
                out.push(s);
            }
            Err(e) => eprintln!(
                "kreplay: --gpu: no GPU timeline for process {pid}: {e}; tracing its API calls only"
            ),
        }
    }
    out
}

/// Ends every session: each tool stops, flushes and closes its stream before this returns
/// (or its time is up, which is said in one line).
pub fn end_all(sessions: Vec<Session>) {
    for s in sessions {
        let pid = s.pid();
        if let Err(e) = s.end() {
            eprintln!("kreplay: process {pid}: ending the GPU timeline: {e}");
        }
    }
}
