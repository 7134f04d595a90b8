//! Behaviour tests of the simulated HIP runtime (tests/rocm-sim/hip): the C programs under
//! tests/rocm-sim/tests/hip_*.c assert exact values themselves and print `ok <section>` lines
//! and a final `PASS`; here each must exit 0 with the expected sections. Also checks the
//! library files themselves (sonames, per-function symbol versions against Debian's real
//! ROCm 5.2 libamdhip64.so.5) and what HIP asks of HSA, seen by an HSA_TOOLS_LIB tool.
//! The sim is (re)built with `make -C tests/rocm-sim hsa hip` first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kreplay_tests::{cc, make_sim, run_sim_ok, run_sim_program, run_sim_test, scratch, sim_root};

const REAL_HIP5: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// How long one sim program may run before it is killed.
const LIMIT: Duration = Duration::from_secs(120);

/// Builds the sim (HSA, then HIP, workloads and tests) once per test process; returns build/.
fn build() -> PathBuf {
    make_sim(&["hsa", "hip"])
}

/// Runs a program with a clean sim environment plus `envs`, killed after 120 s.
fn run_exe(exe: &Path, args: &[&str], envs: &[(&str, String)]) -> Output {
    run_sim_program(exe, args, envs, LIMIT)
}

/// Runs build/tests/<name>; it must pass and print every `ok <section>`. Returns stdout.
fn run_test(name: &str, args: &[&str], envs: &[(&str, String)], sections: &[&str]) -> String {
    let exe = build().join("tests").join(name);
    let stdout = run_sim_test(&exe, args, envs, LIMIT, "PASS");
    for s in sections {
        let line = format!("ok {s}");
        assert!(
            stdout.lines().any(|l| l == line),
            "{name}: no `{line}`:\n{stdout}"
        );
    }
    stdout
}

fn workers(n: u32) -> Vec<(&'static str, String)> {
    vec![("KRSIM_WORKERS", n.to_string())]
}

#[test]
fn memory_classes_copies_and_memset() {
    for w in [1, 4] {
        run_test("hip_memory", &[], &workers(w), &["classes", "copies"]);
    }
}

#[test]
fn streams_and_launch_variants() {
    for w in [1, 4] {
        run_test(
            "hip_launch",
            &[],
            &workers(w),
            &[
                "dispatch_view",
                "stream_order",
                "streams",
                "null_stream_order",
                "launch_variants",
            ],
        );
    }
}

#[test]
fn registration_modules_and_symbols() {
    let one = run_test("hip_module", &[], &[], &["registered", "module_api"]);
    assert!(one.lines().any(|l| l == "devices: 1"), "{one}");
    assert!(!one.contains("ok per_device"), "{one}");
    let two = run_test(
        "hip_module",
        &[],
        &[("KRSIM_GPUS", "2".into()), ("KRSIM_WORKERS", "2".into())],
        &["registered", "module_api", "per_device"],
    );
    assert!(two.lines().any(|l| l == "devices: 2"), "{two}");
}

#[test]
fn graph_launch_is_one_multi_packet_batch() {
    for w in [1, 4] {
        run_test(
            "hip_graph",
            &[],
            &workers(w),
            &["one_batch", "after_copy", "results"],
        );
    }
}

#[test]
fn error_names_strings_and_last_error() {
    run_test(
        "hip_errors",
        &[],
        &[],
        &["strings", "last_error", "device_api"],
    );
}

#[test]
fn injected_d2h_copy_fault_reaches_hip() {
    let out = run_test(
        "hip_errors",
        &["fault-d2h"],
        &[("KRSIM_FAIL_D2H_NTH", "2".into())],
        &["fault_d2h"],
    );
    assert!(
        out.lines().any(|l| l == "fault error: hipErrorUnknown"),
        "{out}"
    );
    // Without the knob the second copy succeeds, so the same check fails: the knob is the cause.
    let exe = build().join("tests").join("hip_errors");
    let plain = run_exe(&exe, &["fault-d2h"], &[]);
    assert_eq!(plain.status.code(), Some(1));
}

