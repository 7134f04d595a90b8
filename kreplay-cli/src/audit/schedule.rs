//! The audit's loop: every [`Schedule::refresh`] it looks for new runtime libraries, reads the
//! kernel maps and publishes a fresh `/metrics` text; every [`Schedule::report`] it prints a
//! report; it ends on a stop (Ctrl-C), at the deadline, or when its targets are gone.
use std::{
    future::Future,
    time::{Duration, Instant},
};

use anyhow::Result;

use super::server::{self, Published};

/// What the audit does at the loop's ticks.
pub trait Work {
    /// Rescans for new libraries and reads the kernel maps; returns the new `/metrics` text,
    /// or `None` when the targets are gone and the audit ends.
    fn refresh(&mut self) -> Result<Option<String>>;
    /// Prints the report of the interval that ended.
    fn report(&mut self) -> Result<()>;
}

/// When the loop works and how long it runs.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Time between refreshes.
    pub refresh: Duration,
    /// Time between reports.
    pub report: Duration,
    /// How long the audit runs (`None`: until stopped).
    pub duration: Option<Duration>,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The `stop` future completed (Ctrl-C or SIGTERM).
    Stopped,
    /// The schedule's duration passed.
    Deadline,
    /// [`Work::refresh`] said the targets are gone.
    TargetsGone,
}

/// Runs the loop on `rt` until `stop` completes, the deadline passes or the targets are gone,
/// serving `/metrics` from `endpoint`'s listener, if any, with what [`Work::refresh`] returned
/// last (the caller publishes the first text).
pub fn drive(
    rt: &tokio::runtime::Runtime,
    schedule: &Schedule,
    endpoint: Option<(std::net::TcpListener, Published)>,
    stop: impl Future<Output = ()>,
    work: &mut impl Work,
) -> Result<End> {
    let published = endpoint.as_ref().map(|(_, p)| p.clone());
    rt.block_on(async {
        let _server = match endpoint {
            Some((l, body)) => Some(AbortOnDrop(tokio::spawn(server::serve(
                tokio::net::TcpListener::from_std(l)?,
                body,
                server::connection_cap(),
            )))),
            None => None,
        };
        let started = Instant::now();
        let mut refresh =
            tokio::time::interval_at((started + schedule.refresh).into(), schedule.refresh);
        let mut report =
            tokio::time::interval_at((started + schedule.report).into(), schedule.report);
        let far = started + Duration::from_secs(365 * 24 * 3600);
        let deadline = schedule.duration.map_or(far, |d| started + d);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => return Ok(End::Deadline),
                _ = &mut stop => return Ok(End::Stopped),
                _ = report.tick() => work.report()?,
                _ = refresh.tick() => match work.refresh()? {
                    Some(text) => {
                        if let Some(p) = &published {
                            p.set(text);
                        }
                    }
                    None => return Ok(End::TargetsGone),
                },
            }
        }
    })
}

/// Stops the metrics server when the audit loop ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
