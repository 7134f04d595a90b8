//! `cargo build --release --workspace` must yield the CLI as `target/release/kreplay`: no two
//! binaries of the workspace may share a file name, or cargo writes both to the same path and
//! the last one built wins (it was once kreplay-ebpf's empty host program, which printed
//! nothing and exited 0 for every command).

use std::collections::BTreeMap;
use std::process::Command;

use kreplay_tests::workspace_root;

#[test]
fn every_workspace_binary_has_its_own_name_and_kreplay_is_the_cli() {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workspace_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        for t in p["targets"].as_array().expect("targets") {
            let is_bin = t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"));
            if is_bin {
                owners
                    .entry(t["name"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(p["name"].as_str().unwrap().to_owned());
            }
        }
    }
    let shared: Vec<_> = owners.iter().filter(|(_, p)| p.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "binaries built to the same path: {shared:?}"
    );
    assert_eq!(owners["kreplay"], ["kreplay-cli"]);
    assert_eq!(owners["kreplay-probes"], ["kreplay-ebpf"]);
}
