//! Behaviour tests of the simulated HSA runtime (tests/rocm-sim): each C test program under
//! tests/rocm-sim/tests/hsa_*.c asserts exact values itself; here each must exit 0 and end with
//! "<name>: PASS". The sim is (re)built with `make -C tests/rocm-sim hsa hsa-tests` first.

use std::process::Command;
use std::time::Duration;

use kreplay_tests::{make_sim, run_sim_test};

/// Builds the HSA half of the sim and its tests (once per test process) and returns build/.
fn build() -> std::path::PathBuf {
    make_sim(&["hsa", "hsa-tests"])
}

/// Runs build/tests/<name> (killed after 60 s); it must exit 0 and end with `<name>: PASS`.
fn run(name: &str, envs: &[(&str, String)]) {
    let exe = build().join("tests").join(name);
    run_sim_test(
        &exe,
        &[],
        envs,
        Duration::from_secs(60),
        &format!("{name}: PASS"),
    );
}

#[test]
fn pools_agents_regions() {
    run("hsa_pools", &[]);
}

#[test]
fn pointer_info() {
    run("hsa_pointer_info", &[]);
}

#[test]
fn queue_ordering_barriers_profiling() {
    run("hsa_queue", &[]);
}

#[test]
fn signals_waits_handlers() {
    run("hsa_signals", &[]);
}

#[test]
fn async_copy_with_dependencies() {
    run("hsa_async_copy", &[]);
}

#[test]
fn executables_and_symbols() {
    run("hsa_executables", &[]);
}

#[test]
fn tools_lib_loading_and_table_dispatch() {
    run("hsa_tools", &[]);
}

#[test]
fn fault_knobs() {
    run("hsa_faults", &[]);
}

/// Dynamic symbols of `lib` exported with version `ROCR_1`.
fn rocr_exports(lib: &std::path::Path) -> std::collections::BTreeSet<String> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(lib)
        .output()
        .expect("run objdump");
    assert!(out.status.success(), "objdump -T {} failed", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" ROCR_1 ") && !l.contains("*UND*"))
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

#[test]
fn exports_every_symbol_of_the_real_library() {
    let real = rocr_exports(std::path::Path::new(
        "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1",
    ));
    let sim = rocr_exports(&build().join("libhsa-runtime64.so.1"));
    assert_eq!(
        real.len(),
        226,
        "Debian's ROCm 5.2 library exports 226 ROCR_1 symbols"
    );
    let missing: Vec<&String> = real.difference(&sim).collect();
    assert!(missing.is_empty(), "sim lacks real exports: {missing:?}");
    for name in [
        "hsa_amd_queue_intercept_create",
        "hsa_amd_queue_intercept_register",
    ] {
        assert!(
            !sim.contains(name),
            "{name} must be reachable only through AmdExtTable"
        );
    }
    assert!(
        sim.contains("hsa_amd_vmem_map"),
        "vmem API exported as in current ROCR"
    );
}

#[test]
fn binary_compatible_with_real_rocm_library() {
    // Linked against Debian's real libhsa-runtime64.so.1; the sim must satisfy its versioned
    // symbol references (ROCR_1).
    let build = build();
    let exe = build.join("tests/hsa_binary_compat");
    let dynsym = Command::new("objdump")
        .arg("-T")
        .arg(&exe)
        .output()
        .expect("run objdump");
    let dynsym = String::from_utf8_lossy(&dynsym.stdout);
    assert!(
        dynsym
            .lines()
            .any(|l| l.contains("(ROCR_1)") && l.ends_with(" hsa_init")),
        "hsa_binary_compat does not reference hsa_init@ROCR_1:\n{dynsym}"
    );
    run(
        "hsa_binary_compat",
        &[("LD_LIBRARY_PATH", build.display().to_string())],
    );
}
