//! Attaching the shared entry/return programs to every known API a runtime library exports.
use std::collections::{HashMap, HashSet};

use kreplay_common::{
    api::{APIS, ApiId, Library},
    probe::{Cookie, discovery::FileKey},
};

use super::discover::RuntimeLib;
use crate::probes::{
    elf::SymbolTable,
    loader::{ProbeError, Probes, Programs, Scope},
};

/// What attaching to one library did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AttachReport {
    /// APIs attached (entry + return each).
    pub attached: Vec<&'static str>,
    /// Known APIs of the family the library does not export.
    pub missing: Vec<&'static str>,
}

/// Attaches probes, remembering each library's symbols and what is already attached.
#[derive(Default)]
pub struct Attacher {
    tables: HashMap<(u64, u64), SymbolTable>,
    done: HashSet<((u64, u64), Scope)>,
    programs: Option<Programs>,
    busy: std::time::Duration,
    /// The processes the last rescans looked at, and when every process was last looked at.
    seen: HashSet<u32>,
    last_full: Option<std::time::Instant>,
    /// CUDA's launch APIs are left alone: kreplay-tool writes those calls from CUPTI
    /// (`--cupti-launches`).
    cuda_launches_from_tool: bool,
    /// With that: the libraries whose launch APIs were left alone, and the processes whose
    /// tool could not record them after all (theirs are probed, for that process alone).
    launch_libs: Vec<RuntimeLib>,
    launch_pids: Vec<u32>,
}

/// Whether `spec` is a CUDA (driver or runtime) launch: what `--cupti-launches` leaves to the
/// tool.
pub fn is_cuda_launch(spec: &kreplay_common::api::ApiSpec) -> bool {
    spec.kind == kreplay_common::api::ApiKind::Launch
        && matches!(spec.library, Library::Cuda | Library::CudaRt)
}

/// The APIs a library of `family` may export (a `--lib` of unknown family: all of them).
fn apis_for(
    family: Library,
) -> impl Iterator<Item = (ApiId, &'static kreplay_common::api::ApiSpec)> {
    APIS.iter().enumerate().filter_map(move |(i, s)| {
        let wanted = match family {
            Library::User => s.library != Library::User,
            f => s.library == f,
        };
        wanted.then_some((i as ApiId, s))
    })
}

impl Attacher {
    /// An attacher that attaches `programs` instead of the recording pair.
    pub fn with_programs(programs: Programs) -> Attacher {
        Attacher {
            programs: Some(programs),
            ..Attacher::default()
        }
    }

    /// An attacher that attaches no CUDA launch API ([`is_cuda_launch`]): kreplay-tool records
    /// those calls from CUPTI.
    pub fn without_cuda_launches() -> Attacher {
        Attacher {
            cuda_launches_from_tool: true,
            ..Attacher::default()
        }
    }

    /// Whether the CUDA launch APIs are left to kreplay-tool ([`Attacher::without_cuda_launches`]).
    pub fn launches_from_tool(&self) -> bool {
        self.cuda_launches_from_tool
    }

    /// Probes the CUDA launch APIs left alone, for process `pid` only, in every library
    /// attached so far and in those attached later: its kreplay-tool cannot record them.
    pub fn probe_launches_of(&mut self, probes: &mut Probes, pid: u32) {
        if self.launch_pids.contains(&pid) {
            return;
        }
        self.launch_pids.push(pid);
        for lib in self.launch_libs.clone() {
            self.attach_launches(probes, &lib, pid);
        }
    }

    /// Attaches `lib`'s CUDA launch APIs for process `pid`; a failure is logged.
    fn attach_launches(&mut self, probes: &mut Probes, lib: &RuntimeLib, pid: u32) {
        let Some(table) = self.tables.get(&lib.dev_ino) else {
            return;
        };
        let points: Vec<_> = apis_for(lib.family)
            .filter(|(_, spec)| is_cuda_launch(spec))
            .filter_map(|(id, spec)| Some((table.offset(spec.name)?, Cookie::for_spec(id, spec))))
            .collect();
        if points.is_empty() {
            return;
        }
        let programs = self.programs.unwrap_or(Programs::Record);
        match probes.attach_many(&lib.host_path, &points, Scope::Pid(pid), programs) {
            Ok(_) => {
                tracing::info!(pid, library = %lib.host_path.display(), "launch probes attached")
            }
            Err(e) => {
                tracing::warn!(pid, library = %lib.host_path.display(), error = %e, "launch probes not attached")
            }
        }
    }

    /// Attaches every API of `lib`'s family for `scope`. Symbols the library lacks are not an
    /// error: they are listed in the report and logged at debug level. Returns `None` when this
    /// library was already attached for this scope.
    pub fn attach(
        &mut self,
        probes: &mut Probes,
        lib: &RuntimeLib,
        scope: Scope,
    ) -> Result<Option<AttachReport>, anyhow::Error> {
        if !self.done.insert((lib.dev_ino, scope)) {
            return Ok(None);
        }
        let t0 = std::time::Instant::now();
        let out = self.attach_new(probes, lib, scope);
        self.busy += t0.elapsed();
        out.map(Some)
    }

