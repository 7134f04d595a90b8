//! The generated input: probe-like streams of `ApiCall` records, one thread each.
//!
//! The calls are what a traced HIP thread makes: launches (held back for their flows),
//! copies, syncs, and allocations with an HSA allocation nested inside, freed again later
//! with an HSA free nested inside (inner calls written first: the probes write return order).

use std::path::{Path, PathBuf};

use kreplay_common::api::id_of;
use kreplay_common::stream::{
    ApiCall, ProcessName, Record, StreamHeader, StreamKind, StreamWriter, ThreadName,
};

/// The API ids the generated threads call, in a cycle of 9 records.
pub struct Apis {
    malloc: u16,
    pool_alloc: u16,
    launch: u16,
    copy: u16,
    sync: u16,
    free: u16,
    pool_free: u16,
    memset: u16,
}

/// The format version of the streams both binaries merge: 3, the newest the base build reads
/// (version 4 packs `ApiCall`s, as this tree's `kreplay trace` writes them).
pub const BASE_VERSION: u16 = 3;

/// Writes stream `t` of `n` records in format `version`: thread `1000 + t` of process 4242.
pub fn write_stream(path: &Path, t: u32, n: u64, apis: &Apis, version: u16) {
    let pid = 4242;
    let tid = 1000 + t;
    let header = StreamHeader {
        version,
        ..StreamHeader::new(StreamKind::Probes, pid)
    };
    let mut w = StreamWriter::create(path, &header)
        .expect("create stream")
        .with_chunk_threshold(64 * 1024);
    w.push(&Record::ProcessName(ProcessName {
        pid,
        name: "bench".into(),
    }))
    .expect("push");
    w.push(&Record::ThreadName(ThreadName {
        tid,
        name: format!("worker-{t}"),
    }))
    .expect("push");
    let call = |api: u16, enter_ns: u64, exit_ns: u64, size: u64, ptr: u64, out: u64| {
        Record::ApiCall(ApiCall {
            pid,
            tid,
            api,
            enter_ns,
            exit_ns,
            ret: 0,
            args: [ptr, size, 0, 0, 0, 0],
            extra: [0; 5],
            out,
        })
    };
    let mut i = 0u64;
    while i < n {
        // Cycle k covers [base, base + 8 µs); threads are offset by 7 ns each.
        let base = 1_000_000 + (i / 9) * 8_000 + u64::from(t) * 7;
        let buf = 0x7f00_0000_0000 + (i / 9) * 4096;
        let cycle = [
            // pool_allocate returns inside hipMalloc: written first (return order).
            call(apis.pool_alloc, base + 100, base + 300, 4096, 0, buf),
            call(apis.malloc, base, base + 400, 4096, buf, buf),
            call(apis.launch, base + 1_000, base + 1_600, 0, 0, 0),
            call(apis.copy, base + 2_000, base + 2_500, 4096, buf, 0),
            call(apis.sync, base + 3_000, base + 4_000, 0, 0, 0),
            call(apis.memset, base + 4_500, base + 4_800, 4096, buf, 0),
            call(apis.launch, base + 5_000, base + 5_500, 0, 0, 0),
            // pool_free returns inside hipFree: every allocation is freed at both layers, so
            // the live-allocation maps stay small and the memory measured is the merge's.
            call(apis.pool_free, base + 6_100, base + 6_300, 0, buf, 0),
            call(apis.free, base + 6_000, base + 6_400, 0, buf, 0),
        ];
        for rec in cycle.iter().take((n - i).min(9) as usize) {
            w.push(rec).expect("push");
        }
        i += 9;
    }
    w.flush().expect("flush");
}

impl Apis {
    /// The ids from the API table.
    pub fn new() -> Self {
        Apis {
            malloc: id_of("hipMalloc").expect("hipMalloc"),
            pool_alloc: id_of("hsa_amd_memory_pool_allocate").expect("pool allocate"),
            launch: id_of("hipLaunchKernel").expect("hipLaunchKernel"),
            copy: id_of("hipMemcpyAsync").expect("hipMemcpyAsync"),
            sync: id_of("hipStreamSynchronize").expect("hipStreamSynchronize"),
            free: id_of("hipFree").expect("hipFree"),
            pool_free: id_of("hsa_amd_memory_pool_free").expect("pool free"),
            memset: id_of("hipMemset").expect("hipMemset"),
        }
    }
}

/// Writes `streams` streams of `n` records each, in format `version`, into `dir`; returns
/// their paths.
pub fn streams(dir: &Path, streams: u64, n: u64, version: u16) -> Vec<PathBuf> {
    let apis = Apis::new();
    (0..streams as u32)
        .map(|t| {
            let p = dir.join(format!("probes-4242-{}.krs", 1000 + t));
            write_stream(&p, t, n, &apis, version);
            p
        })
        .collect()
}