#[test]
fn refused_host_allocations_leave_pageable_copies_working() {
    run_test(
        "hip_errors",
        &["fault-host-alloc"],
        &[("KRSIM_FAIL_HOST_ALLOC_ABOVE", "65536".into())],
        &["fault_host_alloc"],
    );
    // Without the knob the 1 MiB pinned allocation succeeds and the check fails.
    let exe = build().join("tests").join("hip_errors");
    assert_eq!(
        run_exe(&exe, &["fault-host-alloc"], &[]).status.code(),
        Some(1)
    );
}

/// `objdump -T` of a library: exported function name -> version node.
fn exported_versions(lib: &Path) -> BTreeMap<String, String> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(lib)
        .output()
        .expect("run objdump (binutils)");
    assert!(out.status.success(), "objdump -T {}", lib.display());
    let mut map = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // addr flags... DF .text size version name
        if let Some(pos) = f.iter().position(|x| *x == ".text")
            && f.len() == pos + 4
        {
            map.insert(f[pos + 3].to_string(), f[pos + 2].to_string());
        }
    }
    map
}

fn soname(lib: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-d")
        .arg(lib)
        .output()
        .expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("(SONAME)"))
        .unwrap_or_else(|| panic!("no SONAME in {}", lib.display()));
    line.rsplit('[')
        .next()
        .unwrap()
        .trim_end_matches(']')
        .to_string()
}

#[test]
fn sonames_and_real_symbol_versions() {
    let build = build();
    assert_eq!(soname(&build.join("libamdhip64.so.6")), "libamdhip64.so.6");
    assert_eq!(soname(&build.join("libamdhip64.so.5")), "libamdhip64.so.5");
    assert_eq!(
        std::fs::read_link(build.join("libamdhip64.so")).expect("libamdhip64.so symlink"),
        PathBuf::from("libamdhip64.so.6")
    );
    let real = exported_versions(Path::new(REAL_HIP5));
    assert!(
        real.len() > 400,
        "real libamdhip64.so.5 exports {}",
        real.len()
    );
    assert_eq!(real["hipMalloc"], "hip_4.2");
    assert_eq!(real["hipGraphLaunch"], "hip_4.3");
    let ours = exported_versions(&build.join("libamdhip64.so.5"));
    assert!(
        ours.len() >= 75,
        "sim exports only {} functions",
        ours.len()
    );
    for (name, version) in &ours {
        assert_eq!(
            real.get(name),
            Some(version),
            "{name}@{version}: the real library disagrees"
        );
    }
    for needed in [
        "hipMalloc",
        "hipFree",
        "hipMallocAsync",
        "hipFreeAsync",
        "hipHostMalloc",
        "hipLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtLaunchKernel",
        "hipGraphLaunch",
        "hipGraphAddKernelNode",
        "__hipRegisterFatBinary",
        "__hipRegisterFunction",
        "__hipRegisterVar",
        "__hipUnregisterFatBinary",
    ] {
        assert!(ours.contains_key(needed), "{needed} not exported");
    }
    assert_eq!(ours, exported_versions(&build.join("libamdhip64.so.6")));
    // Every function the sources mark HIP_EXPORT is exported (the map is complete).
    let mut declared = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(sim_root().join("hip")).expect("hip sources") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "c") {
            let text = std::fs::read_to_string(&path).expect("read source");
            for line in text.lines().filter(|l| l.starts_with("HIP_EXPORT ")) {
                let head = line.split('(').next().unwrap();
                let name = head.rsplit([' ', '*']).next().unwrap();
                declared.insert(name.to_string());
            }
        }
    }
    assert!(declared.len() >= 75, "{declared:?}");
    let exported: std::collections::BTreeSet<String> = ours.keys().cloned().collect();
    assert_eq!(declared, exported, "run tests/rocm-sim/hip/gen_map.sh");
}

