//! Layout test: kreplay-tool's HSA FFI (`kreplay-tool/src/hsa/ffi.rs`) against the official
//! ROCm headers in /usr/include/hsa and, for entries newer than those headers, against the
//! simulated runtime's C table definition. A C++ program prints offsetof/sizeof; every value
//! must equal the Rust `offset_of!`/`size_of` exactly.

#[path = "hsa_layout/expect.rs"]
mod expect;
#[path = "../../kreplay-tool/src/hsa/ffi.rs"]
#[expect(dead_code, reason = "the test reads the layouts, not every item")]
mod ffi;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests crate has a parent")
        .to_path_buf()
}

/// The C layout, computed once per test process (tests run in parallel).
fn c_layout() -> &'static BTreeMap<String, usize> {
    static LAYOUT: OnceLock<BTreeMap<String, usize>> = OnceLock::new();
    LAYOUT.get_or_init(compute_c_layout)
}

/// Compiles and runs tests/rocm-sim/tests/layout.c; returns "<src> <struct> <field>" -> value.
fn compute_c_layout() -> BTreeMap<String, usize> {
    let root = repo_root();
    let sim = root.join("tests/rocm-sim");
    let exe = std::env::temp_dir().join(format!("krsim-layout-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-x", "c++", "-DAMD_INTERNAL_BUILD", "-I/usr/include/hsa"])
        .arg(format!("-I{}", sim.join("include").display()))
        .arg(format!("-I{}", sim.join("hsa").display()))
        .arg(sim.join("tests/layout.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run cc (is a C++ compiler installed?)");
    assert!(
        status.success(),
        "compiling layout.c against /usr/include/hsa failed"
    );
    let out = Command::new(&exe).output().expect("run layout program");
    let _ = std::fs::remove_file(&exe);
    assert!(out.status.success(), "layout program failed");
    let text = String::from_utf8(out.stdout).expect("layout output is UTF-8");
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let (key, value) = line.rsplit_once(' ').expect("line is '<key> <value>'");
        let value: usize = value.parse().expect("value is a number");
        assert!(
            map.insert(key.to_string(), value).is_none(),
            "duplicate key {key}"
        );
    }
    map
}

fn compare(c: &BTreeMap<String, usize>, rust: &[(String, usize)]) -> Vec<String> {
    let mut errors = Vec::new();
    for (key, rust_value) in rust {
        match c.get(key) {
            None => errors.push(format!("{key}: not printed by layout.c")),
            Some(cv) if cv != rust_value => {
                errors.push(format!("{key}: C says {cv}, Rust says {rust_value}"))
            }
            Some(_) => {}
        }
    }
    errors
}

#[test]
fn rust_ffi_matches_official_headers_and_sim_tables() {
    let c = c_layout();
    let rust = expect::expectations();
    let errors = compare(c, &rust);
    assert!(
        errors.is_empty(),
        "layout mismatches:\n{}",
        errors.join("\n")
    );
    // Every line layout.c prints is checked, except the 5.2 root table's size (ROCm 6 grew it).
    let checked: std::collections::BTreeSet<&str> = rust.iter().map(|(k, _)| k.as_str()).collect();
    let unchecked: Vec<&String> = c
        .keys()
        .filter(|k| !checked.contains(k.as_str()) && k.as_str() != "official HsaApiTable sizeof")
        .collect();
    assert!(
        unchecked.is_empty(),
        "layout.c prints fields the Rust side does not check: {unchecked:?}"
    );
    // Spot values that pin the ABI independently of both sides.
    assert_eq!(
        c["official hsa_kernel_dispatch_packet_t completion_signal"],
        56
    );
    assert_eq!(c["official hsa_amd_pointer_info_t global_flags"], 48);
    assert_eq!(
        c["sim krsim_amd_ext_table hsa_amd_vmem_address_reserve_fn"],
        456
    ); // 16 + 55 * 8
}

#[test]
fn current_amd_table_keeps_the_5_2_positions_up_to_async_copy() {
    let c = c_layout();
    let errors = compare(c, &expect::shared_amd_prefix());
    assert!(
        errors.is_empty(),
        "AmdExtTable prefix moved:\n{}",
        errors.join("\n")
    );
    // ...and diverges right after it (ROCm 6 inserted async_copy_on_engine there).
    assert_eq!(
        c["official AmdExtTable hsa_amd_agent_memory_pool_get_info_fn"],
        144
    );
    assert_eq!(
        core::mem::offset_of!(ffi::AmdExtTable, hsa_amd_agent_memory_pool_get_info_fn),
        160
    );
}
