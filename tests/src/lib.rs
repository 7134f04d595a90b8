//! Integration-test helpers: locating built binaries, building C test programs, privilege checks.

pub mod attach_session;
pub mod replay_table;
pub mod rounds;
pub mod stderr_watch;
pub mod trace_json;
use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
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
    let path = std::env::var_os(kreplay_common::replay_config::BIN)
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

/// The simulated ROCm runtime's sources (`tests/rocm-sim`).
pub fn sim_root() -> PathBuf {
    workspace_root().join("tests").join("rocm-sim")
}

/// The simulated ROCm runtime's build directory, built with `make` if it is missing.
pub fn sim_dir() -> PathBuf {
    let root = sim_root();
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

/// Brings `targets` of the simulated runtime up to date with `make -s -C tests/rocm-sim`
/// (incremental, so fast when nothing changed), once per process for each list of targets, and
/// returns the build directory. Tests of the sim call this first: they need its current sources.
pub fn make_sim(targets: &[&str]) -> PathBuf {
    static MADE: Mutex<Vec<Vec<String>>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let key: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
    if !made.contains(&key) {
        let out = Command::new("make")
            .arg("-C")
            .arg(sim_root())
            .arg("-s")
            .args(targets)
            .output()
            .expect("run make (is GNU make installed?)");
        assert!(
            out.status.success(),
            "make -C tests/rocm-sim {} failed:\n{}{}",
            targets.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        made.push(key);
    }
    sim_root().join("build")
}

/// True for variables of the caller's environment that steer the sim or what it loads
/// (`KRSIM_*` knobs, `HSA_TOOLS_LIB`, `LD_LIBRARY_PATH`): no sim program run inherits them.
fn is_sim_knob(name: &str) -> bool {
    name.starts_with("KRSIM_") || name == "HSA_TOOLS_LIB" || name == "LD_LIBRARY_PATH"
}

/// Runs `exe` with `args`, without the caller's sim knobs and with `envs` set; kills it and
/// panics when it runs longer than `limit`.
pub fn run_sim_program(
    exe: &Path,
    args: &[&str],
    envs: &[(&str, String)],
    limit: Duration,
) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if is_sim_knob(&k) {
            cmd.env_remove(k);
        }
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", exe.display()));
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("poll child").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} did not finish within {limit:?}", exe.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collect output")
}

