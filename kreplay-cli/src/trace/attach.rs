//! Attaching the shared entry/return programs to every known API a runtime library exports.
use std::collections::{HashMap, HashSet};

use kreplay_common::{
    api::{APIS, ApiId, Library},
    probe::Cookie,
};

use super::discover::RuntimeLib;
use crate::probes::{
    elf::SymbolTable,
    loader::{ProbeError, Probes, Scope},
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
        if let std::collections::hash_map::Entry::Vacant(slot) = self.tables.entry(lib.dev_ino) {
            slot.insert(SymbolTable::read(&lib.host_path)?);
        }
        let table = &self.tables[&lib.dev_ino];
        let mut report = AttachReport::default();
        for (id, spec) in apis_for(lib.family) {
            match table.offset(spec.name) {
                Some(offset) => {
                    probes
                        .attach(&lib.host_path, offset, Cookie::for_spec(id, spec), scope)
                        .map_err(|e: ProbeError| anyhow::anyhow!(e))?;
                    report.attached.push(spec.name);
                }
                None => {
                    tracing::debug!(library = %lib.host_path.display(), symbol = spec.name, "not exported; skipped");
                    report.missing.push(spec.name);
                }
            }
        }
        tracing::info!(
            library = %lib.host_path.display(),
            ?scope,
            attached = report.attached.len(),
            missing = report.missing.len(),
            "probes attached"
        );
        Ok(Some(report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_select_their_apis() {
        let hip: Vec<&str> = apis_for(Library::Hip).map(|(_, s)| s.name).collect();
        assert!(hip.contains(&"hipMalloc") && hip.contains(&"hipGraphLaunch"));
        assert!(hip.iter().all(|n| n.starts_with("hip")));
        let cuda: Vec<&str> = apis_for(Library::Cuda).map(|(_, s)| s.name).collect();
        assert!(cuda.iter().all(|n| n.starts_with("cu")) && cuda.contains(&"cuLaunchKernel"));
        let any = apis_for(Library::User).count();
        assert_eq!(
            any,
            APIS.len() - 1,
            "every known API except the user function"
        );
    }
}
