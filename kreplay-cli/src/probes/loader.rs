//! Loading kreplay's BPF object and attaching its two shared programs to runtime functions.
//!
//! The object is built by `build.rs` and embedded in the binary. One uprobe program
//! (`call_enter`) and one uretprobe program (`call_return`) serve every API; each attachment
//! carries a [`Cookie`] that tells the programs which API fired.
use std::{collections::HashSet, num::NonZeroU32, os::fd::OwnedFd, path::Path};

use aya::{
    Ebpf, EbpfLoader,
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use kreplay_common::audit::{AUDIT_ENTRY_PROGRAM, AUDIT_RETURN_PROGRAM};
use kreplay_common::probe::{
    BARE_ENTRY_PROGRAM, BARE_RETURN_PROGRAM, Cookie, ENTRY_PROGRAM, EVENTS_MAP, EVENTS_MAPS,
    LOADER_HOOK_SYMBOL, LOADER_PROGRAM, RETURN_PROGRAM, RING_COUNT_GLOBAL, SLOT_MASK_GLOBAL,
    THREADS_MAP, TRACED_MAP,
};

use super::multi::{MultiError, MultiPrograms};

mod discovery;
mod maps;
use super::rings::RingLayout;
pub use discovery::HoldMaps;

/// Set to `0` to attach one perf event per function even where the kernel has uprobe-multi
/// links (to compare the two, or to work around a kernel bug).
pub use kreplay_common::replay_config::UPROBE_MULTI as UPROBE_MULTI_ENV;

/// aya-log's level global in the BPF object (`aya_log_ebpf`'s `AYA_LOG_LEVEL`).
const LOG_LEVEL_GLOBAL: &str = "AYA_LOG_LEVEL";

/// Each ring's size when a mode does not say (the object's default).
const DEFAULT_EVENTS_BYTES: u32 = 1 << 22;

/// The BPF object built from `kreplay-ebpf` (empty when built with AYA_BUILD_SKIP=1).
static BPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/kreplay-probes"));

/// Errors loading or attaching the probes.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The binary was built without its BPF object.
    #[error("this kreplay binary was built without its BPF programs (AYA_BUILD_SKIP was set)")]
    NotBuilt,
    /// The kernel refused the object.
    #[error("loading the BPF programs: {0}")]
    Load(#[from] aya::EbpfError),
    /// A program could not be loaded or attached.
    #[error("{what}: {source}")]
    Program {
        /// What was being done.
        what: String,
        /// The loader's error.
        source: aya::programs::ProgramError,
    },
    /// A map is missing or has the wrong type.
    #[error("BPF map {name}: {source}")]
    Map {
        /// The map's name.
        name: &'static str,
        /// The loader's error.
        source: aya::maps::MapError,
    },
    /// A map the object must define is absent.
    #[error("BPF map {0} missing from the object")]
    MissingMap(&'static str),
    /// The process-tree filter could not be set up.
    #[error("following child processes: {0}")]
    Follow(#[from] super::follow::FollowError),
    /// The dynamic loader's hook could not be attached.
    #[error("the loader hook: {0}")]
    LoaderHook(String),
    /// A uprobe-multi link could not be made.
    #[error(transparent)]
    Multi(#[from] MultiError),
    /// Processes mapping new runtime library files cannot be held.
    #[error("holding processes that map new runtime libraries: {0}")]
    Discovery(String),
}

/// The uprobe-multi copies of every program pair, unless [`UPROBE_MULTI_ENV`] is `0` or the
/// kernel refuses them (logged at debug level: older kernels simply lack them).
fn load_multi(bpf: &Ebpf, follow_tree: bool) -> Option<MultiPrograms> {
    if std::env::var(UPROBE_MULTI_ENV).is_ok_and(|v| v == "0") {
        tracing::debug!("{UPROBE_MULTI_ENV}=0: one perf event per function");
        return None;
    }
    let mut names: Vec<&'static str> = Programs::ALL.iter().flat_map(|p| p.names()).collect();
    if follow_tree {
        names.push(LOADER_PROGRAM);
    }
    match MultiPrograms::load(BPF_OBJECT, bpf, &names) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::debug!(error = %e, "uprobe-multi programs not loaded: one perf event per function");
            None
        }
    }
}

/// The number of thread slots for a requested count: the largest power of two not above it
/// (at least 1).
pub fn thread_slots(requested: u32) -> u32 {
    if requested <= 1 {
        1
    } else {
        1 << (31 - requested.leading_zeros())
    }
}

/// Which pair of BPF programs an attachment uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Programs {
    /// `call_enter`/`call_return`: one record per call (trace, probe).
    Record,
    /// `bare_enter`/`bare_return`: empty programs, the cost of the probes alone.
    Bare,
    /// `audit_enter`/`audit_return`: in-kernel latency histograms, no records (audit).
    Audit,
}

impl Programs {
    /// The (entry, return) program names.
    pub fn names(self) -> [&'static str; 2] {
        match self {
            Programs::Record => [ENTRY_PROGRAM, RETURN_PROGRAM],
            Programs::Bare => [BARE_ENTRY_PROGRAM, BARE_RETURN_PROGRAM],
            Programs::Audit => [AUDIT_ENTRY_PROGRAM, AUDIT_RETURN_PROGRAM],
        }
    }

    /// Every pair, for loading.
    pub const ALL: [Programs; 3] = [Programs::Record, Programs::Bare, Programs::Audit];
}

/// Which processes an attachment fires for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every process that maps the library.
    All,
    /// One process.
    Pid(u32),
}

