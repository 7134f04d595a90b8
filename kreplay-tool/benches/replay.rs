//! Replay engine benchmark: fixed cost per replayed dispatch beyond the copies, snapshot and
//! restore throughput against a plain memcpy of the same bytes, and host memory held, on a
//! backend whose "device" is host memory (so the copies are memcpy and the ratios measure the
//! engine's own overhead). Markdown on stdout, and to `$KREPLAY_BENCH_OUT` if set. Current
//! results: `docs/bench/restore.md`, `replay` section.
//!
//! Snapshots are measured twice: into fresh buffers (the first replay of a footprint) and into
//! the buffers the arena kept from the previous replay (every later replay of the same
//! footprint).

mod membackend;

use std::hint::black_box;
use std::time::Instant;

use kreplay_tool::engine::arena::SnapshotArena;
use kreplay_tool::engine::capture::{snap, snap_in};
use kreplay_tool::engine::config::SnapshotPolicy;
use kreplay_tool::engine::inventory::Inventory;
use kreplay_tool::engine::replay::{Request, replay};
use kreplay_tool::engine::restore::restore;
use membackend::{AGENT, MemBackend, best_of, regions};

fn row(md: &mut String, what: &str, s: f64, memcpy_s: f64, total: usize) {
    md.push_str(&format!(
        "| {what} | {:.1} | {:.2} | {:.0}% |\n",
        s * 1e3,
        total as f64 / s / 1e9,
        memcpy_s / s * 100.0
    ));
}

fn main() {
    let mut md = String::from("# kreplay replay engine\n\n");
    // Throughput: 256 MiB in 16 MiB regions; every-byte restores (the copy itself).
    let full = SnapshotPolicy {
        dirty_only: false,
        ..SnapshotPolicy::default()
    };
    let hashed = SnapshotPolicy::default();
    let total = 256 << 20;
    let each = 16 << 20;
    let be = MemBackend::default();
    let inv = Inventory::new();
    inv.set_recording(true);
    let bufs = regions(&inv, total, each);
    let mut plain_dst = vec![0u8; total];
    let arena = SnapshotArena::new();
    let (mut memcpy_s, mut cold_s, mut warm_s, mut warm_hash_s, mut restore_s) = (
        f64::INFINITY,
        f64::INFINITY,
        f64::INFINITY,
        f64::INFINITY,
        f64::INFINITY,
    );
    let mut held = 0;
    // Interleaved rounds: each variant sees the same machine state.
    for _ in 0..5 {
        memcpy_s = memcpy_s.min(best_of(1, || {
            for (i, b) in bufs.iter().enumerate() {
                plain_dst[i * each..(i + 1) * each].copy_from_slice(b);
            }
            black_box(&plain_dst);
        }));
        let t = Instant::now();
        let s = snap(&be, &inv, AGENT, &full);
        cold_s = cold_s.min(t.elapsed().as_secs_f64());
        assert!(s.ok());
        held = be.live.get();
        drop(s);
        // Prime the arena once, then time a snapshot into its buffers.
        drop(snap_in(&be, &inv, AGENT, &full, Some(&arena)));
        let t = Instant::now();
        let s = snap_in(&be, &inv, AGENT, &full, Some(&arena));
        warm_s = warm_s.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let st = restore(&be, &inv, &s);
        restore_s = restore_s.min(t.elapsed().as_secs_f64());
        assert_eq!(st.bytes, total as u64);
        drop(s);
        drop(snap_in(&be, &inv, AGENT, &hashed, Some(&arena)));
        let t = Instant::now();
        let s = snap_in(&be, &inv, AGENT, &hashed, Some(&arena));
        warm_hash_s = warm_hash_s.min(t.elapsed().as_secs_f64());
        drop(s);
        arena.clear(&be);
    }
    md += "| operation (256 MiB, 16 regions; best of 5 interleaved rounds) | time (ms) | GB/s | vs memcpy |\n|---|---:|---:|---:|\n";
    row(
        &mut md,
        "plain memcpy (destination already touched)",
        memcpy_s,
        memcpy_s,
        total,
    );
    row(
        &mut md,
        "snapshot into fresh buffers",
        cold_s,
        memcpy_s,
        total,
    );
    row(
        &mut md,
        "snapshot into arena-kept buffers",
        warm_s,
        memcpy_s,
        total,
    );
    let label = format!(
        "snapshot into arena-kept buffers + XXH3-128 per {} KiB chunk",
        hashed.chunk >> 10
    );
    row(&mut md, &label, warm_hash_s, memcpy_s, total);
    row(&mut md, "restore, every byte", restore_s, memcpy_s, total);
    md += "\n";
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
    let arena = SnapshotArena::new();
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
                policy: hashed,
                arena: Some(&arena),
                restore_after: false,
            };
            black_box(replay(&be, &inv, &req, &mut |r| sink.push(r)));
            sink.clear();
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        let copies = best_of(50, || {
            let s = snap_in(&be, &inv, AGENT, &hashed, Some(&arena));
            black_box(restore(&be, &inv, &s));
        });
        md += &format!(
            "Fixed cost per replayed dispatch (2 passes, {label}): {:.2} us total, {:.2} us beyond one snapshot+restore of the 4 KiB region (target < 1000 us).\n\n",
            per * 1e6,
            (per - copies).max(0.0) * 1e6
        );
    }
    print!("{md}");
    if let Some(p) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        let _ = std::fs::write(p, &md);
    }
}
