//! Restore-only-what-changed benchmark on the host-memory backend: restore time
//! against the dirty fraction and the footprint, side by side with a restore of every byte
//! and a plain memcpy of the same bytes, all in one run; then the chunk size at a fixed set
//! of scattered one-byte writes. Markdown on stdout, and to `$KREPLAY_BENCH_OUT` if set.
//! Current results: `docs/bench/restore.md` (`cargo xtask bench --only replay --only restore
//! --name restore` rewrites it).
//!
//! On this backend the dirty check must read every byte (device-to-host into the scratch)
//! and hash it, so a restore costs at least one read of the footprint: the 1/10-of-a-full-
//! restore target at 1% dirty is for backends that hash or compare on the device.

mod membackend;

use std::hint::black_box;

use kreplay_tool::engine::capture::snap;
use kreplay_tool::engine::config::SnapshotPolicy;
use kreplay_tool::engine::inventory::Inventory;
use kreplay_tool::engine::restore::restore;
use membackend::{AGENT, MemBackend, best_of, regions};

const REGION: usize = 16 << 20;
const ROUNDS: usize = 3;

/// Flips one byte in each of `k` chunks (of `chunk` bytes) spread evenly over the buffers.
fn dirty(bufs: &mut [Vec<u8>], chunk: usize, k: usize) {
    let per = REGION / chunk;
    let n = bufs.len() * per;
    for j in 0..k {
        let c = j * n / k;
        bufs[c / per][(c % per) * chunk + 7] ^= 0xFF;
    }
}

fn ms(s: f64) -> String {
    format!("{:.2}", s * 1e3)
}

