//! `snap(agent)`: a host copy of every tracked allocation the agent owns plus the module-scope
//! variables loaded for it, discovered now (constant memory may be populated after load).
//!
//! Constant variables are skipped: kernels cannot write them, so a pass cannot change them
//! and restoring them would only cost bandwidth. Variables with a zero address or size are
//! skipped; anything over 1 GiB is skipped with a warning (a sanity cap). A snapshot that
//! cannot be completed — host allocation failure, failed device-to-host copy, failed symbol
//! enumeration, metadata allocation failure — has `ok == false` and says which in `failure`.

use super::backend::{Backend, BackendError, HostBuf};
use super::inventory::Inventory;

/// Module variables larger than this are not captured.
pub const MODULE_VAR_CAP: u64 = 1 << 30;

/// What a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// A tracked allocation, with the generation it had when captured.
    Tracked {
        /// Inventory generation stamp.
        generation: u64,
    },
    /// A module-scope variable (always present while its executable is loaded).
    ModuleVar,
}

/// One captured region and its host copy.
#[derive(Debug)]
pub struct Region {
    /// Device address.
    pub addr: u64,
    /// Bytes captured.
    pub size: u64,
    /// What it is.
    pub kind: RegionKind,
    /// The host copy (`size` bytes).
    pub host: HostBuf,
}

/// Why a snapshot is incomplete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapFailure {
    /// Host memory for a region's copy could not be allocated.
    #[error("host allocation of {size} bytes for region {addr:#x} failed")]
    HostAlloc {
        /// Region address.
        addr: u64,
        /// Region size.
        size: u64,
    },
    /// A device-to-host copy failed.
    #[error("device-to-host copy of region {addr:#x} failed: {source}")]
    CopyD2H {
        /// Region address.
        addr: u64,
        /// The failing call.
        source: BackendError,
    },
    /// The module-scope variables could not be enumerated.
    #[error("module variable enumeration failed: {0}")]
    SymbolIteration(BackendError),
    /// The snapshot's own metadata could not be allocated.
    #[error("snapshot metadata allocation failed")]
    Metadata,
}

/// An agent's snapshot; frees its host copies when dropped.
pub struct Snapshot<'b, B: Backend> {
    backend: &'b B,
    /// Captured regions, tracked allocations first.
    pub regions: Vec<Region>,
    /// Why it is incomplete, if it is.
    pub failure: Option<SnapFailure>,
    /// Variables skipped because they exceed [`MODULE_VAR_CAP`].
    pub oversized_vars: u64,
}

impl<B: Backend> Snapshot<'_, B> {
    /// Whether every region was captured.
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// Bytes captured.
    pub fn bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.size).sum()
    }
}

impl<B: Backend> Drop for Snapshot<'_, B> {
    fn drop(&mut self) {
        for r in self.regions.drain(..) {
            self.backend.host_free(r.host);
        }
    }
}

/// Captures `agent`'s tracked allocations and module variables.
pub fn snap<'b, B: Backend>(backend: &'b B, inv: &Inventory, agent: u64) -> Snapshot<'b, B> {
    let mut s = Snapshot {
        backend,
        regions: Vec::new(),
        failure: None,
        oversized_vars: 0,
    };
    let tracked = inv.of_agent(agent);
    let vars = match backend.module_variables(agent) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("kreplay: snapshot declined: module variable enumeration failed: {e}");
            s.failure = Some(SnapFailure::SymbolIteration(e));
            return s;
        }
    };
    let mut wanted: Vec<(u64, u64, RegionKind)> = Vec::new();
    if wanted.try_reserve(tracked.len() + vars.len()).is_err()
        || s.regions.try_reserve(tracked.len() + vars.len()).is_err()
    {
        tracing::warn!("kreplay: snapshot declined: metadata allocation failed");
        s.failure = Some(SnapFailure::Metadata);
        return s;
    }
    for (base, e) in tracked {
        wanted.push((
            base,
            e.size,
            RegionKind::Tracked {
                generation: e.generation,
            },
        ));
    }
    for v in vars {
        if v.addr == 0 || v.size == 0 || v.constant {
            continue;
        }
        if v.size > MODULE_VAR_CAP {
            tracing::warn!(
                "kreplay: module variable {} ({} bytes) exceeds the 1 GiB cap; not captured",
                v.name,
                v.size
            );
            s.oversized_vars += 1;
            continue;
        }
        wanted.push((v.addr, v.size, RegionKind::ModuleVar));
    }
    for (addr, size, kind) in wanted {
        let Some(host) = backend.host_alloc(size as usize) else {
            tracing::warn!(
                "kreplay: snapshot declined: host allocation of {size} bytes for {addr:#x} failed"
            );
            s.failure = Some(SnapFailure::HostAlloc { addr, size });
            return s;
        };
        if let Err(source) = backend.copy_d2h(host.ptr, addr, size as usize) {
            tracing::warn!(
                "kreplay: snapshot declined: device-to-host copy of {addr:#x} failed: {source}"
            );
            backend.host_free(host);
            s.failure = Some(SnapFailure::CopyD2H { addr, source });
            return s;
        }
        s.regions.push(Region {
            addr,
            size,
            kind,
            host,
        });
    }
    s
}
