//! Capturing one region of a snapshot: its copy into the region's store and, per the
//! snapshot's check, its chunk hashes (on the device or through the host).

use super::backend::{Backend, BackendError};
use super::chunks::{chunk_count, hash_into, read_in_pieces};
use super::placement::{Check, Store};
use super::snapshot::*;
use kreplay_common::stream::monotonic_ns as now_ns;

/// Hashes region `i` of `s` on the device once its copy is taken, into `slot` when given (see
/// [`hash_on_device`]), timing it; a failure makes every restore of `s` write every byte.
pub(super) fn hash_captured<B: Backend>(s: &mut Snapshot<'_, B>, i: usize, slot: Option<u64>) {
    let (backend, chunk) = (s.backend, s.chunk);
    let r = &mut s.regions[i];
    let (addr, size) = (r.addr, r.size);
    let t = now_ns();
    let hashed = hash_on_device(backend, r, chunk, slot);
    s.hash_ns += now_ns() - t;
    match hashed {
        Ok(true) => s.bytes_hashed += size,
        other => {
            tracing::warn!(
                "kreplay: device hashing of {addr:#x} failed ({other:?}); restores write every byte"
            );
            s.check = Check::Full;
            s.regions.iter_mut().for_each(|r| r.hashes = Vec::new());
        }
    }
}

/// Hashes region `r` on the device: into `slot` (its place in the snapshot's device hash
/// buffer, when there is one) when the backend can keep hashes there (the check then compares
/// on the device and only a flag per chunk comes back, or restores in one pass), else into
/// `r.hashes`.
fn hash_on_device<B: Backend>(
    backend: &B,
    r: &mut Region,
    chunk: usize,
    slot: Option<u64>,
) -> Result<bool, BackendError> {
    let (addr, size) = (r.addr, r.size as usize);
    if let Some(dst) = slot {
        match backend.hash_chunks_into_device(addr, size, chunk, dst) {
            Ok(true) => {
                r.dev_hashes = dst;
                return Ok(true);
            }
            other => tracing::debug!(
                "kreplay: device-resident hashes of {addr:#x}: {other:?}; keeping them on the host"
            ),
        }
    }
    r.hashes.resize(chunk_count(r.size, chunk), [0; 2]);
    backend.hash_chunks_on_device(addr, size, chunk, &mut r.hashes)
}

/// Copies (and hashes, per the check) region `i` of `s`; regions are captured in order (each
/// takes the next chunks of the device hash buffer).
pub(super) fn capture<B: Backend>(s: &mut Snapshot<'_, B>, i: usize) -> Result<(), SnapFailure> {
    let backend = s.backend;
    let (chunk, check) = (s.chunk, s.check);
    let scratch = s
        .scratch
        .as_ref()
        .and_then(|(st, n)| Some((st.host_ptr()?, *n)));
    let slot = (s.dev_hash_buf != 0).then(|| s.dev_hash_buf + 16 * s.dev_hash_used as u64);
    let Some(r) = s.regions.get_mut(i) else {
        return Ok(());
    };
    s.dev_hash_used += chunk_count(r.size, chunk);
    let (addr, size) = (r.addr, r.size as usize);
    let want_hashes = matches!(check, Check::HostHash | Check::DeviceHash);
    if want_hashes
        && r.hashes
            .try_reserve_exact(chunk_count(r.size, chunk))
            .is_err()
    {
        return Err(SnapFailure::Metadata);
    }
    let t = now_ns();
    match (&r.store, r.store.host_ptr()) {
        (Store::Device(dev), _) => backend
            .copy_d2d(*dev, addr, size)
            .map_err(|source| SnapFailure::CopyD2D { addr, source })?,
        (_, None) => return Err(SnapFailure::Metadata),
        (_, Some(ptr)) if check == Check::HostHash => {
            // Copy in batches and hash each while it is still in cache.
            let hashes = &mut r.hashes;
            // SAFETY: the store holds `size` bytes, so ptr + off is valid for every piece.
            let copy_ns = unsafe {
                read_in_pieces(
                    backend,
                    addr,
                    size,
                    HASH_BATCH.max(chunk),
                    |off| ptr.add(off),
                    |_, bytes| hash_into(bytes, chunk, hashes),
                )
            }
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?;
            s.bytes_hashed += size as u64;
            s.copy_ns += copy_ns;
            s.copied += size as u64;
            return Ok(());
        }
        (_, Some(ptr)) => backend
            .copy_d2h(ptr, addr, size)
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?,
    }
    s.copy_ns += now_ns() - t;
    s.copied += size as u64;
    match check {
        Check::DeviceHash => hash_captured(s, i, slot),
        Check::HostHash => {
            // A device-resident copy: read the original through the scratch to hash it.
            let Some((buf, len)) = scratch else {
                return Ok(());
            };
            let hashes = &mut r.hashes;
            // SAFETY: the scratch holds `len` bytes, reused for every piece.
            unsafe {
                read_in_pieces(
                    backend,
                    addr,
                    size,
                    len,
                    |_| buf,
                    |_, bytes| hash_into(bytes, chunk, hashes),
                )
            }
            .map_err(|source| SnapFailure::CopyD2H { addr, source })?;
            s.bytes_hashed += size as u64;
        }
        Check::Full | Check::DeviceCompare => {}
    }
    Ok(())
}
