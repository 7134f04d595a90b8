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
/// last (the caller publishes the first text). The endpoint answers from a thread of its own
/// ([`server::Endpoint`]): a scrape never waits for a refresh, however long it takes.
pub fn drive(
    rt: &tokio::runtime::Runtime,
    schedule: &Schedule,
    endpoint: Option<(std::net::TcpListener, Published)>,
    stop: impl Future<Output = ()>,
    work: &mut impl Work,
) -> Result<End> {
    let published = endpoint.as_ref().map(|(_, p)| p.clone());
    let _server = match endpoint {
        Some((l, body)) => Some(server::Endpoint::start(l, body, server::connection_cap())?),
        None => None,
    };
    rt.block_on(async {
        let started = Instant::now();
        let mut refresh =
            tokio::time::interval_at((started + schedule.refresh).into(), schedule.refresh);
        // After a slow refresh the next one waits a whole period, not none.
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::SocketAddr,
    };

    use super::*;

    /// A refresh as slow as a rescan of a busy host's `/proc` can be on a loaded machine.
    const SLOW_REFRESH: Duration = Duration::from_secs(2);
    /// The longest a scrape may take: Prometheus's timeout in the soak (`scrape_timeout: 1s`).
    const SCRAPE_BOUND: Duration = Duration::from_secs(1);

    /// Work whose every refresh takes [`SLOW_REFRESH`], then publishes `refreshes N`.
    struct Slow(u32);

    impl Work for Slow {
        fn refresh(&mut self) -> Result<Option<String>> {
            std::thread::sleep(SLOW_REFRESH);
            self.0 += 1;
            Ok(Some(format!("refreshes {}\n", self.0)))
        }

        fn report(&mut self) -> Result<()> {
            Ok(())
        }
    }

    /// The body of one `GET /metrics`, or the error (no answer within 5 s).
    fn scrape(addr: SocketAddr) -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut got = String::new();
        s.read_to_string(&mut got)?;
        Ok(got
            .split_once("\r\n\r\n")
            .map_or(got.clone(), |(_, b)| b.to_string()))
    }

    #[test]
    fn scrapes_answer_at_once_while_a_refresh_takes_seconds() {
        let listener = server::bind(server::parse_addr("0").unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let published = Published::new("refreshes 0\n".to_string());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let loop_thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let schedule = Schedule {
                refresh: Duration::from_millis(100),
                report: Duration::from_secs(3600),
                duration: None,
            };
            let stop = async {
                let _ = stopped.await;
            };
            drive(
                &rt,
                &schedule,
                Some((listener, published)),
                stop,
                &mut Slow(0),
            )
        });
        // Scrapes every 50 ms from before the first refresh until after it published: most
        // of them come while a refresh is running.
        let t0 = Instant::now();
        let (mut bodies, mut slowest) = (Vec::<String>::new(), Duration::ZERO);
        while t0.elapsed() < SLOW_REFRESH + Duration::from_millis(800) {
            let s = Instant::now();
            let answer = scrape(addr);
            slowest = slowest.max(s.elapsed());
            assert!(
                slowest < SCRAPE_BOUND,
                "a scrape took {slowest:?} while the audit refreshed: {answer:?}"
            );
            bodies.push(answer.unwrap());
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.send(()).unwrap();
        let end = loop_thread.join().unwrap().unwrap();
        assert_eq!(end, End::Stopped);
        // What was published, in order: the first text until the first refresh ended, then
        // its text.
        bodies.dedup();
        assert_eq!(bodies, ["refreshes 0\n", "refreshes 1\n"]);
    }
}
