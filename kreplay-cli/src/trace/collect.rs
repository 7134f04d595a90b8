//! Where `kreplay trace`'s ring-buffer records go while it records: the per-thread streams,
//! the kernel names and the summary; and drop markers for what the probes lost.
use crate::{
    probes::loader::Counters,
    trace::{
        capture::Capture,
        kernels::{KernelNames, Resolved},
        nesting::{Held, LaunchRole, role_of},
        roctx::{Roctx, is_roctx},
        summary::Summary,
    },
};
use kreplay_common::{
    api::{ApiKind, NO_ARG, spec_of},
    probe::{CallRecord, NameRecord, Sample},
};

/// Writes a drop marker for each cause whose count grew since the last call.
pub fn mark_losses(
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
pub struct Collector {
    /// The per-thread stream files.
    pub capture: Capture,
    /// Calls per API, for the summary at the end.
    pub summary: Summary,
    /// Kernel names by launch address.
    pub kernels: KernelNames,
    /// Processes seen so far (checked for every record: foldhash, not SipHash).
    pub pids: std::collections::HashSet<u32, foldhash::fast::RandomState>,
    /// The pid of the previous record (0: none yet): records come in runs of one process, so
    /// most skip the set.
    pub last_pid: u32,
    /// The first failed write, reported once recording ends.
    pub io_error: Option<anyhow::Error>,
    /// Driver launches waiting for the runtime launch they were made from.
    pub held: Held,
    /// roctx calls waiting for their messages.
    pub roctx: Roctx,
    /// CPU time spent draining the rings into it, in ns (the summary's `reader cpu`).
    pub drain_cpu_ns: u64,
}

impl Collector {
    /// A collector writing to `capture`, with the kernel names read so far.
    pub fn new(capture: Capture, kernels: KernelNames) -> Collector {
        Collector {
            capture,
            summary: Summary::default(),
            kernels,
            pids: Default::default(),
            last_pid: 0,
            io_error: None,
            held: Default::default(),
            roctx: Default::default(),
            drain_cpu_ns: 0,
        }
    }

    /// Writes what is still waiting when recording ends (roctx calls whose message never came).
    pub fn finish(&mut self) {
        for a in self.roctx.finish() {
            if let Err(e) = self.capture.annotation(a) {
                self.io_error.get_or_insert_with(|| e.into());
            }
        }
    }

    /// Takes one ring-buffer record.
    pub fn push(&mut self, s: &Sample) {
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
    pub fn finish_held(&mut self) {
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
