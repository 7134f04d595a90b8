//! Replay engine benchmark: fixed cost per replayed dispatch beyond the copies, snapshot and
//! restore throughput against a plain memcpy of the same bytes, and host memory held, on a
//! backend whose "device" is host memory (so the copies are memcpy and the ratios measure the
//! engine's own overhead). Markdown on stdout, and to `$KREPLAY_BENCH_OUT` if set.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use kreplay_tool::engine::backend::{Backend, BackendError, HostBuf, ModuleVar, PointerInfo};
use kreplay_tool::engine::config::SnapshotPolicy;
use kreplay_tool::engine::inventory::Inventory;
use kreplay_tool::engine::replay::{Request, replay};
use kreplay_tool::engine::restore::restore;
use kreplay_tool::engine::snapshot::snap;

const AGENT: u64 = 7;

/// Host memory standing in for the device; counts host bytes held.
#[derive(Default)]
struct MemBackend {
    live: Cell<u64>,
    peak: Cell<u64>,
}

impl Backend for MemBackend {
    type Dispatch = Vec<(u64, usize)>;

    fn host_alloc(&self, len: usize) -> Option<HostBuf> {
        let b = vec![0u8; len].into_boxed_slice();
        self.live.set(self.live.get() + len as u64);
        self.peak.set(self.peak.get().max(self.live.get()));
        Some(HostBuf {
            ptr: Box::into_raw(b) as *mut u8,
            len,
        })
    }
    fn host_free(&self, buf: HostBuf) {
        self.live.set(self.live.get() - buf.len as u64);
        // SAFETY: buf came from host_alloc's boxed slice of buf.len bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.ptr, buf.len)) });
    }
    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        // SAFETY: src is a live region of the bench's device buffers, dst a host buffer of len.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst, len) };
        Ok(())
    }
    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        // SAFETY: as above, the other way.
        unsafe { std::ptr::copy_nonoverlapping(src, dst as *mut u8, len) };
        Ok(())
    }
    fn pointer_info(&self, _ptr: u64) -> Option<PointerInfo> {
        None
    }
    fn agent_is_gpu(&self, agent: u64) -> bool {
        agent == AGENT
    }
    fn module_variables(&self, _agent: u64) -> Result<Vec<ModuleVar>, BackendError> {
        Ok(Vec::new())
    }
    fn submit_wait(&self, d: &Self::Dispatch) -> Result<(), BackendError> {
        // The "kernel": one word written in each region.
        for &(addr, _) in d {
            // SAFETY: addr is the start of a live bench region.
            unsafe { *(addr as *mut u64) += 1 };
        }
        Ok(())
    }
}

fn regions(inv: &Inventory, total: usize, each: usize) -> Vec<Vec<u8>> {
    let bufs: Vec<Vec<u8>> = (0..total / each).map(|i| vec![i as u8; each]).collect();
    for b in &bufs {
        inv.record_alloc(b.as_ptr() as u64, each as u64, AGENT);
    }
    bufs
}

fn best_of<F: FnMut()>(n: usize, mut f: F) -> f64 {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let policy = SnapshotPolicy::default();
    let mut md = String::from("# kreplay replay engine\n\n");
    // Throughput: 256 MiB in 16 MiB regions.
    let total = 256 << 20;
    let each = 16 << 20;
    let be = MemBackend::default();
    let inv = Inventory::new();
    inv.set_recording(true);
    let bufs = regions(&inv, total, each);
    let mut plain_dst = vec![0u8; total];
    let memcpy_s = best_of(5, || {
        for (i, b) in bufs.iter().enumerate() {
            plain_dst[i * each..(i + 1) * each].copy_from_slice(b);
        }
        black_box(&plain_dst);
    });
    let mut snap_s = f64::INFINITY;
    let mut restore_s = f64::INFINITY;
    let mut held = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let s = snap(&be, &inv, AGENT, &policy);
        snap_s = snap_s.min(t.elapsed().as_secs_f64());
        assert!(s.ok());
        held = be.live.get();
        let t = Instant::now();
        let st = restore(&be, &inv, &s);
        restore_s = restore_s.min(t.elapsed().as_secs_f64());
        assert_eq!(st.bytes, total as u64);
    }
    let gbps = |s: f64| total as f64 / s / 1e9;
    md += "| operation (256 MiB, 16 regions) | time (ms) | GB/s | vs memcpy |\n|---|---:|---:|---:|\n";
    md += &format!(
        "| plain memcpy | {:.1} | {:.2} | 100% |\n",
        memcpy_s * 1e3,
        gbps(memcpy_s)
    );
    md += &format!(
        "| snapshot | {:.1} | {:.2} | {:.0}% |\n",
        snap_s * 1e3,
        gbps(snap_s),
        memcpy_s / snap_s * 100.0
    );
    md += &format!(
        "| restore | {:.1} | {:.2} | {:.0}% |\n\n",
        restore_s * 1e3,
        gbps(restore_s),
        memcpy_s / restore_s * 100.0
    );
    md += &format!(
        "Host memory held by a snapshot: {} bytes for a {} byte footprint ({:.3}x).\n\n",
        held,
        total,
        held as f64 / total as f64
    );
    drop(bufs);

    // Fixed cost: a replay of 2 passes over one 4 KiB region, minus its copies (measured alone).
    let be = MemBackend::default();
    let inv = Inventory::new();
    inv.set_recording(true);
    let bufs = regions(&inv, 4096, 4096);
    let d: Vec<(u64, usize)> = bufs.iter().map(|b| (b.as_ptr() as u64, b.len())).collect();
    let n = 2000;
    let mut sink = Vec::with_capacity(16);
    for (label, check) in [
        ("determinism check on", true),
        ("determinism check off", false),
    ] {
        let t = Instant::now();
        for i in 0..n {
            let req = Request {
                agent: AGENT,
                dispatch: &d,
                passes: 2,
                check_determinism: check,
                correlation: i,
                policy,
            };
            black_box(replay(&be, &inv, &req, &mut |r| sink.push(r)));
            sink.clear();
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        let copies = best_of(50, || {
            let s = snap(&be, &inv, AGENT, &policy);
            black_box(restore(&be, &inv, &s));
        });
        md += &format!(
            "Fixed cost per replayed dispatch (2 passes, {label}): {:.2} us total, {:.2} us beyond one snapshot+restore of the 4 KiB region (target < 1000 us).\n\n",
            per * 1e6,
            (per - copies).max(0.0) * 1e6
        );
    }
    print!("{md}");
    if let Some(p) = std::env::var_os("KREPLAY_BENCH_OUT") {
        let _ = std::fs::write(p, &md);
    }
    let _ = BTreeMap::<u8, u8>::new();
}
