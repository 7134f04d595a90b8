//! Integration-test helpers: locating built binaries, building C test programs, privilege checks.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Cargo's target directory for this workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The `kreplay` binary under test: `$KREPLAY_BIN`, else `target/debug/kreplay`.
pub fn kreplay_bin() -> PathBuf {
    let path = std::env::var_os("KREPLAY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("debug").join("kreplay"));
    assert!(
        path.exists(),
        "{} does not exist: build it first (`cargo build -p kreplay-cli`, or run `cargo xtask test`)",
        path.display()
    );
    path
}

/// A scratch directory for one test's build products and outputs.
pub fn scratch(name: &str) -> PathBuf {
    let dir = target_dir().join("kreplay-tests").join(name);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compiles C sources with the system compiler (`$CC` or `cc`); panics with its output on failure.
pub fn cc(args: &[&str]) {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&compiler)
        .args(args)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "{compiler} {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the probe smoke target: `libkrsmoke.so` and the `smoke_main` program that calls it.
pub fn build_smoke() -> (PathBuf, PathBuf) {
    let dir = scratch("smoke");
    let src = workspace_root().join("tests").join("smoke");
    let lib = dir.join("libkrsmoke.so");
    let exe = dir.join("smoke_main");
    let flags = ["-O1", "-fno-omit-frame-pointer", "-g"];
    let lib_src = src.join("krsmoke.c");
    let mut args: Vec<&str> = flags.to_vec();
    args.extend([
        "-shared",
        "-fPIC",
        "-o",
        lib.to_str().unwrap(),
        lib_src.to_str().unwrap(),
    ]);
    cc(&args);
    let main_src = src.join("smoke_main.c");
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let libdir = format!("-L{}", dir.display());
    let mut args: Vec<&str> = flags.to_vec();
    args.extend([
        "-o",
        exe.to_str().unwrap(),
        main_src.to_str().unwrap(),
        &libdir,
        "-lkrsmoke",
        &rpath,
    ]);
    cc(&args);
    (lib, exe)
}

/// True when running as root (uid 0): probe tests need it; CI runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Skips the calling test with a printed reason unless running as root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!(
                "SKIPPED: {} needs root to load BPF probes (CI runs as root)",
                module_path!()
            );
            return;
        }
    };
}
