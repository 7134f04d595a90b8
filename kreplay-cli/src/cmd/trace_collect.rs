//! Where `kreplay trace`'s ring-buffer records go while it records: the per-thread streams,
//! the kernel names and the summary; drop markers; and the real probes and intake as the
//! recording loop's [`Session`] drives them and attaching uses them.
use kreplay_cli::{
    probes::{
        intake::Intake,
        loader::{Counters, Probes, Scope},
    },
    trace::{
        attach::Attacher,
        capture::Capture,
        discover::RuntimeLib,
        kernels::{KernelNames, Resolved},
        nesting::{Held, LaunchRole, role_of},
        roctx::{Roctx, is_roctx},
        session::{Probed, Recording},
        summary::Summary,
        targets::Attach,
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
    /// Driver launches waiting for the runtime launch they were made from.
    pub(super) held: Held,
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
        if !self.held.is_empty() {
            for orphan in self.held.orphans(r) {
                self.own_launch(&orphan, Vec::new())?;
            }
        }
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
        match spec.kind {
            ApiKind::Launch if spec.kernel_arg != NO_ARG => match role_of(r) {
                LaunchRole::Own => {
                    let children = self.held.children_of(r);
                    self.own_launch(r, children)
                }
                LaunchRole::InsideKernelLaunch => match self.held.hold(r) {
                    Some(lost_parent) => self.own_launch(&lost_parent, Vec::new()),
                    None => Ok(()),
                },
                LaunchRole::InsideGraphLaunch => {
                    if let Some(rec) = self.kernels.launch(r).new_record {
                        self.capture.kernel_name(r.tid, rec)?;
                    }
                    self.capture.push(r)
                }
            },
            ApiKind::Symbol => {
                if let Some(rec) = self.kernels.alias(r) {
                    self.capture.kernel_name(r.tid, rec)?;
                }
                self.capture.push(r)
            }
            _ => self.capture.push(r),
        }
    }

    /// Writes launch `r` and the inner launches made inside it (held until now), counting them
    /// as one launch in the per-kernel table. Each takes the other's kernel name where its own
    /// is unknown, so a driver function made before the attach is named by its runtime launch.
    fn own_launch(
        &mut self,
        r: &CallRecord,
        children: Vec<CallRecord>,
    ) -> Result<(), kreplay_common::stream::StreamError> {
        let handle = |c: &CallRecord| {
            spec_of(c.api)
                .and_then(|s| c.arg(s.kernel_arg))
                .unwrap_or(0)
        };
        let outer = self.kernels.launch(r);
        // An inner launch's own handle is looked up in the symbols only when the outer one
        // has no name to give it (a driver function is a heap handle: no symbol).
        let inner: Vec<Resolved> = children
            .iter()
            .map(
                |c| match (self.kernels.known(c.pid, handle(c)), &outer.name) {
                    (Some(n), _) => Resolved {
                        name: Some(n),
                        new_record: None,
                    },
                    (None, Some(_)) => Resolved::default(),
                    (None, None) => self.kernels.launch(c),
                },
            )
            .collect();
        let name = outer
            .name
            .clone()
            .or_else(|| inner.iter().find_map(|k| k.name.clone()));
        self.summary.add_launch(name.as_deref());
        let outer_named = match (&outer.name, &name) {
            (None, Some(n)) => {
                self.kernels
                    .name_handle(r.pid, handle(r), n, r.enter_ns.saturating_sub(1))
            }
            _ => outer.new_record,
        };
        if let Some(rec) = outer_named {
            self.capture.kernel_name(r.tid, rec)?;
        }
        for (c, k) in children.iter().zip(inner) {
            let named = match (&k.name, &name) {
                (None, Some(n)) => {
                    self.kernels
                        .name_handle(c.pid, handle(c), n, c.enter_ns.saturating_sub(1))
                }
                _ => k.new_record,
            };
            if let Some(rec) = named {
                self.capture.kernel_name(c.tid, rec)?;
            }
            self.capture.push(c)?;
        }
        self.capture.push(r)
    }

    /// Writes the inner launches still held: their outer records never came (the trace ended
    /// inside the outer call, or its record was lost). Called once the rings are drained.
    pub(super) fn finish_held(&mut self) {
        for orphan in self.held.drain() {
            if let Err(e) = self.own_launch(&orphan, Vec::new()) {
                self.io_error.get_or_insert_with(|| e.into());
            }
        }
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
    /// A process tree is followed: rescans attach for every process (the programs filter).
    pub(super) follow: bool,
    /// Every process is traced (`--all`): rescans attach for every process.
    pub(super) every: bool,
    /// Processes that map a new runtime library are held until it is probed: the periodic
    /// rescan looks at new processes only, and at all of them every [`FULL_RESCAN_EVERY`].
    pub(super) holding_new_files: bool,
}

/// How often `--all` looks at every process's mappings while new libraries hold their
/// processes (the backstop for what the hold cannot see).
pub(super) const FULL_RESCAN_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

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
