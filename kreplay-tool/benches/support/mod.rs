//! What the recorder benchmarks share: the record they append, the machine description and
//! the machine-readable results file (`KREPLAY_BENCH_OUT`).

#![expect(dead_code, reason = "each benchmark uses part of it")]

use std::fmt::Write as _;

use kreplay_common::stream::{ApiCall, Record};
use kreplay_tool::record::{current_pid, current_tid};

/// A realistic row: one intercepted API call, built as the tool's call sites build theirs,
/// with the process and thread ids looked up per row (`current_pid`, `current_tid`: cached,
/// so no system call).
#[inline]
pub fn api_call(thread: u64, i: u64) -> Record {
    ApiCall {
        pid: current_pid(),
        tid: current_tid(),
        api: 12,
        enter_ns: 1_000_000 + i * 250,
        exit_ns: 1_000_000 + i * 250 + 180,
        ret: 0,
        args: [0x7f00_0000_0000 + i, 1024, 1, 1, 256, 0],
        extra: [thread, i, 0, 0, 0],
        out: 0,
    }
    .into()
}

/// CPU cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A one-line description of the machine for the report.
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{} cores available, {model}", cores())
}

/// The 1, 5 and 15 minute load averages (other work on the machine skews timings).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// CPU time the calling thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The value after `--flag` on the command line, if any (unknown arguments such as cargo's
/// `--bench` are ignored).
pub fn arg(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A JSON value, just enough for the results files.
pub enum Json {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// An object with ordered keys.
    Obj(Vec<(&'static str, Json)>),
    /// An array.
    Arr(Vec<Json>),
}

impl Json {
    /// The value as JSON text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            // A column a run did not time (`--only`): JSON has no NaN.
            Self::Num(n) if !n.is_finite() => out.push_str("null"),
            Self::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => {
                let _ = write!(out, "{}", *n as i64);
            }
            Self::Num(n) => {
                let _ = write!(out, "{n:.3}");
            }
            Self::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "\"{k}\":");
                    v.write(out);
                }
                out.push('}');
            }
            Self::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
        }
    }
}

/// Writes `results` to the path in `KREPLAY_BENCH_OUT`, if set.
pub fn write_results(report: &Report, results: &Json) {
    if let Some(path) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        let text = format!("{}\n```json\n{}\n```\n", report.0, results.render());
        match std::fs::write(&path, text) {
            Ok(()) => println!("results written to {}", path.to_string_lossy()),
            Err(e) => {
                eprintln!("writing {} failed: {e}", path.to_string_lossy());
                std::process::exit(2);
            }
        }
    }
}

/// What a bench prints, kept so that its results file holds the same readable text.
#[derive(Default)]
pub struct Report(String);

impl Report {
    /// Prints `line` and keeps it.
    pub fn line(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
        self.0.push_str(line.as_ref());
        self.0.push('\n');
    }
}
