//! Where a snapshot's copies live and how its restores find changed chunks.
//!
//! Placement, best first, for [`PlacementPref::Auto`]: device memory (when the backend can
//! allocate it and the device has room), pinned host memory (`Backend::host_alloc`), pageable
//! host memory (the process heap). The whole snapshot goes to one placement; a partial attempt
//! is freed before the next is tried, so at most the footprint is held once.
//!
//! Check, best first: exact byte comparison on the device (device-resident copies and a
//! backend with `compare_chunks_on_device`), hashing on the device (`hash_chunks_on_device`),
//! hashing on the host after a device-to-host read into one bounded scratch buffer.

use kreplay_common::stream::snapshot_mode;

use super::backend::{Backend, HostBuf};
use super::config::PlacementPref;

/// Where copies live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Device memory from `Backend::device_alloc`.
    Device,
    /// Pinned host memory from `Backend::host_alloc`.
    Pinned,
    /// Pageable host memory from the heap.
    Pageable,
}

impl Placement {
    /// The record code ([`snapshot_mode`]).
    pub fn code(self) -> u8 {
        match self {
            Self::Device => snapshot_mode::DEVICE,
            Self::Pinned => snapshot_mode::PINNED,
            Self::Pageable => snapshot_mode::PAGEABLE,
        }
    }

    /// The placements to try, in order, for a preference.
    pub fn order(pref: PlacementPref) -> &'static [Placement] {
        match pref {
            PlacementPref::Auto => &[Self::Device, Self::Pinned, Self::Pageable],
            PlacementPref::Device => &[Self::Device],
            PlacementPref::Pinned => &[Self::Pinned],
            PlacementPref::Pageable => &[Self::Pageable],
        }
    }
}

/// How restores find the chunks that changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// None: every byte is written back.
    Full,
    /// Device-to-host read into the scratch buffer, XXH3-128 per chunk on the host.
    HostHash,
    /// The backend's per-chunk hash on the device.
    DeviceHash,
    /// Exact comparison on the device with the device-resident copy.
    DeviceCompare,
}

impl Check {
    /// The record code ([`snapshot_mode`]).
    pub fn code(self) -> u8 {
        match self {
            Self::Full => snapshot_mode::FULL,
            Self::HostHash => snapshot_mode::HOST_HASH,
            Self::DeviceHash => snapshot_mode::DEVICE_HASH,
            Self::DeviceCompare => snapshot_mode::DEVICE_COMPARE,
        }
    }
}

/// Pageable host memory, allocated uninitialized (the copy into it is its first write, so
/// no page is zeroed and then overwritten).
#[derive(Debug)]
pub struct Pageable {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: an owned heap allocation nothing else aliases.
unsafe impl Send for Pageable {}

impl Pageable {
    fn layout(len: usize) -> Option<std::alloc::Layout> {
        std::alloc::Layout::from_size_align(len.max(1), 64).ok()
    }

    /// Allocates `len` bytes; `None` when the heap refuses.
    pub fn new(len: usize) -> Option<Self> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        (!ptr.is_null()).then_some(Self { ptr, len })
    }
}

impl Drop for Pageable {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: ptr came from alloc with this same layout and is freed once.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

/// One region's copy.
#[derive(Debug)]
pub enum Store {
    /// In device memory at this address.
    Device(u64),
    /// In pinned host memory.
    Pinned(HostBuf),
    /// In pageable host memory.
    Pageable(Pageable),
}

impl Store {
    /// Allocates `len` bytes in `p`; `None` when that placement has no room.
    pub fn alloc<B: Backend>(backend: &B, p: Placement, len: usize) -> Option<Self> {
        match p {
            Placement::Device => backend.device_alloc(len).map(Self::Device),
            Placement::Pinned => backend.host_alloc(len).map(Self::Pinned),
            Placement::Pageable => Pageable::new(len).map(Self::Pageable),
        }
    }

    /// Where it lives.
    pub fn placement(&self) -> Placement {
        match self {
            Self::Device(_) => Placement::Device,
            Self::Pinned(_) => Placement::Pinned,
            Self::Pageable(_) => Placement::Pageable,
        }
    }

    /// The host address of a host copy (`None` for a device copy).
    pub fn host_ptr(&self) -> Option<*mut u8> {
        match self {
            Self::Device(_) => None,
            Self::Pinned(b) => Some(b.ptr),
            Self::Pageable(b) => Some(b.ptr),
        }
    }

    /// Frees it.
    pub fn free<B: Backend>(self, backend: &B) {
        match self {
            Self::Device(p) => backend.device_free(p),
            Self::Pinned(b) => backend.host_free(b),
            Self::Pageable(b) => drop(b),
        }
    }
}
