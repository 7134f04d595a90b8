//! How the call records' ring buffers are laid out: one per online CPU, up to
//! [`RING_SHARDS`], so that threads probed on different CPUs never contend for one ring's lock or
//! write the same cache lines (with one shared ring, 8–16 threads on as many CPUs pay twice the
//! cost of an empty probe pair per call; `docs/gpu/h200-probe-overhead.md`).
//!
//! The size a user gives (`--ringbuf-bytes`) is each ring's: what one busy thread can have in
//! flight before the reader drains it. At most [`RING_SHARDS`] rings of it are allocated.
use kreplay_common::probe::RING_SHARDS;

/// The rings in use and the size of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Rings in use (CPU `c` writes ring `c % count`).
    pub count: u32,
    /// Data bytes of each ring (a power of two, at least one page).
    pub bytes: u32,
}

impl RingLayout {
    /// Rings of `bytes` each (rounded down to a power of two, at least one `page`) for `cpus`
    /// CPUs.
    pub fn new(bytes: u32, cpus: usize, page: u32) -> RingLayout {
        let bytes = bytes.max(page);
        RingLayout {
            count: cpus.clamp(1, RING_SHARDS) as u32,
            bytes: 1 << (31 - bytes.leading_zeros()),
        }
    }

    /// Rings of `bytes` each for this machine's online CPUs, counted up to the highest online
    /// CPU's number (`/sys/devices/system/cpu/online`; the possible CPUs when that cannot be
    /// read, one ring when neither can). Sizing by the possible CPUs would allocate rings for
    /// CPUs a VM may never bring online; a CPU brought online later shares a ring by modulo.
    pub fn for_host(bytes: u32) -> RingLayout {
        let cpus = aya::util::online_cpus()
            .ok()
            .and_then(|v| v.into_iter().max())
            .map(|m| m as usize + 1)
            .or_else(|| aya::util::nr_cpus().ok())
            .unwrap_or(1);
        RingLayout::new(bytes, cpus, page_bytes())
    }
}

/// The summary's line on the rings: how many, how big, and the records each carried.
pub fn rings_line(layout: RingLayout, per_ring: &[u64]) -> String {
    let counts: Vec<String> = per_ring.iter().map(u64::to_string).collect();
    format!(
        "rings: {} of {} KiB (one per CPU, at most 16); records per ring: {}",
        layout.count,
        layout.bytes / 1024,
        counts.join(" ")
    )
}

/// This machine's page size: the smallest ring buffer the kernel accepts.
pub fn page_bytes() -> u32 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u32
}

#[cfg(test)]
mod tests {
    use super::{RingLayout, rings_line};

    #[test]
    fn the_rings_line_names_each_rings_records() {
        let l = RingLayout {
            count: 2,
            bytes: 8 << 20,
        };
        assert_eq!(
            rings_line(l, &[2001, 3]),
            "rings: 2 of 8192 KiB (one per CPU, at most 16); records per ring: 2001 3"
        );
    }

    #[test]
    fn one_ring_per_cpu_up_to_sixteen_each_at_least_a_page() {
        let l = |bytes, cpus| {
            let r = RingLayout::new(bytes, cpus, 4096);
            (r.count, r.bytes)
        };
        assert_eq!(l(4 << 20, 1), (1, 4 << 20));
        assert_eq!(l(4 << 20, 12), (12, 4 << 20));
        // More CPUs than rings: 16 rings, shared by modulo.
        assert_eq!(l(4 << 20, 128), (16, 4 << 20));
        // Below a page, a page; not a power of two, rounded down.
        assert_eq!(l(100, 2), (2, 4096));
        assert_eq!(l(5 << 20, 2), (2, 4 << 20));
        assert_eq!(l(4096, 0), (1, 4096));
    }
}
