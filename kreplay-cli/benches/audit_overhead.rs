//! Audit overhead benchmark: the per-call cost of `kreplay audit`'s programs against the bare
//! probe cost (empty uprobe + uretprobe on the same function) and against trace mode (one
//! ring-buffer record per call), side by side in one run, on the smoke library
//! (`tests/smoke/krsmoke.c`, built by `kreplay_tests::build_smoke()`); then the kernel memory
//! of the audit maps holding 1000 processes.
//!
//! The bench process dlopens the smoke library and calls `krsmoke_add` in a tight loop with
//! the probes of one mode attached to itself. Modes run interleaved, `KREPLAY_BENCH_REPEAT`
//! rounds (default 5) of `KREPLAY_BENCH_CALLS` calls (default 200000); the table shows the
//! median per mode. Overhead = mode − no probes. Kernel BPF statistics are off for the
//! comparison (they add two clock reads per program run); one more audit pass with them on
//! shows that cost and the kernel's own measure of the programs' run time.
//!
//! Memory: the audit maps get 1000 processes × 12 (pid, API) pairs written from userspace, and
//! each map's `memlock` (the kernel's accounting of the map's memory, /proc/self/fdinfo) is
//! read, next to the formula from the map definitions.
//!
//! Needs root. `cargo bench -p kreplay-cli --bench audit_overhead`; `KREPLAY_BENCH_OUT=FILE`
//! also writes the markdown there.
use std::{
    ffi::CString,
    path::Path,
    time::{Duration, Instant},
};

use aya::maps::{PerCpuHashMap, PerCpuValues};
use kreplay_cli::{
    audit::maps::{AUDIT_PROGRAMS, enable_run_time_stats, program_runs},
    probes::{
        elf::SymbolTable,
        loader::{Probes, Programs, Scope},
    },
};
use kreplay_common::{
    api::{APIS, USER_FUNCTION},
    audit::{AUDIT_STATS_MAP, AuditKey, AuditStats},
    probe::{ALLOCS_MAP, Cookie, EVENTS_MAP, THREADS_MAP},
};

type AddFn = extern "C" fn(i64, i64) -> i64;

/// Processes and (pid, API) pairs per process of the memory measurement.
const PROCESSES: u32 = 1000;
const APIS_PER_PROCESS: u32 = 12;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    NoProbes,
    Bare,
    Audit,
    Trace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::NoProbes => "no probes",
            Mode::Bare => "bare uprobe+uretprobe",
            Mode::Audit => "audit",
            Mode::Trace => "trace (ring buffer record)",
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn load_add(lib: &Path) -> AddFn {
    let path = CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: dlopen/dlsym with NUL-terminated strings; the library stays loaded for the
    // process's life (never dlclosed), so the function pointer stays valid.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen {}", lib.display());
        let sym = libc::dlsym(h, c"krsmoke_add".as_ptr());
        assert!(!sym.is_null(), "dlsym krsmoke_add");
        std::mem::transmute::<*mut libc::c_void, AddFn>(sym)
    }
}

fn probes_for(mode: Mode, lib: &Path, offset: u64) -> Option<Probes> {
    let programs = match mode {
        Mode::NoProbes => return None,
        Mode::Bare => Programs::Bare,
        Mode::Audit => Programs::Audit,
        Mode::Trace => Programs::Record,
    };
    // Trace mode gets rings that each hold every record of a round (200k calls of 144 bytes
    // fit in 32 MiB), so nothing drops and nothing needs draining while the loop runs,
    // whichever CPUs the loop runs on.
    let mut probes = Probes::load_sized(&[(EVENTS_MAP, 1 << 25)]).expect("load BPF (root?)");
    let spec = &APIS[USER_FUNCTION as usize];
    probes
        .attach_programs(
            lib,
            offset,
            Cookie::for_spec(USER_FUNCTION, spec),
            Scope::Pid(std::process::id()),
            programs,
        )
        .expect("attach");
    Some(probes)
}