pub use super::counters::Counters;

/// The loaded probes.
pub struct Probes {
    /// The uprobe-multi copies of the programs; `None` where the kernel has no uprobe-multi
    /// links (or [`UPROBE_MULTI_ENV`] is `0`): then each function gets a perf event.
    multi: Option<MultiPrograms>,
    /// The uprobe-multi links made, closed together on drop.
    links: Vec<OwnedFd>,
    /// The loader hooks attached, (file, offset).
    hooks: HashSet<(String, u64)>,
    bpf: Ebpf,
    /// The programs' debug messages (`--debug-probes`), when on.
    debug_log: Option<super::debug_log::DebugLog>,
    attached: HashSet<(String, u64, Scope, Programs)>,
    rings: RingLayout,
}

impl Probes {
    /// Loads the embedded object with a ring buffer of `ringbuf_bytes` (a power of two, at
    /// least one page).
    pub fn load(ringbuf_bytes: u32) -> Result<Probes, ProbeError> {
        Self::load_sized(&[(EVENTS_MAP, ringbuf_bytes)])
    }

    /// Like [`Probes::load`], with `thread_slots` slots for calls in flight (see
    /// [`kreplay_common::probe::ThreadSlot`]; rounded down to a power of two).
    pub fn load_with_slots(ringbuf_bytes: u32, thread_slots: u32) -> Result<Probes, ProbeError> {
        Self::load_sized(&[(EVENTS_MAP, ringbuf_bytes), (THREADS_MAP, thread_slots)])
    }