#[test]
fn program_linked_against_real_libamdhip64_runs_on_the_sim() {
    let build = build();
    let exe = build.join("tests").join("hip_compat_real");
    assert!(
        exe.exists(),
        "{} missing: is Debian's libamdhip64-5 installed ({REAL_HIP5})?",
        exe.display()
    );
    // It was linked against the real library and records its version nodes.
    let needs = Command::new("readelf")
        .arg("-V")
        .arg(&exe)
        .output()
        .expect("run readelf");
    let needs = String::from_utf8_lossy(&needs.stdout);
    assert!(needs.contains("File: libamdhip64.so.5"), "{needs}");
    for v in ["hip_4.2", "hip_4.3", "hip_5.1"] {
        assert!(
            needs.contains(&format!("Name: {v}")),
            "{v} not needed:\n{needs}"
        );
    }
    let stdout = run_sim_ok(
        &exe,
        &[],
        &[("LD_LIBRARY_PATH", build.display().to_string())],
        LIMIT,
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec!["kernel calls: 2", "PASS"]
    );
}

/// Runs a workload under the hip_tool HSA tool and returns its counters.
fn tool_counters(workload: &str, args: &[&str]) -> BTreeMap<String, u64> {
    let build = build();
    let out_file = build.join(format!("hip_tool_{workload}.out"));
    let _ = std::fs::remove_file(&out_file);
    let out = run_exe(
        &build.join("workloads").join(workload),
        args,
        &[
            (
                "HSA_TOOLS_LIB",
                build.join("tests/hip_tool.so").display().to_string(),
            ),
            ("HIP_TOOL_OUT", out_file.display().to_string()),
        ],
    );
    assert!(
        out.status.success(),
        "{workload}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&out_file).expect("tool report (OnUnload ran?)");
    text.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.parse().expect("number"))
        })
        .collect()
}

#[test]
fn hip_uses_hsa_as_real_hip_does() {
    // saxpy: 4 buffers x 8 iterations; one stream per buffer plus the null stream.
    let c = tool_counters("saxpy", &["4", "1000", "8"]);
    assert!(c["kernarg_allocs"] >= 1, "{c:?}");
    assert_eq!(
        c["kernarg_exec"], c["kernarg_allocs"],
        "kernarg without EXECUTABLE: {c:?}"
    );
    assert_eq!(c["other_exec"], 0, "{c:?}");
    assert_eq!(c["queues"], 5, "{c:?}");
    assert_eq!(
        c["freezes"], 1,
        "one executable per fat binary and device: {c:?}"
    );
    assert_eq!(c["vmem_reserve"], 0, "{c:?}");
    // malloc_async: every hipMallocAsync is reserve + handle + map, every hipFreeAsync an unmap.
    let c = tool_counters("malloc_async", &["37"]);
    for k in ["vmem_reserve", "vmem_handle", "vmem_map", "vmem_unmap"] {
        assert_eq!(c[k], 37, "{k}: {c:?}");
    }
}

#[test]
fn readme_plain_c_example_builds_and_runs() {
    let build = build();
    let readme = std::fs::read_to_string(sim_root().join("README.md")).expect("README");
    let hip = &readme[readme.find("## HIP").expect("HIP section")..];
    let start = hip.find("```c\n").expect("C example") + 5;
    let code = &hip[start..start + hip[start..].find("```").expect("end of example")];
    let dir = scratch("hip-readme-example");
    let src = dir.join("add_one.c");
    let exe = dir.join("add_one");
    std::fs::write(&src, code).expect("write example");
    cc(&[
        "-Wall",
        "-Werror",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &format!("-I{}", sim_root().join("include").display()),
        "-rdynamic",
        &format!("-L{}", build.display()),
        "-l:libamdhip64.so.6",
        &format!("-Wl,-rpath,{}", build.display()),
    ]);
    let run = run_exe(&exe, &[], &[]);
    assert!(run.status.success(), "{:?}", run.status);
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "host[999] = 1002, launches = 3, no error\n"
    );
}
