//! `kreplay probe`'s loop: feeds a [`Watch`] its wake-ups from the rings, the timers, the
//! signals and the started command, every record going to a sink.
use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use kreplay_common::probe::Sample;
use tokio::signal::unix::{SignalKind, signal};

use crate::{
    function_probe::{Next, Wake, Watch},
    launch,
    probes::intake::{self, Intake},
};

/// Feeds `watch` its wake-ups (records read, the drain timer, the exit check, Ctrl-C or
/// SIGTERM, `deadline`, the started command's exit) until it finishes, every record going to
/// `sink`.
pub async fn watch_calls(
    watch: &mut Watch,
    child: Option<u32>,
    deadline: Option<Instant>,
    intake: &mut Intake,
    sink: &mut impl FnMut(Sample),
) -> Result<()> {
    let mut waiter = child.map(|pid| tokio::task::spawn_blocking(move || launch::wait_exit(pid)));
    // Registered once so a signal arriving mid-drain is not lost.
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut drain_tick = tokio::time::interval(intake::DRAIN_EVERY);
    // One timer for the whole loop: a sleep created inside `select!` restarts whenever
    // another branch fires first, and the drain tick fires every 10 ms.
    let mut exit_check = tokio::time::interval(Duration::from_millis(200));
    let checks_exits = watch.checks_exits();
    let alive = |p: u32| Path::new(&format!("/proc/{p}")).exists();
    loop {
        let sleep_until = deadline.unwrap_or(Instant::now() + Duration::from_secs(3600));
        let wake = tokio::select! {
            r = intake.next_batch(sink) => { r?; Wake::Batch }
            _ = drain_tick.tick() => Wake::DrainTick,
            _ = tokio::time::sleep_until(sleep_until.into()) => Wake::Stop,
            _ = int.recv() => Wake::Stop,
            _ = term.recv() => Wake::Stop,
            res = async { waiter.as_mut().expect("guarded").await }, if waiter.is_some() => {
                Wake::Exited(res.context("waiting for the command")??)
            }
            _ = exit_check.tick(), if checks_exits => Wake::ExitCheck,
        };
        match watch.on(wake, alive) {
            Next::Continue => {}
            Next::Drain => {
                intake.drain(sink);
            }
            Next::Finish => break,
        }
    }
    intake.finish(sink);
    Ok(())
}
