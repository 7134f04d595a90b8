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
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    // Tests run in parallel threads: build once per process, or one test would execute the
    // program while another is rewriting it.
    BUILT.get_or_init(build_smoke_now).clone()
}

fn build_smoke_now() -> (PathBuf, PathBuf) {
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

/// The simulated ROCm runtime's build directory, built with `make` if it is missing.
pub fn sim_dir() -> PathBuf {
    let root = workspace_root().join("tests").join("rocm-sim");
    let build = root.join("build");
    if !build.join("libamdhip64.so.6").exists() {
        let status = Command::new("make")
            .args(["-C", root.to_str().unwrap(), "-j2"])
            .status()
            .expect("run make for the simulated runtime");
        assert!(status.success(), "building the simulated runtime failed");
    }
    build
}

/// A sample workload of the simulated runtime (`tests/rocm-sim/build/workloads/NAME`).
pub fn workload(name: &str) -> PathBuf {
    sim_dir().join("workloads").join(name)
}

/// Compiles a C program against the simulated HIP (`workload.h` helpers available).
pub fn build_hip_program(src: &Path, name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = built.iter().find(|(n, _)| n == name) {
        return exe.clone();
    }
    let exe = build_hip_program_now(src, name);
    built.push((name.to_string(), exe.clone()));
    exe
}

fn build_hip_program_now(src: &Path, name: &str) -> PathBuf {
    let sim = sim_dir();
    let root = workspace_root().join("tests").join("rocm-sim");
    let exe = scratch("hip-programs").join(name);
    let inc1 = format!("-I{}", root.join("include").display());
    let inc2 = format!("-I{}", root.join("workloads").display());
    let libdir = format!("-L{}", sim.display());
    let rpath = format!("-Wl,-rpath,{}", sim.display());
    cc(&[
        "-std=gnu11",
        "-O1",
        "-pthread",
        "-rdynamic",
        &inc1,
        &inc2,
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &libdir,
        "-l:libamdhip64.so.6",
        "-l:libhsa-runtime64.so.1",
        &rpath,
    ]);
    exe
}

/// Builds the probe-overhead loop (`tests/bench/callloop.c`) against the simulated HIP.
pub fn build_callloop() -> PathBuf {
    let src = workspace_root().join("tests/bench/callloop.c");
    build_hip_program(&src, "callloop")
}

/// Makes sure python3 can import the official Perfetto protos, installing the pinned
/// requirements (tests/python/requirements.txt) when it cannot.
pub fn ensure_decoder() {
    let ok = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let reqs = workspace_root().join("tests/python/requirements.txt");
        let status = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "-r", reqs.to_str().unwrap()])
            .status()
            .expect("python3 is needed to decode traces");
        assert!(status.success(), "pip install -r {} failed", reqs.display());
    }
}

/// Decodes a trace file with the independent decoder (tests/python/decode_trace.py).
pub fn decode_trace(path: &Path) -> serde_json::Value {
    ensure_decoder();
    let script = workspace_root().join("tests/python/decode_trace.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(path)
        .output()
        .expect("run the decoder");
    assert!(
        out.status.success(),
        "decoding {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("decoder prints JSON")
}

/// CLOCK_MONOTONIC now, in ns (the clock of every kreplay timestamp).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
