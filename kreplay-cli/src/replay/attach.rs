//! `kreplay replay -p PID`: replay in a running process, through kreplay-tool's control
//! channel (`docs/attach.md`). The session lasts until Ctrl-C, `--duration`, the process's
//! exit, or the tool saying that the `--max-dispatches` replays are written; the tool's stream
//! then goes through the same summary as a started command's.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kreplay_common::replay_config::ReplaySettings;

use crate::attach::Heard;
use crate::quick_exit;

/// What the first interrupt of `replay -p` prints.
pub const STOPPING: &str =
    "kreplay: stopping: ending the session, then writing the trace; Ctrl-C again to exit at once";

/// Replays in process `pid` with `settings` until an interrupt, `duration`, its exit, or its
/// `--max-dispatches` replays are written.
pub fn run(
    pid: u32,
    lib: &Path,
    settings: &ReplaySettings,
    duration: Option<Duration>,
) -> Result<()> {
    if crate::attach::maps_cuda(pid as i32).unwrap_or(false) {
        eprintln!(
            "kreplay: warning: CUPTI 13 has crashed processes whose first CUPTI callback subscriber came after CUPTI's activity records had been on; kreplay subscribes first in its own first session, but a profiler that ran earlier in this process (torch.profiler, Nsight Systems) may have left that state (docs/attach.md)"
        );
    }
    let (mut session, opened) = crate::attach::open(pid as i32, lib, settings)
        .with_context(|| format!("cannot replay in process {pid}"))?;
    eprintln!(
        "kreplay: process {pid}: replaying ({}, its thread held {:.1} ms); stop with Ctrl-C",
        if opened.loaded_now {
            "kreplay-tool loaded"
        } else {
            "kreplay-tool already loaded"
        },
        (opened.load_pause + opened.entry_pause).as_secs_f64() * 1e3
    );
    let started = Instant::now();
    // The progress line, redrawn in place on a terminal as the tool reports its counts.
    let terminal = std::io::stderr().is_terminal();
    let mut shown = false;
    let clear = |shown: &mut bool| {
        if std::mem::take(shown) {
            eprint!("\r\x1b[K");
        }
    };
    loop {
        if quick_exit::first_seen()
            || duration.is_some_and(|d| started.elapsed() >= d)
            || matches!(
                crate::inject::target::state(pid as i32),
                None | Some('Z' | 'X')
            )
        {
            break;
        }
        match session.poll(Duration::from_millis(20)) {
            Heard::Nothing => {}
            Heard::Progress(c) => {
                tracing::debug!(
                    pid,
                    replayed = c[0],
                    passes = c[1],
                    inside_ns = c[2],
                    "replay progress"
                );
                if terminal {
                    eprint!("\r\x1b[K{}", crate::replay::progress::line(c));
                    shown = true;
                }
            }
            Heard::Limit => {
                clear(&mut shown);
                if let Some(n) = settings.max_dispatches {
                    eprintln!("kreplay: process {pid}: {n} dispatches replayed (--max-dispatches)");
                }
                break;
            }
            Heard::Closed => break,
        }
    }
    clear(&mut shown);
    session
        .end()
        .with_context(|| format!("ending the session with process {pid}"))
}
