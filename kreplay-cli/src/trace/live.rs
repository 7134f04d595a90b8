//! The real probes, attacher, rings and collector as the recording loop's
//! [`Session`](crate::trace::session::Session) drives them and attaching uses them.
use crate::probes::cost::thread_cpu_ns;
use crate::{
    probes::{
        intake::Intake,
        loader::{Counters, Probes, Scope},
    },
    trace::{
        attach::Attacher,
        collect::{Collector, mark_losses},
        discover::RuntimeLib,
        launch_requests::LaunchRequests,
        session::{Probed, Recording},
        targets::Attach,
    },
};

/// The loaded probes and their attacher, as the recording loop drives them.
pub struct LiveProbes<'a> {
    /// The probes.
    pub probes: &'a mut Probes,
    /// What is attached where.
    pub attacher: &'a mut Attacher,
    /// A process tree is followed: rescans attach for every process (the programs filter).
    pub follow: bool,
    /// Every process is traced (`--all`): rescans attach for every process.
    pub every: bool,
    /// Processes that map a new runtime library are held until it is probed: the periodic
    /// rescan looks at new processes only, and at all of them every [`FULL_RESCAN_EVERY`].
    pub holding_new_files: bool,
    /// Where kreplay-tool asks for launch probes (`--cupti-launches`).
    pub launch_requests: Option<LaunchRequests>,
}

/// How often `--all` looks at every process's mappings while new libraries hold their
/// processes (the backstop for what the hold cannot see).
pub const FULL_RESCAN_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Probed for LiveProbes<'_> {
    fn counters(&mut self) -> anyhow::Result<Counters> {
        Ok(self.probes.counters()?)
    }

    fn rescan_pid(&mut self, pid: u32) {
        let scope = if self.follow || self.every {
            Scope::All
        } else {
            Scope::Pid(pid)
        };
        self.attacher.rescan_pid(self.probes, pid, scope);
    }

    fn followed(&mut self) -> Vec<u32> {
        if !self.follow {
            return Vec::new();
        }
        self.probes.followed().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the followed processes");
            Vec::new()
        })
    }

    fn rescan_all(&mut self) {
        if self.holding_new_files {
            self.attacher.rescan_new(self.probes, FULL_RESCAN_EVERY);
        } else {
            self.attacher.rescan_all(self.probes);
        }
    }

    fn flush_debug_log(&mut self) {
        self.probes.flush_debug_log();
    }

    fn answer_launch_requests(&mut self) {
        let Some(req) = &mut self.launch_requests else {
            return;
        };
        for pid in req.new_requests() {
            self.attacher.probe_launches_of(self.probes, pid);
            req.answer(pid);
        }
    }
}

impl Attach for LiveProbes<'_> {
    fn attach(&mut self, lib: &RuntimeLib, scope: Scope) -> anyhow::Result<()> {
        self.attacher.attach(self.probes, lib, scope).map(drop)
    }

    fn rescan_all(&mut self) {
        self.attacher.rescan_all(self.probes);
    }
}

/// The rings' intake and the collector, as the recording loop drives them.
pub struct LiveRecording<'a> {
    /// The rings.
    pub intake: &'a mut Intake,
    /// Where their records go.
    pub col: &'a mut Collector,
    /// Losses already marked in the trace, per cause (`Counters::losses`).
    pub reported: &'a mut [u64; 4],
}

impl Recording for LiveRecording<'_> {
    fn drain(&mut self) {
        let before = thread_cpu_ns();
        let col = &mut *self.col;
        self.intake.drain(&mut |s| col.push(&s));
        col.drain_cpu_ns += thread_cpu_ns().saturating_sub(before);
    }

    fn mark_losses(&mut self, c: &Counters) -> anyhow::Result<()> {
        Ok(mark_losses(&mut self.col.capture, c, self.reported)?)
    }

    fn remember(&mut self, pid: u32) {
        self.col.kernels.remember(pid);
    }

    fn forget_exited(&mut self, alive: &dyn Fn(u32) -> bool) {
        self.col.kernels.forget_exited(alive);
    }

    fn close_idle(&mut self) {
        if let Err(e) = self.col.capture.close_idle() {
            self.col.io_error.get_or_insert_with(|| e.into());
        }
    }

    fn records(&self) -> u64 {
        self.col.capture.records
    }

    fn threads(&self) -> usize {
        self.col.capture.threads()
    }
}