/// Runs a sim program as [`run_sim_program`] does; it must exit 0. Returns its stdout.
pub fn run_sim_ok(exe: &Path, args: &[&str], envs: &[(&str, String)], limit: Duration) -> String {
    let out = run_sim_program(exe, args, envs, limit);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} failed ({:?}):\n{stdout}{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs a sim C test program: it must exit 0 and print `last` as its final line. Returns stdout.
pub fn run_sim_test(
    exe: &Path,
    args: &[&str],
    envs: &[(&str, String)],
    limit: Duration,
    last: &str,
) -> String {
    let stdout = run_sim_ok(exe, args, envs, limit);
    assert_eq!(
        stdout.lines().last(),
        Some(last),
        "{} {args:?} output:\n{stdout}",
        exe.display()
    );
    stdout
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
    let root = sim_root();
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

/// Builds `tests/bench/pairloop.c`, the paired probe-overhead loop.
pub fn build_pairloop() -> PathBuf {
    let src = workspace_root().join("tests/bench/pairloop.c");
    build_hip_program(&src, "pairloop")
}

/// A byte-for-byte copy of the simulated `libamdhip64.so.6` named `libkrtwin.so`: the same
/// machine code at another address, under a name no GPU tracer recognises (pairloop's arm B).
pub fn twin_hip_lib() -> PathBuf {
    let twin = scratch("bench").join("libkrtwin.so");
    std::fs::copy(sim_dir().join("libamdhip64.so.6"), &twin).expect("copy the simulated HIP");
    twin
}

/// Starts `tests/trace/pid_target.c` making `n` hipMalloc/hipFree pairs once released: it
/// has initialised HIP and printed `ready` when this returns; write a line to its stdin to
/// let it go; it prints `done` when finished, and exits.
pub fn spawn_pid_target(
    n: u64,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    spawn_pid_target_with(n, false)
}

/// As [`spawn_pid_target`]; with `linger`, the target waits for a second line after `done`
/// before it exits.
pub fn spawn_pid_target_with(
    n: u64,
    linger: bool,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let src = workspace_root().join("tests/trace/pid_target.c");
    let exe = build_hip_program(&src, "pid_target");
    let mut child = Command::new(exe)
        .arg(n.to_string())
        .args(linger.then_some("linger"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start pid_target");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut line = String::new();
    out.read_line(&mut line)
        .expect("read pid_target's first line");
    assert_eq!(line, "ready\n");
    (child, out)
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

/// The directory holding the real NVTX v3 headers (`nvtx3/nvToolsExt.h`), from the pinned
/// `nvidia-nvtx-cu12` wheel of tests/python/requirements.txt (installed when missing).
pub fn nvtx_include() -> PathBuf {
    let find = || {
        Command::new("python3")
            .args(["-c", "import nvidia.nvtx as m; print(list(m.__path__)[0])"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("include"))
    };
    if let Some(p) = find() {
        return p;
    }
    let reqs = workspace_root().join("tests/python/requirements.txt");
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "-q", "-r", reqs.to_str().unwrap()])
        .status()
        .expect("python3 is needed for the NVTX headers");
    assert!(status.success(), "pip install -r {} failed", reqs.display());
    find().expect("nvidia-nvtx-cu12 installed but nvidia.nvtx not importable")
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

/// The stand-in CUDA driver of `tests/cuda-sim`, its stand-in CUPTI and its two programs,
/// built once per test binary.
pub struct CudaSim {
    /// Directory holding `libcuda.so.1` and `libcupti.so` (put it on `LD_LIBRARY_PATH`).
    pub dir: PathBuf,
    /// The program linked against libcuda.
    pub linked: PathBuf,
    /// The program that dlopens libcuda and takes every entry from `cuGetProcAddress_v2`, as
    /// the CUDA runtime does.
    pub runtime: PathBuf,
}

/// Builds [`CudaSim`] into the scratch directory `name` (one name per test binary, so test
/// binaries running at once never write the same files); later calls return the same build.
pub fn cuda_sim(name: &str) -> &'static CudaSim {
    static BUILT: std::sync::OnceLock<CudaSim> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = scratch(name);
        let src = workspace_root().join("tests/cuda-sim");
        let (lib, linked, runtime) = (
            dir.join("libcuda.so.1"),
            dir.join("app_linked"),
            dir.join("app_runtime"),
        );
        let s = |p: &Path| p.display().to_string();
        // -Bsymbolic: the driver's own table points at its own functions, as libcuda's does.
        cc(&[
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Wl,-Bsymbolic",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            &s(&lib),
            &s(&src.join("libcuda.c")),
            "-lpthread",
            "-ldl",
        ]);
        cc(&[
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Wl,-soname,libcupti.so",
            "-o",
            &s(&dir.join("libcupti.so")),
            &s(&src.join("libcupti.c")),
            "-lpthread",
            "-ldl",
        ]);
        let app = s(&src.join("app.c"));
        cc(&[
            "-O1",
            "-Wall",
            "-o",
            &s(&linked),
            &app,
            &format!("-L{}", dir.display()),
            "-l:libcuda.so.1",
            &format!("-Wl,-rpath,{}", dir.display()),
        ]);
        cc(&[
            "-O1",
            "-Wall",
            "-DRUNTIME_STYLE",
            "-o",
            &s(&runtime),
            &app,
            "-ldl",
        ]);
        CudaSim {
            dir,
            linked,
            runtime,
        }
    })
}

/// The stand-in CUDA runtime of `tests/cuda-sim` (`libcudart.so.12`, over the stand-in
/// driver) and its program, built once per test binary beside [`cuda_sim`]'s driver.
pub struct CudartSim {
    /// Directory holding `libcuda.so.1` and `libcudart.so.12` (put it on `LD_LIBRARY_PATH`:
    /// the runtime dlopens the driver by name).
    pub dir: PathBuf,
    /// `cudart_app`, linked against `libcudart.so.12`.
    pub app: PathBuf,
    /// `cudart_app` with the runtime linked in statically (no `libcudart.so` mapped).
    pub static_app: PathBuf,
    /// `cudart_app` linked with `-s`: no symbol names its host stubs, as in a pip wheel's
    /// libraries; its registration code still does.
    pub stripped_app: PathBuf,
    /// `stripped_app` compiled with `-fno-plt`: the registrations call through the GOT.
    pub stripped_noplt_app: PathBuf,
    /// `stripped_noplt_app` before stripping (same code, same addresses), for reference.
    pub noplt_app: PathBuf,
}

/// Builds [`CudartSim`] in [`cuda_sim`]`(name)`'s directory; later calls return the same build.
pub fn cudart_sim(name: &str) -> &'static CudartSim {
    static BUILT: std::sync::OnceLock<CudartSim> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = cuda_sim(name).dir.clone();
        let src = workspace_root().join("tests/cuda-sim");
        let s = |p: &Path| p.display().to_string();
        let (lib, app, static_app) = (
            dir.join("libcudart.so.12"),
            dir.join("cudart_app"),
            dir.join("cudart_app_static"),
        );
        // Exported with the real runtime's symbol version node (`cudaMalloc@@libcudart.so.12`).
        cc(&[
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Wl,-soname,libcudart.so.12",
            &format!("-Wl,--version-script,{}", s(&src.join("libcudart.map"))),
            "-o",
            &s(&lib),
            &s(&src.join("libcudart.c")),
            "-ldl",
            "-lpthread",
        ]);
        let app_src = s(&src.join("cudart_app.c"));
        cc(&[
            "-O1",
            "-Wall",
            "-o",
            &s(&app),
            &app_src,
            &format!("-L{}", dir.display()),
            "-l:libcudart.so.12",
            &format!("-Wl,-rpath,{}", dir.display()),
        ]);
        // The runtime compiled into the program, as `nvcc -cudart static` links it.
        cc(&[
            "-O1",
            "-Wall",
            "-o",
            &s(&static_app),
            &app_src,
            &s(&src.join("libcudart.c")),
            "-ldl",
            "-lpthread",
        ]);
        // Stripped, with and without PLT calls, and the -fno-plt build unstripped.
        let [stripped_app, stripped_noplt_app, noplt_app] = [
            "cudart_app_stripped",
            "cudart_app_stripped_noplt",
            "cudart_app_noplt",
        ]
        .map(|n| dir.join(n));
        for (out, flags) in [
            (&stripped_app, &["-s"][..]),
            (&stripped_noplt_app, &["-s", "-fno-plt"]),
            (&noplt_app, &["-fno-plt"]),
        ] {
            let mut args = vec!["-O1", "-Wall"];
            args.extend(flags);
            let (o, l, r) = (
                s(out),
                format!("-L{}", dir.display()),
                format!("-Wl,-rpath,{}", dir.display()),
            );
            args.extend([
                "-o",
                o.as_str(),
                app_src.as_str(),
                l.as_str(),
                "-l:libcudart.so.12",
                r.as_str(),
            ]);
            cc(&args);
        }
        CudartSim {
            dir,
            app,
            static_app,
            stripped_app,
            stripped_noplt_app,
            noplt_app,
        }
    })
}
