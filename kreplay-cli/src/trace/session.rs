//! The decisions of `kreplay trace`'s recording loop, apart from the probes, rings, files and
//! terminal they act on: what each wake-up (records to read, a tick, a stop) leads to. The
//! command drives a [`Session`] with the real probes ([`Probed`]) and record intake
//! ([`Recording`]); the tests drive it with fakes, no root, terminal or process needed.

use std::time::{Duration, Instant};

use crate::probes::loader::Counters;

/// What woke the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Records are waiting in the rings (or the drain timer fired).
    Data,
    /// The periodic tick (every 200 ms): rescans, drop markers, the status line.
    Tick,
    /// Ctrl-C, SIGTERM, `--duration`, or the traced command exited.
    Stop,
}

/// What is traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// These running processes (`-p`); recording ends when all have exited.
    Pids(Vec<u32>),
    /// Every process that maps a runtime (`--all`).
    All,
    /// The command kreplay started (`-- CMD`), by pid.
    Command(u32),
}

/// What the loop does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for the next wake-up.
    Continue,
    /// Stop recording: drain what is left and write the trace.
    Finish,
}

/// The probes as the loop uses them.
pub trait Probed {
    /// The loss counters so far.
    fn counters(&mut self) -> anyhow::Result<Counters>;
    /// Attaches to any runtime library `pid` mapped since the last look.
    fn rescan_pid(&mut self, pid: u32);
    /// Attaches to any runtime library a process mapped since the last look (`--all`).
    fn rescan_all(&mut self);
    /// The processes followed now besides the targets (their descendants, when a process tree
    /// is followed; empty otherwise).
    fn followed(&mut self) -> Vec<u32>;
    /// Prints the programs' debug messages (`--debug-probes`).
    fn flush_debug_log(&mut self);
    /// Probes the launch calls of processes whose kreplay-tool asked for it
    /// (`--cupti-launches` with CUPTI unusable: [`super::launch_requests`]).
    fn answer_launch_requests(&mut self) {}
}

/// Where the records go, as the loop uses it.
pub trait Recording {
    /// Moves every record the rings hold into the streams.
    fn drain(&mut self);
    /// Writes a drop marker for each cause whose count grew.
    fn mark_losses(&mut self, c: &Counters) -> anyhow::Result<()>;
    /// Reads `pid`'s mappings now, for the kernel names of its launches.
    fn remember(&mut self, pid: u32);
    /// Forgets the mappings of processes `alive` says are gone.
    fn forget_exited(&mut self, alive: &dyn Fn(u32) -> bool);
    /// Closes the streams of threads that made no call since the last time.
    fn close_idle(&mut self);
    /// Records written so far.
    fn records(&self) -> u64;
    /// Threads seen so far.
    fn threads(&self) -> usize;
}

/// How often idle threads' streams are closed.
pub const CLOSE_IDLE_EVERY: Duration = Duration::from_secs(5);
/// How often the status line is printed when stderr is not a terminal.
pub const STATUS_EVERY: Duration = Duration::from_secs(5);

/// A status line to print: in place (`\r`, a terminal) or as a line of its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// The text.
    pub text: String,
    /// Rewrite the current line instead of adding one.
    pub in_place: bool,
}

/// The loop's state between wake-ups.
pub struct Session {
    target: Target,
    /// Status lines wanted (not `-q`), and whether stderr is a terminal.
    status: Option<bool>,
    started: Instant,
    last_close: Instant,
    last_status: Instant,
    last_records: u64,
}

impl Session {
    /// A session tracing `target`, started at `now`; `status` is `None` with `-q`, else
    /// whether stderr is a terminal.
    pub fn new(target: Target, status: Option<bool>, now: Instant) -> Self {
        Self {
            target,
            status,
            started: now,
            last_close: now,
            last_status: now,
            last_records: 0,
        }
    }

    /// What is traced.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Handles one wake-up at `now`; `alive` says whether a process still exists. Returns
    /// what to do next and, on a tick, the status line to print.
    pub fn on(
        &mut self,
        wake: Wake,
        now: Instant,
        probes: &mut impl Probed,
        rec: &mut impl Recording,
        alive: &dyn Fn(u32) -> bool,
    ) -> anyhow::Result<(Next, Option<Status>)> {
        match wake {
            Wake::Data => {
                rec.drain();
                Ok((Next::Continue, None))
            }
            Wake::Stop => {
                probes.flush_debug_log();
                Ok((Next::Finish, None))
            }
            Wake::Tick => self.tick(now, probes, rec, alive),
        }
    }

    fn tick(
        &mut self,
        now: Instant,
        probes: &mut impl Probed,
        rec: &mut impl Recording,
        alive: &dyn Fn(u32) -> bool,
    ) -> anyhow::Result<(Next, Option<Status>)> {
        rec.drain();
        probes.flush_debug_log();
        probes.answer_launch_requests();
        let c = probes.counters()?;
        rec.mark_losses(&c)?;
        let watched: Vec<u32> = match &self.target {
            Target::All => {
                probes.rescan_all();
                Vec::new()
            }
            Target::Pids(pids) => pids.clone(),
            Target::Command(pid) => vec![*pid],
        };
        if !watched.is_empty() {
            let mut all = watched.clone();
            all.extend(
                probes
                    .followed()
                    .into_iter()
                    .filter(|p| !watched.contains(p)),
            );
            // `-p` ends once its processes and every descendant followed have exited; a
            // command ends with the command (its wait is the loop's, not the tick's).
            if matches!(self.target, Target::Pids(_)) && all.iter().all(|&p| !alive(p)) {
                return Ok((Next::Finish, None));
            }
            for pid in all {
                probes.rescan_pid(pid);
                rec.remember(pid);
            }
        }
        rec.forget_exited(alive);
        if now.duration_since(self.last_close) >= CLOSE_IDLE_EVERY {
            self.last_close = now;
            rec.close_idle();
        }
        Ok((Next::Continue, self.status_line(now, &c, rec)))
    }

    /// The status line due at `now`: every tick on a terminal, every [`STATUS_EVERY`]
    /// otherwise.
    fn status_line(&mut self, now: Instant, c: &Counters, rec: &impl Recording) -> Option<Status> {
        let tty = self.status?;
        let since = now.duration_since(self.last_status);
        if !tty && since < STATUS_EVERY {
            return None;
        }
        let records = rec.records();
        let rate = (records - self.last_records) as f64 / since.as_secs_f64().max(1e-9);
        self.last_records = records;
        self.last_status = now;
        // Nothing yet: say why the count stays at 0 (a Python program may spend many seconds
        // importing before its first GPU call).
        let events = if records == 0 {
            "0 events (no GPU runtime call seen yet)".to_owned()
        } else {
            format!("{records} events  {rate:.0} events/s")
        };
        Some(Status {
            text: format!(
                "kreplay: {:>6.1}s  {events}  {} dropped  {} threads",
                now.duration_since(self.started).as_secs_f64(),
                c.lost(),
                rec.threads()
            ),
            in_place: tty,
        })
    }
}

#[cfg(test)]
mod tests;
