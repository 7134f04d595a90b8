//! The paired probe-overhead measure: `kreplay trace` and an empty probe pair timed side by side
//! in one process (`tests/bench/pairloop.c`), chunk against chunk.
//!
//! Separate runs of the loop under each probe vary by half on a shared host (another tenant's
//! load comes and goes for seconds), so their medians put the ratio anywhere in ±0.15. Here arm
//! A (the runtime's own `hipStreamSynchronize`) and arm B (the same machine code in a twin copy
//! of the library, which no tracer knows) alternate every millisecond or so, and each pair's
//! ratio compares two probes that ran under the same conditions.
use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::numbers::{field, median};
use crate::run::say;

/// Pairs per run and calls per arm of a pair: a pair takes a few ms under a probe, short enough
/// that both arms see the same machine state (docs/bench/probe-cost.md).
const PAIRS: u32 = 200;
const CHUNK: u32 = 1000;
/// Runs with `kreplay trace` on arm A.
const TRACE_RUNS: usize = 5;

/// What is attached to arm A while an empty probe pair holds arm B.
#[derive(Clone, Copy, PartialEq)]
enum ArmA {
    /// An empty probe pair too: the method's own asymmetry, which should read 1.00.
    Bare,
    /// `kreplay trace -p`, every HIP/HSA probe and the full pipeline.
    Trace,
}

/// One run: each pair's (A, B) ns per call.
struct PairRun {
    pairs: Vec<(f64, f64)>,
}

impl PairRun {
    /// Median over pairs of A's added cost over B's, given the arms' unprobed costs.
    fn ratio(&self, plain: (f64, f64)) -> (f64, f64, f64) {
        let mut r: Vec<f64> = self
            .pairs
            .iter()
            .map(|&(a, b)| (a - plain.0) / (b - plain.1))
            .collect();
        r.sort_by(|x, y| x.total_cmp(y));
        let q = |f: f64| r[((r.len() - 1) as f64 * f) as usize];
        (q(0.5), q(0.25), q(0.75))
    }

    fn medians(&self) -> (f64, f64) {
        (
            median(self.pairs.iter().map(|p| p.0).collect()),
            median(self.pairs.iter().map(|p| p.1).collect()),
        )
    }
}

/// Parses pairloop's `pair A B` lines.
fn parse_pairs(stdout: &str) -> Result<PairRun> {
    let pairs: Vec<(f64, f64)> = stdout
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("pair ")?.split(' ');
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    if pairs.len() != PAIRS as usize {
        bail!("pairloop printed {} pairs, not {PAIRS}", pairs.len());
    }
    Ok(PairRun { pairs })
}

/// Waits for `child` up to `limit`, killing it past that.
fn wait_limited(child: &mut Child, limit: Duration, what: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{what} failed: {status}");
            }
            return Ok(());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} still running after {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `child`'s stderr on a thread: returns a receiver that gets `true` once a line
/// containing `ready` has been read, and the thread, which yields the whole text.
fn watch_stderr(
    child: &mut Child,
    ready: &'static str,
) -> (mpsc::Receiver<bool>, std::thread::JoinHandle<String>) {
    let err = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut text = String::new();
        let mut r = BufReader::new(err);
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains(ready) {
                let _ = tx.send(true);
            }
            text.push_str(&line);
            line.clear();
        }
        text
    });
    (rx, h)
}

/// The programs and files a run needs.
struct Setup {
    bin: PathBuf,
    hip: PathBuf,
    twin: PathBuf,
    pairloop: PathBuf,
    dir: PathBuf,
}

