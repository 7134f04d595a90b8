//! Running a `kreplay` binary as its own process and measuring it: wall time, CPU time and
//! the process's own peak RSS; and building the base commit's binary to compare against.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one run cost.
#[derive(Clone, Debug)]
pub struct Cost {
    /// Wall-clock seconds.
    pub wall: f64,
    /// User plus system CPU seconds of the process (and of children it waited for).
    pub cpu: f64,
    /// Peak RSS of the process itself, KiB.
    pub peak_kib: u64,
    /// What it wrote to stdout.
    pub stdout: String,
}

/// VmHWM of `pid` in KiB, if it is still running.
fn hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs `cmd` to completion (it must succeed) and measures it.
///
/// Peak RSS: `wait4`'s `ru_maxrss` counts the process's waited-for children too (a replayed
/// application), so with `own_peak` the peak is the largest VmHWM of the process itself,
/// read from /proc every millisecond while it runs (VmHWM only grows, so only growth in its
/// last millisecond can be missed); without, it is `ru_maxrss` (exact for a process with no
/// children, like `kreplay merge`).
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which Child::wait cannot replace: it gives no rusage"
)]
pub fn run(cmd: &mut Command, own_peak: bool) -> Cost {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // The tool refuses `KREPLAY_*` variables it does not know: keep the bench's own out.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("KREPLAY_BENCH") {
            cmd.env_remove(k);
        }
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().expect("spawn the measured command");
    let pid = child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicU64::new(0));
    let poller = own_peak.then(|| {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kib) = hwm_kib(pid) {
                    seen.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    });
    let stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let stdout = child.stdout.take().expect("piped stdout");
    let out_reader =
        std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let mut status = 0i32;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (Child::wait was not called); status and usage
    // are valid for writes. Reaping it here leaves `child` never waited for, which is fine.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    let wall = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    if let Some(p) = poller {
        let _ = p.join();
    }
    let err = reader.join().unwrap_or_default();
    let stdout = out_reader.join().unwrap_or_default();
    if std::env::var_os("KREPLAY_BENCH_VERBOSE").is_some() {
        eprintln!("{cmd:?}:\n{err}");
    }
    assert_eq!(
        r,
        pid as i32,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed ({status:#x}):\n{err}"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Cost {
        wall,
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        peak_kib: if own_peak {
            seen.load(Ordering::Relaxed)
        } else {
            usage.ru_maxrss as u64
        },
        stdout,
    }
}

/// The workspace root (this bench's package is one level below it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn check(what: &str, cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what} failed ({status})");
}

/// The release `kreplay` of this tree (built now if stale), and its tool library beside it.
pub fn current() -> PathBuf {
    let ws = workspace();
    check(
        "release build",
        Command::new("cargo")
            .args([
                "build",
                "--release",
                "-q",
                "-p",
                "kreplay-cli",
                "-p",
                "kreplay-tool",
            ])
            .current_dir(&ws),
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join("target"));
    target.join("release").join("kreplay")
}

/// The release `kreplay` (and tool library) of `commit`, built once from `git archive` into
/// `target/bench-base/COMMIT` (its own target directory) and reused.
pub fn base(commit: &str) -> PathBuf {
    let ws = workspace();
    let full = Command::new("git")
        .args(["rev-parse", "--verify", &format!("{commit}^{{commit}}")])
        .current_dir(&ws)
        .output()
        .expect("git rev-parse");
    assert!(full.status.success(), "unknown commit {commit}");
    let full = String::from_utf8_lossy(&full.stdout).trim().to_owned();
    let root = ws.join("target").join("bench-base").join(&full);
    let bin = root.join("target").join("release").join("kreplay");
    let tool = root
        .join("target")
        .join("release")
        .join("libkreplay_tool.so");
    if bin.exists() && tool.exists() {
        return bin;
    }
    let src = root.join("src");
    if !src.join("Cargo.toml").exists() {
        std::fs::create_dir_all(&src).expect("base source dir");
        let tar = root.join("src.tar");
        check(
            "git archive",
            Command::new("git")
                .args(["archive", "--format=tar", "-o"])
                .arg(&tar)
                .arg(&full)
                .current_dir(&ws),
        );
        check(
            "untar",
            Command::new("tar").arg("-xf").arg(&tar).arg("-C").arg(&src),
        );
    }
    eprintln!("building the base {full} (once) into {}", root.display());
    check(
        "base release build",
        Command::new("cargo")
            .args([
                "build",
                "--release",
                "-q",
                "-p",
                "kreplay-cli",
                "-p",
                "kreplay-tool",
            ])
            .arg("--target-dir")
            .arg(root.join("target"))
            .env_remove("CARGO_TARGET_DIR")
            .current_dir(&src),
    );
    bin
}

/// Whether two files have the same bytes.
pub fn same_bytes(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let open = |p: &Path| {
        std::fs::File::open(p)
            .ok()
            .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
    };
    let (Some(mut x), Some(mut y)) = (open(a), open(b)) else {
        return false;
    };
    let (mut bx, mut by) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = read_full(&mut x, &mut bx);
        let m = read_full(&mut y, &mut by);
        if n != m || bx[..n] != by[..m] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
    fn read_full(r: &mut impl Read, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            match r.read(&mut buf[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        n
    }
}