    /// The files attached for every process, as the kernel names them.
    pub fn files_for_all(&self) -> impl Iterator<Item = FileKey> + '_ {
        self.done
            .iter()
            .filter(|(_, scope)| *scope == Scope::All)
            .map(|&((dev, ino), _)| FileKey::from_stat(dev, ino))
    }

    /// The time spent attaching so far (symbol tables read, probes attached): what a target
    /// waits before its calls are seen.
    pub fn busy(&self) -> std::time::Duration {
        self.busy
    }

    fn attach_new(
        &mut self,
        probes: &mut Probes,
        lib: &RuntimeLib,
        scope: Scope,
    ) -> Result<AttachReport, anyhow::Error> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.tables.entry(lib.dev_ino) {
            slot.insert(SymbolTable::read(&lib.host_path)?);
        }
        let table = &self.tables[&lib.dev_ino];
        let mut report = AttachReport::default();
        let mut points = Vec::new();
        for (id, spec) in apis_for(lib.family) {
            if self.cuda_launches_from_tool && is_cuda_launch(spec) {
                continue;
            }
            match table.offset(spec.name) {
                Some(offset) => {
                    points.push((offset, Cookie::for_spec(id, spec)));
                    report.attached.push(spec.name);
                }
                None => {
                    tracing::debug!(library = %lib.host_path.display(), symbol = spec.name, "not exported; skipped");
                    report.missing.push(spec.name);
                }
            }
        }
        // One batch per library: a uprobe-multi link per program where the kernel has them.
        probes
            .attach_many(
                &lib.host_path,
                &points,
                scope,
                self.programs.unwrap_or(Programs::Record),
            )
            .map_err(|e: ProbeError| anyhow::anyhow!(e))?;
        tracing::info!(
            library = %lib.host_path.display(),
            ?scope,
            attached = report.attached.len(),
            missing = report.missing.len(),
            "probes attached"
        );
        if self.cuda_launches_from_tool
            && apis_for(lib.family).any(|(_, s)| is_cuda_launch(s))
            && !self.launch_libs.iter().any(|l| l.dev_ino == lib.dev_ino)
        {
            self.launch_libs.push(lib.clone());
            for pid in self.launch_pids.clone() {
                self.attach_launches(probes, lib, pid);
            }
        }
        Ok(report)
    }

    /// Attaches to the runtime libraries `pid` has mapped since the last look (dlopen);
    /// failures are logged, not returned: one bad library must not stop the others.
    pub fn rescan_pid(&mut self, probes: &mut Probes, pid: u32, scope: Scope) {
        let Ok(libs) = super::discover::libs_of_pid(pid) else {
            return;
        };
        for lib in libs {
            if let Err(e) = self.attach(probes, &lib, scope) {
                tracing::warn!(pid, library = %lib.host_path.display(), error = %e, "attach failed");
            }
        }
    }

    /// Attaches system-wide to every runtime library any other process maps now.
    pub fn rescan_all(&mut self, probes: &mut Probes) {
        let pids = super::discover::all_pids();
        for &pid in &pids {
            if pid != std::process::id() {
                self.rescan_pid(probes, pid, Scope::All);
            }
        }
        self.seen = pids.into_iter().collect();
        self.last_full = Some(std::time::Instant::now());
    }

    /// Like [`Attacher::rescan_all`], but only for the processes started since the last
    /// rescan, unless `full_every` has passed since every process was looked at. Reading every
    /// process's mappings every 200 ms kept 80% of a core busy with 2000 processes on the dev
    /// VM (docs/trace.md, "`--all`: runtime libraries in new places"): when mapping a new
    /// library holds its process ([`Probes::hold_new_files`]), the
    /// periodic look is only a backstop (a static CUDA runtime in an executable, a process the
    /// hold could not stop), and a look at new processes keeps it bounded.
    pub fn rescan_new(&mut self, probes: &mut Probes, full_every: std::time::Duration) {
        if self.last_full.is_none_or(|t| t.elapsed() >= full_every) {
            return self.rescan_all(probes);
        }
        let pids = super::discover::all_pids();
        let me = std::process::id();
        for &pid in &pids {
            if pid != me && !self.seen.contains(&pid) {
                self.rescan_pid(probes, pid, Scope::All);
            }
        }
        self.seen = pids.into_iter().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_select_their_apis() {
        let hip: Vec<&str> = apis_for(Library::Hip).map(|(_, s)| s.name).collect();
        assert!(hip.contains(&"hipMalloc") && hip.contains(&"hipGraphLaunch"));
        assert!(hip.contains(&"__hipRegisterFunction"));
        assert!(
            hip.iter()
                .all(|n| n.starts_with("hip") || n.starts_with("__hip"))
        );
        let cuda: Vec<&str> = apis_for(Library::Cuda).map(|(_, s)| s.name).collect();
        assert!(cuda.iter().all(|n| n.starts_with("cu")) && cuda.contains(&"cuLaunchKernel"));
        let launches: Vec<&str> = APIS
            .iter()
            .filter(|s| is_cuda_launch(s))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            launches,
            [
                "cuLaunchKernel",
                "cuLaunchKernelEx",
                "cuGraphLaunch",
                "cudaLaunchKernel",
                "cudaLaunchKernelExC",
                "cudaLaunchCooperativeKernel",
                "cudaGraphLaunch"
            ]
        );
        let any = apis_for(Library::User).count();
        assert_eq!(
            any,
            APIS.len() - 1,
            "every known API except the user function"
        );
    }
}
