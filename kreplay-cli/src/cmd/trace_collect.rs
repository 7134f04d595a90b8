//! Where `kreplay trace`'s ring-buffer records go while it records: the per-thread streams,
//! the kernel names and the summary; drop markers; and the real probes and intake as the
//! recording loop's [`Session`] drives them.
use kreplay_cli::{
    probes::{
        intake::Intake,
        loader::{Counters, Probes, Scope},
    },
    trace::{
        attach::Attacher,
        capture::Capture,
        kernels::KernelNames,
        roctx::{Roctx, is_roctx},
        session::{Probed, Recording},
        summary::Summary,
    },
};
use kreplay_common::{
    api::{ApiKind, NO_ARG, spec_of},
    probe::{CallRecord, NameRecord, Sample},
};

/// Writes a drop marker for each cause whose count grew since the last call.
pub(super) fn mark_losses(
    capture: &mut Capture,
    c: &Counters,
    reported: &mut [u64; 4],
) -> Result<(), kreplay_common::stream::StreamError> {
    for (i, (source, n)) in c.losses().into_iter().enumerate() {
        if n > reported[i] {
            capture.drops(
                kreplay_common::stream::monotonic_ns(),
                source,
                n - reported[i],
            )?;
            reported[i] = n;
        }
    }
    Ok(())
}

/// Where ring-buffer records go: the per-thread streams, the kernel names and the summary.
pub(super) struct Collector {
    /// The per-thread stream files.
    pub(super) capture: Capture,
    /// Calls per API, for the summary at the end.
    pub(super) summary: Summary,
    /// Kernel names by launch address.
    pub(super) kernels: KernelNames,
    /// Processes seen so far (checked for every record: foldhash, not SipHash).
    pub(super) pids: std::collections::HashSet<u32, foldhash::fast::RandomState>,
    /// The pid of the previous record (0: none yet): records come in runs of one process, so
    /// most skip the set.
    pub(super) last_pid: u32,
    /// The first failed write, reported once recording ends.
    pub(super) io_error: Option<anyhow::Error>,
    /// roctx calls waiting for their messages.
    pub(super) roctx: Roctx,
}

impl Collector {
    /// Writes what is still waiting when recording ends (roctx calls whose message never came).
    pub(super) fn finish(&mut self) {
        for a in self.roctx.finish() {
            if let Err(e) = self.capture.annotation(a) {
                self.io_error.get_or_insert_with(|| e.into());
            }
        }
    }

    /// Takes one ring-buffer record.
    pub(super) fn push(&mut self, s: &Sample) {
        let r = match s {
            Sample::Call(r) => self.call(r),
            Sample::Name(n) => self.name(n),
        };
        if let Err(e) = r {
            self.io_error.get_or_insert_with(|| e.into());
        }
    }

    fn call(&mut self, r: &CallRecord) -> Result<(), kreplay_common::stream::StreamError> {
        if r.pid != self.last_pid && self.pids.insert(r.pid) {
            // First sight of a process (--all): its mappings while it is surely alive.
            self.kernels.remember(r.pid);
        }
        self.last_pid = r.pid;
        self.summary.add(r);
        if is_roctx(r.api) {
            for a in self.roctx.call(r) {
                self.capture.annotation(a)?;
            }
            return Ok(());
        }
        let Some(spec) = spec_of(r.api) else {
            return self.capture.push(r);
        };
        let named = match spec.kind {
            ApiKind::Launch if spec.kernel_arg != NO_ARG => {
                let k = self.kernels.launch(r);
                self.summary.add_launch(k.name.as_deref());
                k.new_record
            }
            ApiKind::Symbol => self.kernels.alias(r),
            _ => None,
        };
        if let Some(rec) = named {
            self.capture.kernel_name(r.tid, rec)?;
        }
        self.capture.push(r)
    }

    fn name(&mut self, n: &NameRecord) -> Result<(), kreplay_common::stream::StreamError> {
        if is_roctx(n.api) {
            return match self.roctx.name(n) {
                Some(a) => self.capture.annotation(a),
                None => Ok(()),
            };
        }
        let rec = self.kernels.named(n);
        self.capture.kernel_name(n.tid, rec)
    }
}

/// The loaded probes and their attacher, as the recording loop drives them.
pub(super) struct LiveProbes<'a> {
    /// The probes.
    pub(super) probes: &'a mut Probes,
    /// What is attached where.
    pub(super) attacher: &'a mut Attacher,
}

impl Probed for LiveProbes<'_> {
    fn counters(&mut self) -> anyhow::Result<Counters> {
        Ok(self.probes.counters()?)
    }

    fn rescan_pid(&mut self, pid: u32) {
        self.attacher.rescan_pid(self.probes, pid, Scope::Pid(pid));
    }

    fn rescan_all(&mut self) {
        self.attacher.rescan_all(self.probes);
    }

    fn flush_debug_log(&mut self) {
        self.probes.flush_debug_log();
    }
}

/// The rings' intake and the collector, as the recording loop drives them.
pub(super) struct LiveRecording<'a> {
    /// The rings.
    pub(super) intake: &'a mut Intake,
    /// Where their records go.
    pub(super) col: &'a mut Collector,
    /// Losses already marked in the trace, per cause (`Counters::losses`).
    pub(super) reported: &'a mut [u64; 4],
}

impl Recording for LiveRecording<'_> {
    fn drain(&mut self) {
        let col = &mut *self.col;
        self.intake.drain(&mut |s| col.push(&s));
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