/// ns per call of `calls` calls of `add`.
fn time_calls(add: AddFn, calls: u64) -> f64 {
    let mut sum = 0i64;
    for i in 0..1000 {
        sum = sum.wrapping_add(add(i, 1));
    }
    let t0 = Instant::now();
    for i in 0..calls as i64 {
        sum = sum.wrapping_add(add(std::hint::black_box(i), 2));
    }
    let dt = t0.elapsed();
    std::hint::black_box(sum);
    dt.as_nanos() as f64 / calls as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// (map_type, key_size, value_size, max_entries, memlock) of every BPF map fd of this process.
fn map_fdinfo() -> Vec<(u32, u32, u32, u32, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if target.to_string_lossy() != "anon_inode:bpf-map" {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            e.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let field = |k: &str| -> u64 {
            info.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        out.push((
            field("map_type:") as u32,
            field("key_size:") as u32,
            field("value_size:") as u32,
            field("max_entries:") as u32,
            field("memlock:"),
        ));
    }
    out
}

fn map_name(t: u32, k: u32, v: u32) -> &'static str {
    match (t, k, v) {
        (5, 8, 272) => "AUDIT_STATS (per-CPU hash, no prealloc)",
        (9, 16, 8) => "AUDIT_STARTS (LRU hash)",
        (1, 4, 16) => "AUDIT_COMMS (hash, no prealloc)",
        (6, 4, 8) => "counter arrays (per-CPU)",
        _ => "trace maps (shrunk in audit mode) and others",
    }
}

fn memory_section(out: &mut String) {
    let mut probes =
        Probes::load_sized(&[(EVENTS_MAP, 4096), (THREADS_MAP, 1024), (ALLOCS_MAP, 1024)])
            .expect("load");
    let ncpu = aya::util::nr_cpus().expect("nr_cpus");
    let before = map_fdinfo();
    let mut inserted = 0u32;
    let mut failure = None;
    {
        let map = probes.ebpf_mut().map_mut(AUDIT_STATS_MAP).unwrap();
        let mut stats: PerCpuHashMap<_, AuditKey, AuditStats> =
            PerCpuHashMap::try_from(map).unwrap();
        'fill: for pid in 0..PROCESSES {
            for api in 0..APIS_PER_PROCESS {
                // The kernel refills its element caches asynchronously: a burst of inserts
                // can see ENOMEM for a moment, so retry a little before giving up.
                let mut tries = 0;
                loop {
                    let values = PerCpuValues::try_from(vec![AuditStats::ZERO; ncpu]).unwrap();
                    match stats.insert(AuditKey { pid: pid + 1, api }, values, 0) {
                        Ok(()) => break,
                        Err(_) if tries < 200 => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => {
                            failure = Some(e.to_string());
                            break 'fill;
                        }
                    }
                }
                inserted += 1;
            }
        }
    }
    let after = map_fdinfo();
    if let Some(e) = &failure {
        out.push_str(&format!(
            "\n**Only {inserted} of {} entries could be inserted**: {e}\n",
            PROCESSES * APIS_PER_PROCESS
        ));
    }
    out.push_str(&format!(
        "\n### Kernel memory of the audit maps ({PROCESSES} processes × {APIS_PER_PROCESS} APIs \
         = {} (pid, API) entries, {ncpu} CPUs)\n\n\
         | map | max entries | memlock empty | memlock with {PROCESSES} processes |\n|---|---:|---:|---:|\n",
        PROCESSES * APIS_PER_PROCESS
    ));
    let mut total = (0u64, 0u64);
    for (b, a) in before.iter().zip(after.iter()) {
        total.0 += b.4;
        total.1 += a.4;
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            map_name(a.0, a.1, a.2),
            a.3,
            b.4,
            a.4
        ));
    }
    out.push_str(&format!("| **total** | | {} | {} |\n", total.0, total.1));
    let value = std::mem::size_of::<AuditStats>() as u64;
    out.push_str(&format!(
        "\nFrom the definitions: AUDIT_STATS holds {value} B per CPU per (pid, API) entry plus \
         the hash element (~56 B with its 8 B key), allocated only for entries in use, so \
         {PROCESSES} processes × {APIS_PER_PROCESS} APIs ≈ {} × ({value} × {ncpu} + 56) B = {:.1} MiB \
         here and {:.1} MiB on a 128-CPU host; AUDIT_STARTS (16384 in-flight calls) and the shrunk \
         trace maps are preallocated and do not grow with processes.\n",
        PROCESSES * APIS_PER_PROCESS,
        (PROCESSES * APIS_PER_PROCESS) as f64 * (value * ncpu as u64 + 56) as f64 / 1048576.0,
        (PROCESSES * APIS_PER_PROCESS) as f64 * (value * 128 + 56) as f64 / 1048576.0,
    ));
}

