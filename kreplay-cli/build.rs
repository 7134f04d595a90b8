//! Builds the BPF programs of `kreplay-ebpf` with aya-build and leaves the object in OUT_DIR,
//! where `src/probes/loader.rs` embeds it.
//!
//! The BPF crate needs `-Z build-std=core`, which stable cargo allows only with
//! RUSTC_BOOTSTRAP=1; it is set here, for the nested BPF build alone, never for the host
//! crates. With AYA_BUILD_SKIP=1 an empty object is left instead, so the host crates can be
//! checked without bpf-linker; the loader then reports that the probes were not built.
use std::{env, fs, path::PathBuf};

use anyhow::{Context as _, anyhow};
use aya_build::Toolchain;

fn main() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let object = out_dir.join("kreplay-probes");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    if skip {
        fs::write(&object, b"").context("writing the empty BPF placeholder")?;
        return Ok(());
    }
    let cargo_metadata::Metadata { packages, .. } = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = packages
        .into_iter()
        .find(|p| p.name.as_str() == "kreplay-ebpf")
        .ok_or_else(|| anyhow!("kreplay-ebpf package not found in the workspace"))?;
    let root = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", ebpf.manifest_path))?;
    // SAFETY: build scripts are single-threaded here; the variable is read by aya-build below
    // and inherited by the nested cargo that builds only the BPF crate.
    unsafe { env::set_var("RUSTC_BOOTSTRAP", "1") };
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "kreplay-ebpf",
            root_dir: root.as_str(),
            ..Default::default()
        }],
        Toolchain::Custom("stable"),
    )
}
