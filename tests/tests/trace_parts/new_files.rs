//! `kreplay trace --all` and runtime libraries in places no process used before: a process that
//! maps such a file (at start, or by a later `dlopen`) is held until the file is probed, so
//! its first calls are traced; a process held when kreplay is killed is resumed by kreplay's
//! guardian.
use std::{
    io::{BufRead, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use kreplay_tests::{
    decode_trace, kreplay_bin, make_sim, require_root, scratch, sim_dir, workload,
};

use super::{StderrWatch, assert_valid, counts, expect, hip_only, out_path, thread_tracks};

/// A fresh copy of the simulated HIP and HSA runtimes and of `names` in `dir` (the workloads
/// find the runtime through their `$ORIGIN/..` run path): files no process has mapped.
fn copy_of_sim(dir: &Path, names: &[&str]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("workloads")).unwrap();
    for lib in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        std::fs::copy(sim_dir().join(lib), dir.join(lib)).unwrap();
    }
    for n in names {
        std::fs::copy(workload(n), dir.join("workloads").join(n)).unwrap();
    }
}

/// The state letter of process `pid` (`/proc/PID/stat`).
fn state(pid: u32) -> Option<u8> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let end = stat.iter().rposition(|&b| b == b')')?;
    stat.get(end + 2).copied()
}

/// `kreplay trace --all -o out` (no `--lib`: the sim is found only as it is mapped), once it
/// says it is tracing.
fn trace_all(out: &Path) -> (Child, StderrWatch) {
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "--all", "-o", out.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing every process");
    (kreplay, watch)
}

