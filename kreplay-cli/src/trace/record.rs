//! `kreplay trace`'s recording: the loop that feeds [`Session`] its wake-ups (records to read,
//! the 200 ms tick, Ctrl-C or SIGTERM, the deadline, the started command's exit, held
//! processes) and prints its status lines, and what it leaves for the end of the run.
use std::{
    io::Write,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::{
    launch,
    probes::{intake, loader::Probes, rings::RingLayout},
    trace::{
        attach::Attacher,
        capture::Capture,
        collect::Collector,
        ending::{self, kept_streams},
        holds::Holds,
        live::{LiveProbes, LiveRecording},
        session::{Next, Probed, Session, Status, Target, Wake},
        setup::{Paths, Start},
        summary::Summary,
    },
};

/// SIGTERM and SIGINT, registered in `rt` once, before the line that says Ctrl-C stops the
/// trace: a signal that arrives while records are being processed is kept for the next
/// select instead of being lost with a fresh listener.
pub fn signals(rt: &tokio::runtime::Runtime) -> std::io::Result<(Signal, Signal)> {
    let _in_runtime = rt.enter();
    Ok((
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    ))
}

/// Writes a status line: on a terminal it updates in place; into a file or pipe, one line at
/// a time.
pub fn write_status(w: &mut impl Write, st: &Status) -> std::io::Result<()> {
    if st.in_place {
        write!(w, "\r{}\x1b[K", st.text)
    } else {
        writeln!(w, "{}", st.text)
    }
}

/// What recording leaves for the end of the run.
pub struct Recorded {
    /// The per-thread streams.
    pub capture: Capture,
    /// Calls per API.
    pub summary: Summary,
    /// Records written.
    pub records: u64,
    /// Losses already marked in the streams, per cause.
    pub reported: [u64; 4],
    /// CPU time of the reading thread, in ns.
    pub reader_cpu: u64,
    /// The rings and the records each delivered.
    pub rings: (RingLayout, Vec<u64>),
    /// Say that kreplay is stopping: a signal stopped recording and status lines are wanted.
    pub say_stopping: bool,
    /// The started command's program and pid.
    pub command: Option<(String, u32)>,
    /// How long processes were held for kreplay (`None`: none could be).
    pub stops: Option<ending::Stops>,
}

/// The started command's program and pid, when the target is a started command.
pub fn started_command(target: &Target, program: Option<&str>) -> Option<(String, u32)> {
    match (target, program) {
        (&Target::Command(pid), Some(program)) => Some((program.to_owned(), pid)),
        _ => None,
    }
}

/// Records until a stop, in `rt` (shut down on return, so that the waiter of a command still
/// running does not hold kreplay's exit: the command is the user's and runs on). Returns the
/// command's exit code (0 without one) and what the end of the run needs; any process still
/// held is resumed before it returns.
pub fn record_until_stop(
    rt: tokio::runtime::Runtime,
    s: Start,
    probes: &mut Probes,
    attacher: &mut Attacher,
    paths: &Paths,
) -> Result<(u8, Recorded)> {
    let Start {
        target,
        program,
        follow,
        holding_new_files,
        mut intake,
        mut holds,
        capture,
        kernels,
        signals,
        status,
        duration,
    } = s;
    let mut col = Collector::new(capture, kernels);
    let started = Instant::now();
    // Per cause (`Counters::losses`): what the trace's drop markers already say.
    let mut reported = [0u64; 4];
    let mut session = Session::new(target, status, started);
    let launch_requests = attacher
        .launches_from_tool()
        .then(|| super::launch_requests::LaunchRequests::new(&paths.dir));
    let mut live = LiveProbes {
        probes,
        attacher,
        follow,
        every: matches!(session.target(), Target::All),
        holding_new_files,
        launch_requests,
    };
    let mut rec = LiveRecording {
        intake: &mut intake,
        col: &mut col,
        reported: &mut reported,
    };
    let deadline = duration.map(|d| started + d);
    let (exit_code, signalled) = rt
        .block_on(record(
            &mut session,
            signals,
            deadline,
            &mut live,
            &mut rec,
            holds.as_mut(),
        ))
        .with_context(|| kept_streams(&paths.dir, &paths.output))?;
    let reader_cpu = col.drain_cpu_ns;
    rt.shutdown_background();
    let records = col.capture.records;
    let rings = (probes.rings(), intake.per_ring());
    let Collector {
        capture,
        summary,
        io_error,
        ..
    } = col;
    if status == Some(true) {
        eprintln!();
    }
    if let Some(e) = io_error {
        return Err(e.context(kept_streams(&paths.dir, &paths.output)));
    }
    let recorded = Recorded {
        capture,
        summary,
        records,
        reported,
        reader_cpu,
        rings,
        say_stopping: signalled && status.is_some(),
        command: started_command(session.target(), program.as_deref()),
        stops: holds.as_ref().map(|h| h.stops()),
    };
    // Any process stopped after the last look is resumed here.
    drop(holds);
    Ok((exit_code, recorded))
}

/// Records until a stop: feeds [`Session`] its wake-ups (records to read, the 200 ms tick,
/// Ctrl-C or SIGTERM, `deadline`, the started command's exit) and prints its status lines.
/// Returns the command's exit code (0 without one) and whether a signal stopped it.
async fn record(
    session: &mut Session,
    (mut term, mut int): (Signal, Signal),
    deadline: Option<Instant>,
    live: &mut LiveProbes<'_>,
    rec: &mut LiveRecording<'_>,
    mut holds: Option<&mut Holds>,
) -> Result<(u8, bool)> {
    let mut waiter = match session.target() {
        &Target::Command(pid) => Some(tokio::task::spawn_blocking(move || launch::wait_exit(pid))),
        _ => None,
    };
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut drain_tick = tokio::time::interval(intake::DRAIN_EVERY);
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let mut code = 0u8;
    let mut signalled = false;
    let alive = |p: u32| Path::new(&format!("/proc/{p}")).exists();
    loop {
        let wake = tokio::select! {
            r = rec.intake.readable() => { r?; Wake::Data }
            _ = drain_tick.tick() => Wake::Data,
            _ = tokio::time::sleep_until(deadline.unwrap_or(far).into()) => Wake::Stop,
            _ = int.recv() => { signalled = true; Wake::Stop }
            _ = term.recv() => { signalled = true; Wake::Stop }
            res = async { waiter.as_mut().expect("guarded").await }, if waiter.is_some() => {
                code = res.context("waiting for the command")??.clamp(0, 255) as u8;
                Wake::Stop
            }
            _ = tick.tick() => Wake::Tick,
            r = async { holds.as_mut().expect("guarded").readable().await }, if holds.is_some() => {
                r?;
                // Processes stopped where the loader has mapped libraries: probe what they
                // mapped, then let them go on.
                let h = holds.as_mut().expect("guarded");
                h.serve(|pid| {
                    // Held, the process lives: its name is read now, in case it is gone
                    // before the reader reaches its first record.
                    rec.col.capture.remember_name(pid);
                    live.rescan_pid(pid);
                });
                h.mark_probed(live.attacher.files_for_all());
                continue;
            }
        };
        let (next, line) = session.on(wake, Instant::now(), live, rec, &alive)?;
        // Files the periodic rescan attached no longer hold the processes that map them.
        if let Some(h) = holds.as_mut() {
            h.mark_probed(live.attacher.files_for_all());
        }
        if let Some(st) = line {
            let _ = write_status(&mut std::io::stderr(), &st);
        }
        if next == Next::Finish {
            break;
        }
    }
    let col = &mut *rec.col;
    rec.intake.finish(&mut |s| col.push(&s));
    col.finish_held();
    col.finish();
    Ok((code, signalled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_updates_in_place_on_a_terminal_and_stands_alone_elsewhere() {
        let st = |in_place| Status {
            text: "tracing: 12 records".to_owned(),
            in_place,
        };
        let mut out = Vec::new();
        write_status(&mut out, &st(true)).unwrap();
        assert_eq!(out, b"\rtracing: 12 records\x1b[K");
        let mut out = Vec::new();
        write_status(&mut out, &st(false)).unwrap();
        assert_eq!(out, b"tracing: 12 records\n");
    }

    #[test]
    fn only_a_started_command_with_a_program_is_named_at_the_end() {
        assert_eq!(
            started_command(&Target::Command(42), Some("./app")),
            Some(("./app".to_owned(), 42))
        );
        assert_eq!(started_command(&Target::Command(42), None), None);
        assert_eq!(
            started_command(&Target::Pids(vec![42]), Some("./app")),
            None
        );
        assert_eq!(started_command(&Target::All, None), None);
    }
}
