//! `kreplay audit`: per-process GPU runtime call latencies aggregated in the kernel, printed
//! as tables or JSON at intervals, optionally served to Prometheus.
use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Result, bail};
use clap::Args;
use kreplay_cli::{
    audit::{
        maps,
        prometheus::LabelCap,
        render,
        report::ReportKind,
        schedule::{self, End, Schedule, Work},
        server::{self, Published, parse_addr},
        session::Session,
    },
    duration,
    preflight::{self, HostPaths},
    probes::loader::{Probes, Programs, Scope},
    quick_exit,
    trace::{
        attach::Attacher,
        discover::{self, RuntimeLib},
    },
};
use kreplay_common::probe::{ALLOCS_MAP, EVENTS_MAP, THREADS_MAP};

/// Arguments of `kreplay audit`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    sudo kreplay audit --duration 30s            every GPU process on this host for 30 s\n  \
    sudo kreplay audit -p 4242 --interval 5s     one process, a table every 5 s until Ctrl-C\n  \
    sudo kreplay audit --json --duration 1m      JSON lines (docs/audit-json.md)\n  \
    sudo kreplay audit --prometheus 9464         serve /metrics on 127.0.0.1:9464")]
pub struct AuditArgs {
    /// Audit only this running process (repeatable). Default: every process that maps a
    /// supported runtime library, including ones started later.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Stop after this long (e.g. 30s, 2m). Default: Ctrl-C, SIGTERM, or the --pid targets exit.
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Print a report this often.
    #[arg(long, value_parser = duration::parse, default_value = "10s", value_name = "DURATION")]
    interval: Duration,
    /// Show only the N most expensive processes per report.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// One JSON object per report on stdout (schema: docs/audit-json.md) instead of tables.
    #[arg(long)]
    json: bool,
    /// Serve /metrics at ADDR (a bare PORT or :PORT listens on 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,
    /// Processes with their own Prometheus series; later ones share pid="other".
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_pids: usize,
    /// Also attach system-wide to this runtime library (repeatable); its name picks the family.
    #[arg(long = "lib", value_name = "PATH")]
    libs: Vec<PathBuf>,
}

/// How often the kernel maps are read, new libraries looked for and /metrics refreshed.
const REFRESH: Duration = Duration::from_secs(1);
/// In-flight and inventory maps of the recording programs, unused by the audit: shrunk.
const UNUSED_MAP_ENTRIES: u32 = 1024;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Runs `kreplay audit`; returns the exit code.
pub fn run(args: AuditArgs) -> Result<u8> {
    for lib in &args.libs {
        if !lib.exists() {
            bail!("library not found: {}", lib.display());
        }
    }
    let mut targets = Vec::new();
    for &pid in &args.pids {
        targets.push((pid, discover::target_libs(pid, &args.libs)?));
    }
    let listener = match &args.prometheus {
        Some(a) => Some(server::bind(parse_addr(a)?)?),
        None => None,
    };
    preflight::check(&HostPaths::default())?;
    preflight::raise_memlock();
    let mut probes = Probes::load_sized(&[
        (EVENTS_MAP, 4096),
        (THREADS_MAP, UNUSED_MAP_ENTRIES),
        (ALLOCS_MAP, UNUSED_MAP_ENTRIES),
    ])?;
    // Kept open for the whole audit: the kernel counts program run time while any such fd
    // is open and stops by itself when the last one closes (also if kreplay is killed).
    let stats_fd = maps::enable_run_time_stats();
    let mut attacher = Attacher::with_programs(Programs::Audit);
    if targets.is_empty() {
        for lib in discover::candidates(None, &args.libs) {
            attacher.attach(&mut probes, &lib, Scope::All)?;
        }
        attacher.rescan_all(&mut probes);
    } else {
        for (pid, libs) in &targets {
            for lib in libs {
                attacher.attach(&mut probes, lib, Scope::Pid(*pid))?;
            }
        }
    }
    let session = Session::new(&probes, stats_fd.is_some(), args.top);
    let mut audit = Audit {
        probes: &mut probes,
        attacher,
        session,
        cap: LabelCap::new(args.max_pids),
        targets: &targets,
        json: args.json,
        host: hostname(),
    };
    let endpoint = listener.map(|l| {
        let text = audit.session.exposition(&mut audit.cap);
        (l, Published::new(text))
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Listening before the line that says Ctrl-C stops the audit: an interrupt from then on
    // ends it with its final report.
    let (mut term, mut int) = {
        let _in_runtime = rt.enter();
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        )
    };
    eprintln!(
        "kreplay: audit running ({} probe attachments{}); Ctrl-C to stop",
        audit.probes.attachments(),
        match &endpoint {
            Some((l, _)) => format!(
                ", metrics at http://{}/metrics",
                l.local_addr().map(|a| a.to_string()).unwrap_or_default()
            ),
            None => String::new(),
        }
    );
    let schedule = Schedule {
        refresh: REFRESH,
        report: args.interval,
        duration: args.duration,
    };
    let stop = async {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    };
    let end = schedule::drive(&rt, &schedule, endpoint, stop, &mut audit)?;
    let signalled = end == End::Stopped;
    let Audit {
        mut session,
        json,
        host,
        ..
    } = audit;
    session.refresh(&mut probes)?;
    emit(&mut session, ReportKind::Final, json, &host);
    drop(stats_fd);
    // Detaching perf-event probes takes the kernel seconds; the report is already out, so an
    // interrupt from here on ends kreplay at once.
    quick_exit::arm("kreplay: interrupted again: exiting now, the probes detach in the background");
    if signalled {
        eprintln!(
            "kreplay: stopping: detaching {} probes{}; Ctrl-C again to exit at once",
            probes.attachments(),
            if probes.uses_multi_links() {
                ""
            } else {
                " (a few seconds)"
            }
        );
    }
    quick_exit::detach_in_child(probes);
    Ok(0)
}

/// The audit's side of the loop: its probes, what it attached, its books.
struct Audit<'a> {
    probes: &'a mut Probes,
    attacher: Attacher,
    session: Session,
    cap: LabelCap,
    /// The `--pid` targets (empty: every process).
    targets: &'a [(u32, Vec<RuntimeLib>)],
    json: bool,
    host: String,
}

impl Work for Audit<'_> {
    fn refresh(&mut self) -> Result<Option<String>> {
        if self.targets.is_empty() {
            self.attacher.rescan_all(self.probes);
        } else {
            if self
                .targets
                .iter()
                .all(|(p, _)| !Path::new(&format!("/proc/{p}")).exists())
            {
                return Ok(None);
            }
            for (pid, _) in self.targets {
                self.attacher
                    .rescan_pid(self.probes, *pid, Scope::Pid(*pid));
            }
        }
        self.session.refresh(self.probes)?;
        Ok(Some(self.session.exposition(&mut self.cap)))
    }

    fn report(&mut self) -> Result<()> {
        self.session.refresh(self.probes)?;
        emit(
            &mut self.session,
            ReportKind::Interval,
            self.json,
            &self.host,
        );
        Ok(())
    }
}

/// Prints `session`'s report of `kind` on stdout, as a table or a JSON line.
fn emit(session: &mut Session, kind: ReportKind, json: bool, host: &str) {
    let r = session.report(kind);
    let text = if json {
        render::json(&r, host) + "\n"
    } else {
        render::table(&r)
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