fn main() {
    kreplay_cli::preflight::raise_memlock();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("audit_overhead: needs root to load BPF programs; skipped");
        return;
    }
    let calls = env_u64("KREPLAY_BENCH_CALLS", 200_000);
    let rounds = env_u64("KREPLAY_BENCH_REPEAT", 5).max(1);
    let (lib, _) = kreplay_tests::build_smoke();
    let add = load_add(&lib);
    let offset = SymbolTable::read(&lib)
        .expect("read smoke symbols")
        .offset("krsmoke_add")
        .expect("krsmoke_add offset");
    let modes = [Mode::NoProbes, Mode::Bare, Mode::Audit, Mode::Trace];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, &m) in modes.iter().enumerate() {
            let probes = probes_for(m, &lib, offset);
            samples[i].push(time_calls(add, calls));
            drop(probes);
        }
    }
    let med: Vec<f64> = samples.iter_mut().map(|v| median(v)).collect();
    let base = med[0];
    let over = |i: usize| med[i] - base;

    // One more audit pass with the kernel's BPF statistics on.
    let stats_fd = enable_run_time_stats();
    let probes = probes_for(Mode::Audit, &lib, offset).unwrap();
    let r0 = program_runs(probes.ebpf(), AUDIT_PROGRAMS).unwrap();
    let with_stats = time_calls(add, calls);
    let r1 = program_runs(probes.ebpf(), AUDIT_PROGRAMS).unwrap();
    drop(probes);
    drop(stats_fd);
    let runs = r1[1].run_count - r0[1].run_count;
    let bpf_ns = (r1[0].run_time_ns - r0[0].run_time_ns + r1[1].run_time_ns - r0[1].run_time_ns)
        as f64
        / runs.max(1) as f64;

    let mut out = format!(
        "## Audit overhead (krsmoke_add, {calls} calls × {rounds} rounds, median)\n\n\
         | mode | ns/call | overhead ns/call | × bare probe cost |\n|---|---:|---:|---:|\n"
    );
    for (i, m) in modes.iter().enumerate() {
        let ratio = if i == 0 {
            "-".to_string()
        } else {
            format!("{:.3}", over(i) / over(1))
        };
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {ratio} |\n",
            m.name(),
            med[i],
            over(i)
        ));
    }
    out.push_str(&format!(
        "| audit, BPF statistics on | {with_stats:.1} | {:.1} | {:.3} |\n\n\
         audit / bare = **{:.3}** (target ≤ 1.10); trace / bare = {:.3}. \
         Kernel BPF statistics during the last pass: {bpf_ns:.0} ns of program run time per call \
         (entry + return, {runs} calls).\n",
        with_stats - base,
        (with_stats - base) / over(1),
        over(2) / over(1),
        over(3) / over(1),
    ));
    print!("{out}");
    let mut mem = String::new();
    memory_section(&mut mem);
    print!("{mem}");
    out.push_str(&mem);
    if let Some(path) = std::env::var_os(kreplay_common::replay_config::BENCH_OUT) {
        std::fs::write(&path, &out).expect("write KREPLAY_BENCH_OUT");
    }
    std::thread::sleep(Duration::from_millis(1));
}
