//! Where `kreplay trace`'s ring-buffer records go while it records: the per-thread streams,
//! the kernel names and the summary; drop markers; what woke the loop.
use kreplay_cli::{
    probes::loader::Counters,
    trace::{capture::Capture, kernels::KernelNames, summary::Summary},
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

/// What woke the trace loop.
pub(super) enum Event {
    Data,
    Tick,
    Stop,
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
}

impl Collector {
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
        let rec = self.kernels.named(n);
        self.capture.kernel_name(n.tid, rec)
    }
}
