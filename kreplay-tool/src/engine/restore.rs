//! `restore()`: writes a snapshot back. Tracked regions are re-validated under the inventory
//! read lock, held across the copy so a concurrent free cannot slip in between: a region that
//! was freed, shrunk, or reallocated at the same address (a different generation) since the
//! snapshot is skipped with a warning. Module variables are always restored. A failed copy is
//! logged and skipped.

use super::backend::Backend;
use super::inventory::Inventory;
use super::snapshot::{RegionKind, Snapshot};

/// What one restore did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Regions written back.
    pub regions: u64,
    /// Bytes written back.
    pub bytes: u64,
    /// Regions skipped (no longer the captured allocation, or a failed copy).
    pub skipped: u64,
}

/// Writes every still-valid region of `snap` back to the device.
pub fn restore<B: Backend>(backend: &B, inv: &Inventory, snap: &Snapshot<'_, B>) -> RestoreStats {
    let mut st = RestoreStats::default();
    let live = inv.read();
    for r in &snap.regions {
        if let RegionKind::Tracked { generation } = r.kind {
            match live.get(&r.addr) {
                Some(e) if e.generation == generation && e.size >= r.size => {}
                Some(_) => {
                    tracing::warn!(
                        "kreplay: restore skipped {:#x}: reallocated or shrunk since the snapshot",
                        r.addr
                    );
                    st.skipped += 1;
                    continue;
                }
                None => {
                    tracing::warn!(
                        "kreplay: restore skipped {:#x}: freed since the snapshot",
                        r.addr
                    );
                    st.skipped += 1;
                    continue;
                }
            }
        }
        match backend.copy_h2d(r.addr, r.host.ptr, r.size as usize) {
            Ok(()) => {
                st.regions += 1;
                st.bytes += r.size;
            }
            Err(e) => {
                tracing::warn!("kreplay: restore of {:#x} failed: {e}; skipped", r.addr);
                st.skipped += 1;
            }
        }
    }
    st
}