    /// Loads the embedded object with the given maps resized (name, max entries or bytes);
    /// a mode that does not use a map shrinks it to save kernel memory. The thread-slot array
    /// ([`THREADS_MAP`]) is indexed by thread id modulo its length, which is therefore rounded
    /// down to a power of two. [`EVENTS_MAP`]'s bytes are each ring's ([`RingLayout`]); rings
    /// not in use get one page.
    pub fn load_sized(sizes: &[(&'static str, u32)]) -> Result<Probes, ProbeError> {
        Self::load_with(sizes, false)
    }

    /// Like [`Probes::load_sized`]; with `follow_tree`, the recording programs record only the
    /// processes added with [`Probes::follow`] and, from their fork on, their descendants
    /// (attach with [`Scope::All`] then: the filter is the programs').
    pub fn load_with(
        sizes: &[(&'static str, u32)],
        follow_tree: bool,
    ) -> Result<Probes, ProbeError> {
        if BPF_OBJECT.is_empty() {
            return Err(ProbeError::NotBuilt);
        }
        let tree = follow_tree
            .then(super::follow::TreeFilter::for_this_kernel)
            .transpose()?;
        let mut loader = EbpfLoader::new();
        let mut mask = None;
        let mut events = DEFAULT_EVENTS_BYTES;
        for &(name, size) in sizes {
            if name == EVENTS_MAP {
                events = size;
                continue;
            }
            let size = if name == THREADS_MAP {
                let slots = thread_slots(size);
                mask = Some(slots - 1);
                slots
            } else {
                size
            };
            loader.map_max_entries(name, size);
        }
        if let Some(m) = &mask {
            loader.override_global(SLOT_MASK_GLOBAL, m, true);
        }
        let rings = RingLayout::for_host(events);
        let page = super::rings::page_bytes();
        for (i, name) in EVENTS_MAPS.iter().enumerate() {
            let bytes = if (i as u32) < rings.count {
                rings.bytes
            } else {
                page
            };
            loader.map_max_entries(name, bytes);
        }
        loader.override_global(RING_COUNT_GLOBAL, &rings.count, true);
        // Off, the verifier sees the level as a constant and drops the programs' log calls.
        let level = super::debug_log::level();
        loader.override_global(LOG_LEVEL_GLOBAL, &level, true);
        match &tree {
            Some(t) => t.configure(&mut loader),
            // Not following: the set stays empty, so it takes no kernel memory to speak of.
            None => {
                loader.map_max_entries(TRACED_MAP, 1);
            }
        }
        let mut bpf = loader.load(BPF_OBJECT)?;
        if follow_tree {
            super::follow::start(&mut bpf)?;
        }
        // Before the debug log takes its map: the copies bind to every map by name.
        let multi = load_multi(&bpf, follow_tree);
        let debug_log = super::debug_log::DebugLog::start(&mut bpf);
        for name in Programs::ALL.iter().flat_map(|p| p.names()) {
            let prog: &mut UProbe = bpf
                .program_mut(name)
                .ok_or_else(|| ProbeError::Program {
                    what: format!("program {name}"),
                    source: aya::programs::ProgramError::UnexpectedProgramType,
                })?
                .try_into()
                .map_err(|source| ProbeError::Program {
                    what: format!("program {name}"),
                    source,
                })?;
            prog.load().map_err(|source| ProbeError::Program {
                what: format!("loading {name}"),
                source,
            })?;
        }
        Ok(Probes {
            multi,
            links: Vec::new(),
            hooks: HashSet::new(),
            bpf,
            debug_log,
            attached: HashSet::new(),
            rings,
        })
    }

    /// Prints the programs' debug messages written since the last call (`--debug-probes`;
    /// nothing when they are off).
    pub fn flush_debug_log(&mut self) {
        if let Some(l) = self.debug_log.as_mut() {
            l.flush();
        }
    }

    /// Attaches the recording entry and return probes at `offset` of `library` for `scope`.
    /// Returns false when this exact attachment already exists.
    pub fn attach(
        &mut self,
        library: &Path,
        offset: u64,
        cookie: Cookie,
        scope: Scope,
    ) -> Result<bool, ProbeError> {
        self.attach_programs(library, offset, cookie, scope, Programs::Record)
    }

    /// Attaches the entry and return programs of `programs` at `offset` of `library`.
    pub fn attach_programs(
        &mut self,
        library: &Path,
        offset: u64,
        cookie: Cookie,
        scope: Scope,
        programs: Programs,
    ) -> Result<bool, ProbeError> {
        let key = (library.display().to_string(), offset, scope, programs);
        if self.attached.contains(&key) {
            return Ok(false);
        }
        let uscope = match scope {
            Scope::All => UProbeScope::AllProcesses,
            Scope::Pid(pid) => match NonZeroU32::new(pid) {
                Some(p) => UProbeScope::OneProcess(p),
                None => UProbeScope::AllProcesses,
            },
        };
        for name in programs.names() {
            self.attach_perf(name, library, offset, Some(cookie.0), uscope)?;
        }
        self.attached.insert(key);
        Ok(true)
    }

    /// Attaches aya's program `name` at `offset` of `library` with a perf event of its own.
    fn attach_perf(
        &mut self,
        name: &'static str,
        library: &Path,
        offset: u64,
        cookie: Option<u64>,
        scope: UProbeScope,
    ) -> Result<(), ProbeError> {
        let prog: &mut UProbe = self
            .bpf
            .program_mut(name)
            .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
            .and_then(TryInto::try_into)
            .map_err(|source| ProbeError::Program {
                what: format!("program {name}"),
                source,
            })?;
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(offset),
            cookie,
        };
        prog.attach(point, library, scope)
            .map_err(|source| ProbeError::Program {
                what: format!("attaching {name} to {}+{offset:#x}", library.display()),
                source,
            })?;
        Ok(())
    }

    /// Attaches the entry and return programs of `programs` to every `(offset, cookie)` of
    /// `library` for `scope`: with one uprobe-multi link per program where the kernel has
    /// them, else one perf event per function. Returns how many functions were newly attached
    /// (those attached before are skipped).
    pub fn attach_many(
        &mut self,
        library: &Path,
        points: &[(u64, Cookie)],
        scope: Scope,
        programs: Programs,
    ) -> Result<usize, ProbeError> {
        let name = library.display().to_string();
        let mut seen = HashSet::new();
        let fresh: Vec<(u64, u64)> = points
            .iter()
            .filter(|(off, _)| {
                seen.insert(*off)
                    && !self
                        .attached
                        .contains(&(name.clone(), *off, scope, programs))
            })
            .map(|&(off, c)| (off, c.0))
            .collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        if let Some(multi) = &self.multi {
            let pid = match scope {
                Scope::All => 0,
                Scope::Pid(p) => p,
            };
            let [entry, ret] = programs.names();
            let linked = multi
                .attach(entry, library, &fresh, pid, false)
                .and_then(|e| Ok([e, multi.attach(ret, library, &fresh, pid, true)?]));
            match linked {
                Ok(pair) => {
                    self.links.extend(pair);
                    for &(off, _) in &fresh {
                        self.attached.insert((name.clone(), off, scope, programs));
                    }
                    return Ok(fresh.len());
                }
                Err(e) if self.links.is_empty() && e.unsupported() => {
                    tracing::info!(error = %e, "no uprobe-multi links: one perf event per function (detaching takes longer)");
                    self.multi = None;
                }
                Err(e) => {
                    return Err(ProbeError::Multi(e));
                }
            }
        }
        for &(off, cookie) in &fresh {
            self.attach_programs(library, off, Cookie(cookie), scope, programs)?;
        }
        Ok(fresh.len())
    }

    /// Follows process `tgid` and, from now on, the processes it starts (see
    /// [`Probes::load_with`]).
    pub fn follow(&mut self, tgid: u32) -> Result<(), ProbeError> {
        Ok(super::follow::add(&mut self.bpf, tgid)?)
    }

    /// The processes followed now (those started since included, those gone excluded).
    pub fn followed(&mut self) -> Result<Vec<u32>, ProbeError> {
        Ok(super::follow::followed(&mut self.bpf)?)
    }

    /// Puts the loader hook of the followed processes on `_dl_debug_state` of the dynamic loader
    /// `ld_so` (see [`Probes::load_with`]); false when that file already has it.
    pub fn attach_loader_hook(&mut self, ld_so: &Path) -> Result<bool, ProbeError> {
        let table = super::elf::SymbolTable::read(ld_so)
            .map_err(|e| ProbeError::LoaderHook(format!("reading {}: {e}", ld_so.display())))?;
        let offset = table.offset(LOADER_HOOK_SYMBOL).ok_or_else(|| {
            ProbeError::LoaderHook(format!(
                "{} exports no {LOADER_HOOK_SYMBOL}",
                ld_so.display()
            ))
        })?;
        let key = (ld_so.display().to_string(), offset);
        if !self.hooks.insert(key) {
            return Ok(false);
        }
        if let Some(multi) = &self.multi {
            self.links
                .push(multi.attach(LOADER_PROGRAM, ld_so, &[(offset, 0)], 0, false)?);
            return Ok(true);
        }
        self.attach_perf(
            LOADER_PROGRAM,
            ld_so,
            offset,
            None,
            UProbeScope::AllProcesses,
        )?;
        Ok(true)
    }

    /// Whether attachments use uprobe-multi links.
    pub fn uses_multi_links(&self) -> bool {
        self.multi.is_some()
    }

    /// The kernel's statistics of the (entry, return) programs named: the uprobe-multi copies
    /// when links were made with them, else aya's programs (attached one function at a time,
    /// as `kreplay probe` does, or after the kernel refused uprobe-multi links).
    pub fn program_runs(
        &self,
        names: [&'static str; 2],
    ) -> Result<[crate::audit::maps::ProgramRuns; 2], crate::audit::maps::AuditMapError> {
        match &self.multi {
            Some(m) if !self.links.is_empty() => {
                let mut out = [crate::audit::maps::ProgramRuns::default(); 2];
                for (slot, name) in out.iter_mut().zip(names) {
                    let (run_time_ns, run_count) = m
                        .runs(name)
                        .ok_or(crate::audit::maps::AuditMapError::Missing(name))?;
                    *slot = crate::audit::maps::ProgramRuns {
                        run_time_ns,
                        run_count,
                    };
                }
                Ok(out)
            }
            _ => crate::audit::maps::program_runs(&self.bpf, names),
        }
    }

    /// Closes the uprobe-multi links now, all at once (see [`super::multi::close_together`]);
    /// the perf-event probes, if any, go when the object drops.
    pub fn close_links(&mut self) {
        super::multi::close_together(std::mem::take(&mut self.links));
    }

    /// The loaded object, for modes that read their own maps and program statistics.
    pub fn ebpf(&self) -> &Ebpf {
        &self.bpf
    }

    /// The loaded object, mutably (removing map entries).
    pub fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.bpf
    }

    /// Number of (library, offset, scope, programs) attachments made (functions probed, each at
    /// entry and return).
    pub fn attachments(&self) -> usize {
        self.attached.len()
    }

    /// The rings in use and their size.
    pub fn rings(&self) -> RingLayout {
        self.rings
    }
}

impl crate::quick_exit::Teardown for Probes {
    fn close_fast(&mut self) {
        self.close_links();
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        self.close_links();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_slots_round_down_to_a_power_of_two() {
        assert_eq!(thread_slots(0), 1);
        assert_eq!(thread_slots(1), 1);
        assert_eq!(thread_slots(2), 2);
        assert_eq!(thread_slots(3), 2);
        assert_eq!(thread_slots(16384), 16384);
        assert_eq!(thread_slots(20000), 16384);
        assert_eq!(thread_slots(u32::MAX), 1 << 31);
    }
}