fn main() {
    let mut md = String::from("# Restore only what changed\n\n");
    // Checking every restore (the adaptive switch would turn it off where it does not pay).
    let hashed = SnapshotPolicy {
        adaptive: false,
        ..SnapshotPolicy::default()
    };
    let auto = SnapshotPolicy::default();
    let chunk = hashed.chunk;
    let full = SnapshotPolicy {
        dirty_only: false,
        ..hashed
    };
    md += &format!(
        "Host-memory backend (copies are memcpy), pinned/host-hash placement, {} KiB chunks, {} MiB regions, best of {ROUNDS}. \
         *dirty*: the engine's restore (D2H read of every byte into a 1 MiB scratch, XXH3-128 per chunk, copy back the changed chunks); \
         *check*: the part of it spent finding changed chunks; *auto*: the default adaptive policy, a later restore of a snapshot \
         after a first one measured whether checking pays (where it did not, it writes every byte); *full*: restore of every byte; *memcpy dirty*/*memcpy all*: a plain copy of \
         the restored bytes / of the footprint, between buffers already touched.\n\n",
        chunk >> 10,
        REGION >> 20
    );
    md += "| footprint | dirty | bytes restored | dirty (ms) | check (ms) | auto (ms) | full (ms) | memcpy dirty (ms) | memcpy all (ms) | dirty / full | auto / full | dirty / memcpy all |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for total in [64usize << 20, 256 << 20, 1 << 30] {
        let be = MemBackend::default();
        let inv = Inventory::new();
        inv.set_recording(true);
        let mut bufs = regions(&inv, total, REGION);
        let chunks = total / chunk;
        let mut src = vec![1u8; total];
        let mut dst = vec![2u8; total];
        let full_snap = snap(&be, &inv, AGENT, &full);
        let dirty_snap = snap(&be, &inv, AGENT, &hashed);
        assert!(full_snap.ok() && dirty_snap.ok());
        for (label, frac) in [
            ("0%", 0.0),
            ("0.1%", 0.001),
            ("1%", 0.01),
            ("10%", 0.1),
            ("100%", 1.0),
        ] {
            let k = ((chunks as f64 * frac).round() as usize).min(chunks);
            let (mut t_dirty, mut t_check, mut t_full, mut t_mdirty, mut t_mall, mut t_auto) = (
                f64::INFINITY,
                f64::INFINITY,
                f64::INFINITY,
                f64::INFINITY,
                f64::INFINITY,
                f64::INFINITY,
            );
            // The adaptive policy: a first restore measures, a later one is timed.
            let auto_snap = snap(&be, &inv, AGENT, &auto);
            dirty(&mut bufs, chunk, k);
            black_box(restore(&be, &inv, &auto_snap));
            let mut restored = 0;
            for _ in 0..ROUNDS {
                dirty(&mut bufs, chunk, k);
                let mut st = None;
                t_dirty = t_dirty.min(best_of(1, || st = Some(restore(&be, &inv, &dirty_snap))));
                let st = st.unwrap_or_default();
                assert_eq!(st.dirty_chunks, k as u64, "{label} of {total}");
                restored = st.bytes;
                t_check = t_check.min(st.check_ns as f64 / 1e9);
                dirty(&mut bufs, chunk, k);
                t_auto = t_auto.min(best_of(1, || {
                    black_box(restore(&be, &inv, &auto_snap));
                }));
                t_full = t_full.min(best_of(1, || {
                    black_box(restore(&be, &inv, &full_snap));
                }));
                let n = restored as usize;
                t_mdirty = t_mdirty.min(best_of(1, || {
                    dst[..n].copy_from_slice(&src[..n]);
                    black_box(&dst);
                }));
                t_mall = t_mall.min(best_of(1, || {
                    dst.copy_from_slice(&src);
                    black_box(&dst);
                }));
                src[0] ^= 1;
            }
            md += &format!(
                "| {} MiB | {label} | {restored} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.2} |\n",
                total >> 20,
                ms(t_dirty),
                ms(t_check),
                ms(t_auto),
                ms(t_full),
                ms(t_mdirty),
                ms(t_mall),
                t_dirty / t_full,
                t_auto / t_full,
                t_dirty / t_mall
            );
        }
    }

    // Chunk size: 256 MiB, one byte written in 1% of its 4 KiB pages (spread evenly).
    md += "\n## Chunk size\n\n256 MiB footprint; one byte written in 1% of its 4 KiB pages, spread evenly (the same 655 writes for every chunk size). \
           *snapshot*: taking the hashed snapshot (copy + hash); *restore*: the dirty restore.\n\n\
           | chunk | snapshot (ms) | restore (ms) | check (ms) | chunks restored | bytes restored |\n|---:|---:|---:|---:|---:|---:|\n";
    let total = 256 << 20;
    let be = MemBackend::default();
    let inv = Inventory::new();
    inv.set_recording(true);
    let mut bufs = regions(&inv, total, REGION);
    let pages = total / 4096;
    let writes = pages / 100;
    for c in [4usize << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20] {
        let p = SnapshotPolicy { chunk: c, ..hashed };
        let mut t_snap = f64::INFINITY;
        let (mut t_rest, mut t_check, mut st_last) = (f64::INFINITY, f64::INFINITY, None);
        for _ in 0..ROUNDS {
            let mut s = None;
            t_snap = t_snap.min(best_of(1, || s = Some(snap(&be, &inv, AGENT, &p))));
            let s = s.unwrap_or_else(|| snap(&be, &inv, AGENT, &p));
            dirty(&mut bufs, 4096, writes);
            let mut st = None;
            t_rest = t_rest.min(best_of(1, || st = Some(restore(&be, &inv, &s))));
            let st = st.unwrap_or_default();
            t_check = t_check.min(st.check_ns as f64 / 1e9);
            st_last = Some(st);
        }
        let st = st_last.unwrap_or_default();
        md += &format!(
            "| {} KiB | {} | {} | {} | {} | {} |\n",
            c >> 10,
            ms(t_snap),
            ms(t_rest),
            ms(t_check),
            st.dirty_chunks,
            st.bytes
        );
    }
    print!("{md}");
    if let Some(p) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        let _ = std::fs::write(p, &md);
    }
}