impl Setup {
    /// pairloop with no probe: each arm's own cost.
    fn plain(&self) -> Result<(f64, f64)> {
        let out = Command::new(&self.pairloop)
            .arg(&self.twin)
            .args([PAIRS.to_string(), CHUNK.to_string()])
            .output()
            .context("running pairloop")?;
        if !out.status.success() {
            bail!("pairloop failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(parse_pairs(&String::from_utf8_lossy(&out.stdout))?.medians())
    }

    /// One run: `kreplay probe --bare` on arm B starts pairloop, `arm` attaches to its pid,
    /// then pairloop is let through its gate.
    fn run(&self, arm: ArmA) -> Result<PairRun> {
        let gate = self.dir.join("pair.gate");
        let pidfile = self.dir.join("pair.gate.pid");
        let _ = std::fs::remove_file(&gate);
        let _ = std::fs::remove_file(&pidfile);
        let mut outer = Command::new(&self.bin)
            .args(["probe", "--bare", "--lib"])
            .arg(&self.twin)
            .args(["--symbol", "hipStreamSynchronize", "--"])
            .arg(&self.pairloop)
            .arg(&self.twin)
            .args([PAIRS.to_string(), CHUNK.to_string()])
            .arg(&gate)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kreplay probe --bare")?;
        let result = self.run_attached(arm, &gate, &pidfile, &mut outer);
        if result.is_err() {
            let _ = outer.kill();
        }
        let _ = outer.wait();
        result
    }

    fn run_attached(
        &self,
        arm: ArmA,
        gate: &Path,
        pidfile: &Path,
        outer: &mut Child,
    ) -> Result<PairRun> {
        let start = Instant::now();
        let pid = loop {
            if let Ok(s) = std::fs::read_to_string(pidfile) {
                break s.trim().to_string();
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("pairloop never reached its gate");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let trace_out = self.dir.join("paired.pftrace");
        let mut inner = Command::new(&self.bin);
        match arm {
            ArmA::Bare => inner
                .args(["probe", "--bare", "--lib"])
                .arg(&self.hip)
                .args(["--symbol", "hipStreamSynchronize"]),
            ArmA::Trace => inner.args(["trace", "-o"]).arg(&trace_out),
        };
        let mut inner = inner
            .args(["-p", &pid])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the probe of arm A")?;
        // Both `probe` and `trace` end the line that says they are attached with this.
        let (ready, text) = watch_stderr(&mut inner, "; stop with Ctrl-C");
        let timed = (|| {
            if !ready.recv_timeout(Duration::from_secs(30)).unwrap_or(false) {
                bail!("arm A's probe never said it was attached");
            }
            std::fs::write(gate, b"go").context("opening the gate")?;
            let mut stdout = String::new();
            outer
                .stdout
                .take()
                .expect("stdout piped")
                .read_to_string(&mut stdout)?;
            wait_limited(
                outer,
                Duration::from_secs(60),
                "kreplay probe --bare (arm B)",
            )?;
            wait_limited(&mut inner, Duration::from_secs(30), "arm A's probe")?;
            Ok(stdout)
        })();
        if timed.is_err() {
            let _ = inner.kill();
            let _ = inner.wait();
        }
        let stdout = timed?;
        let text = text.join().unwrap_or_default();
        if arm == ArmA::Trace {
            check_traced(&text)?;
        }
        parse_pairs(&stdout)
    }
}

/// The traced arm really traced: every call of arm A recorded, none dropped.
fn check_traced(stderr: &str) -> Result<()> {
    let dropped =
        field(stderr, "events dropped:").context("no `events dropped:` in trace's summary")? as u64;
    let events = stderr
        .lines()
        .find_map(|l| l.strip_prefix("reader cpu: "))
        .and_then(|rest| {
            rest.split('(')
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .context("no `reader cpu:` line in trace's summary")?;
    let calls = u64::from(PAIRS) * u64::from(CHUNK);
    if dropped != 0 || events < calls {
        bail!("the traced arm recorded {events} events for {calls} calls, {dropped} dropped");
    }
    Ok(())
}

/// Writes the paired section: a calibration run (empty probes on both arms), then
/// `TRACE_RUNS` runs with `kreplay trace` on arm A. Returns the median of the traced runs'
/// ratios.
pub fn paired_overhead(out: &mut String, bin: &Path, hip: &Path) -> Result<f64> {
    let setup = Setup {
        bin: bin.to_path_buf(),
        hip: hip.to_path_buf(),
        twin: kreplay_tests::twin_hip_lib(),
        pairloop: kreplay_tests::build_pairloop(),
        dir: kreplay_tests::scratch("bench"),
    };
    say("bench", "paired probe overhead: unprobed");
    let plain = setup.plain()?;
    let mut runs = vec![];
    for (i, arm) in std::iter::once(ArmA::Bare)
        .chain(std::iter::repeat_n(ArmA::Trace, TRACE_RUNS))
        .enumerate()
    {
        say(
            "bench",
            &format!("paired probe overhead run {}/{}", i + 1, TRACE_RUNS + 1),
        );
        runs.push((arm, setup.run(arm)?));
    }
    let plain_after = setup.plain()?;
    let plain = (
        (plain.0 + plain_after.0) / 2.0,
        (plain.1 + plain_after.1) / 2.0,
    );
    let _ = writeln!(
        out,
        "### Paired in one process (the ratio this bench judges)\n\n\
         `tests/bench/pairloop.c`: in one process, {CHUNK} idle `hipStreamSynchronize(NULL)` calls of \
         the simulated runtime (arm A) alternate with {CHUNK} calls of the same function in a \
         byte-for-byte copy of the library loaded under another name (arm B), {PAIRS} pairs per run. \
         `kreplay probe --bare` holds arm B; arm A gets an empty probe pair too (calibration: the \
         method's own asymmetry) or `kreplay trace -p` (every HIP/HSA probe, full pipeline; the \
         run is refused unless every call was recorded with no drop). Each pair's ratio is A's \
         added ns per call over B's, the arms' unprobed costs ({:.1} and {:.1} ns) subtracted; the \
         table gives the median and quartiles over pairs. The reader's CPU runs beside both \
         arms here; the separate-run table above charges it to tracing alone.\n\n\
         | run | arm A | A ns/call | B ns/call | A added / B added | quartiles |\n\
         |---|---|---:|---:|---:|---|",
        plain.0, plain.1
    );
    let mut traced = vec![];
    for (i, (arm, run)) in runs.iter().enumerate() {
        let (a, b) = run.medians();
        let (m, lo, hi) = run.ratio(plain);
        let name = match arm {
            ArmA::Bare => "empty probe pair",
            ArmA::Trace => {
                traced.push(m);
                "`kreplay trace`"
            }
        };
        let _ = writeln!(
            out,
            "| {} | {name} | {a:.0} | {b:.0} | {m:.3} | {lo:.3}–{hi:.3} |",
            i + 1
        );
    }
    let ratio = median(traced.clone());
    let lo = traced.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = traced.iter().copied().fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "\nPaired: tracing adds **{ratio:.2}×** the bare probe cost (median of {TRACE_RUNS} runs, \
         {lo:.2}–{hi:.2}; target ≤ 1.3×).\n"
    );
    Ok(ratio)
}

#[cfg(test)]
mod tests {
    use super::{CHUNK, PAIRS, PairRun, check_traced, parse_pairs};

    fn lines(n: u32) -> String {
        (0..n)
            .map(|i| format!("pair {}.5 {}.0\n", 1000 + i, 900 + i))
            .collect()
    }

    #[test]
    fn parses_every_pair_and_refuses_a_short_run() {
        let run = parse_pairs(&format!("noise\n{}", lines(PAIRS))).unwrap();
        assert_eq!(run.pairs.len(), PAIRS as usize);
        assert_eq!(run.pairs[0], (1000.5, 900.0));
        assert_eq!(run.pairs[7], (1007.5, 907.0));
        let err = parse_pairs(&lines(PAIRS - 1)).err().unwrap().to_string();
        assert_eq!(
            err,
            format!("pairloop printed {} pairs, not {PAIRS}", PAIRS - 1)
        );
    }

    #[test]
    fn ratio_is_the_median_of_added_costs_per_pair() {
        // Added costs 130/100, 120/100, 150/100, 110/100, 140/100 over unprobed (30, 10).
        let run = PairRun {
            pairs: vec![
                (160.0, 110.0),
                (150.0, 110.0),
                (180.0, 110.0),
                (140.0, 110.0),
                (170.0, 110.0),
            ],
        };
        let (m, lo, hi) = run.ratio((30.0, 10.0));
        assert!((m - 1.3).abs() < 1e-12, "{m}");
        assert!((lo - 1.2).abs() < 1e-12, "{lo}");
        assert!((hi - 1.4).abs() < 1e-12, "{hi}");
        assert_eq!(run.medians(), (160.0, 110.0));
    }

    #[test]
    fn a_trace_that_missed_calls_or_dropped_is_refused() {
        let calls = u64::from(PAIRS) * u64::from(CHUNK);
        let summary = |events: u64, dropped: u64| {
            format!(
                "events dropped: {dropped}\n\
                 reader cpu: 150 ns per event ({events} events, 30.0 ms), 1 forced wake-ups\n"
            )
        };
        check_traced(&summary(calls + 2, 0)).unwrap();
        assert_eq!(
            check_traced(&summary(calls - 1, 0))
                .err()
                .unwrap()
                .to_string(),
            format!(
                "the traced arm recorded {} events for {calls} calls, 0 dropped",
                calls - 1
            )
        );
        assert!(check_traced(&summary(calls, 3)).is_err());
        assert!(check_traced("kreplay: wrote x.pftrace\n").is_err());
    }
}