/// The HIP calls of process `pid` in the trace, one map per thread that made any.
fn hip_calls(d: &serde_json::Value, pid: u32) -> Vec<std::collections::BTreeMap<String, u64>> {
    thread_tracks(d)
        .iter()
        .filter(|t| t.2 == pid as u64)
        .map(|t| hip_only(&counts(d, &t.0)))
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn all_traces_runtimes_from_three_new_directories_from_their_first_call() {
    require_root!();
    let _one = super::one_all_trace();
    make_sim(&["hsa", "hip"]);
    let root = scratch("all-new-dirs");
    let dirs: Vec<PathBuf> = ["before", "long", "short"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    copy_of_sim(&dirs[0], &["devices"]);
    copy_of_sim(&dirs[1], &["saxpy"]);
    copy_of_sim(&dirs[2], &["saxpy"]);
    // Started before the trace, its runtime mapped; it waits for a line before its kernels.
    let (mut before, _before_out) = super::spawn_ready(
        Command::new(dirs[0].join("workloads/devices"))
            .args(["3", "1"])
            .env("KRSIM_GPUS", "2"),
    );
    let out = out_path("all-new-dirs");
    let (mut kreplay, watch) = trace_all(&out);
    before.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    // Started after it: a longer run, and a run of about a millisecond whose copy of the
    // runtime no process has mapped.
    let mut long = Command::new(dirs[1].join("workloads/saxpy"))
        .args(["3", "1000", "4"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let short = Command::new(dirs[2].join("workloads/saxpy"))
        .args(["1", "16", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let short_pid = short.id();
    let short = short.wait_with_output().unwrap();
    let short_wall = t0.elapsed();
    assert!(short.status.success());
    assert_eq!(
        String::from_utf8_lossy(&short.stdout).lines().next(),
        Some("launches: 1")
    );
    let long_pid = long.id();
    assert!(long.wait().unwrap().success());
    assert!(before.wait().unwrap().success());
    // SAFETY: plain signal send: --all runs until stopped.
    assert_eq!(unsafe { libc::kill(kreplay.id() as i32, libc::SIGINT) }, 0);
    assert_eq!(kreplay.wait().unwrap().code(), Some(0));
    let stderr = watch.finish();
    let d = decode_trace(&out);
    assert_valid(&d);
    // The process started before: every call after the attach.
    assert_eq!(
        hip_calls(&d, before.id()),
        vec![expect(&[
            ("hipDeviceSynchronize", 1),
            ("hipFree", 1),
            ("hipLaunchKernel", 3),
            ("hipMemcpy", 1),
            ("hipModuleGetFunction", 1),
            ("hipModuleLaunchKernel", 3),
        ])],
        "{stderr}"
    );
    // The two started after: every call from the first.
    for (pid, (nbuf, iters)) in [(long_pid, (3u64, 4u64)), (short_pid, (1, 1))] {
        assert_eq!(
            hip_calls(&d, pid),
            vec![expect(&[
                ("hipDeviceSynchronize", 1),
                ("hipFree", 2 * nbuf),
                ("hipLaunchKernel", nbuf * iters),
                ("hipMalloc", 2 * nbuf),
                ("hipMemcpy", 3 * nbuf),
            ])],
            "pid {pid}: {stderr}"
        );
    }
    // Each of the two new copies held its first process twice (HIP, then the HSA runtime it
    // loads); other tests' processes may have been held too.
    let held = stderr
        .lines()
        .find_map(|l| l.strip_prefix("new runtime library files: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(held.is_some_and(|n| n >= 4), "{stderr}");
    eprintln!("the short run took {short_wall:?} held and traced");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_process_held_when_kreplay_is_killed_is_resumed_by_the_guardian() {
    require_root!();
    let _one = super::one_all_trace();
    make_sim(&["hsa", "hip"]);
    let dir = scratch("held-at-kill");
    copy_of_sim(&dir, &["saxpy"]);
    let out = out_path("held-at-kill");
    let (mut kreplay, _watch) = trace_all(&out);
    let signal = |pid: u32, sig: i32| {
        // SAFETY: plain signal send to the kreplay this test started.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    };
    // Stopped, kreplay cannot serve the stop: the process stays held. (Killed at the end
    // whatever happens: a stopped kreplay would hold every later test's processes.)
    struct KillOnDrop(u32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // SAFETY: plain signal send to the kreplay this test started.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
    let _kill = KillOnDrop(kreplay.id());
    signal(kreplay.id(), libc::SIGSTOP);
    let mut run = Command::new(dir.join("workloads/saxpy"))
        .args(["1", "16", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(run.id()) != Some(b'T') {
        assert!(Instant::now() < deadline, "never held");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        state(run.id()),
        Some(b'T'),
        "resumed while kreplay was stopped"
    );
    // The guardian, named for `ps`, ignores what `pkill kreplay` sends.
    let guardian = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c == "kreplay-guard\n")
                && std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.contains(out.to_str().unwrap()))
        })
        .expect("a guardian");
    signal(guardian, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    assert!(state(guardian).is_some(), "the guardian ended on SIGTERM");
    signal(kreplay.id(), libc::SIGKILL);
    assert!(kreplay.wait().unwrap().code().is_none());
    // The guardian resumes it; it computes what it computes without kreplay.
    while run.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "still held after kreplay died");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = String::new();
    std::io::Read::read_to_string(run.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(run.wait().unwrap().success());
    assert_eq!(stdout.lines().next(), Some("launches: 1"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn all_traces_a_runtime_a_running_process_dlopens_from_a_new_place_from_its_first_call() {
    require_root!();
    let _one = super::one_all_trace();
    make_sim(&["hsa", "hip"]);
    let exe = super::dlopen_target("dlopen_target_all", false);
    // Both runtimes from a fresh copy: HSA mapped at start, before the trace; HIP dlopened by
    // name once released, after it, from a file no process has mapped.
    let dir = scratch("all-dlopen");
    copy_of_sim(&dir, &[]);
    let n = 20u64;
    let (mut child, mut child_out) = super::spawn_ready(
        Command::new(&exe)
            .arg(n.to_string())
            .env("LD_LIBRARY_PATH", &dir),
    );
    let mut line = String::new();
    let out = out_path("all-dlopen");
    let (mut kreplay, watch) = trace_all(&out);
    // It dlopens HIP, makes its calls and exits within milliseconds.
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    child_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    assert!(child.wait().unwrap().success());
    // SAFETY: plain signal send: --all runs until stopped.
    assert_eq!(unsafe { libc::kill(kreplay.id() as i32, libc::SIGINT) }, 0);
    assert_eq!(kreplay.wait().unwrap().code(), Some(0));
    let stderr = watch.finish();
    let d = decode_trace(&out);
    assert_valid(&d);
    assert_eq!(
        hip_calls(&d, child.id()),
        vec![expect(&[("hipFree", n), ("hipMalloc", n)])],
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
