//! Loading a library into a running process (`kreplay_cli::inject`): a multi-threaded target
//! with its main thread blocked in `read` gets the library, its constructor runs, and the
//! program finishes exactly as a bare run does; refusals are one clear line.
use std::{
    fs,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use kreplay_cli::{
    inject::{self, InjectError, Plan, call::Interrupted},
    probes::elf::SymbolTable,
};
use kreplay_tests::{cc, require_root, scratch, workspace_root};

/// The checksum iterations of a target that must still be computing during the injection
/// (about a second on the dev VM).
const LONG: &str = "300000000";
/// The line the blocked `read` receives after the injection.
const LINE: &str = "hello after the injection\n";

fn src(name: &str) -> PathBuf {
    workspace_root().join("tests").join("inject").join(name)
}

/// Builds the target program into `dir`.
fn build_target(dir: &Path) -> PathBuf {
    let exe = dir.join("inject_target");
    cc(&[
        "-O2",
        "-pthread",
        "-o",
        exe.to_str().unwrap(),
        src("inject_target.c").to_str().unwrap(),
    ]);
    exe
}

/// Builds the marker library into `lib_dir`; its constructor appends to `marker`.
fn build_lib(lib_dir: &Path, marker: &Path) -> PathBuf {
    let lib = lib_dir.join("libkrinject.so");
    let _ = fs::remove_file(marker);
    let define = format!("-DMARKER=\"{}\"", marker.display());
    cc(&[
        "-O2",
        "-shared",
        "-fPIC",
        &define,
        "-o",
        lib.to_str().unwrap(),
        src("marker_lib.c").to_str().unwrap(),
    ]);
    lib
}

/// The bare run's output for `iters` and [`LINE`].
fn bare_output(exe: &Path, args: &[&str]) -> String {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(LINE.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A target started through `prefix` (e.g. `unshare ...`), once it printed `ready` and its
/// main thread is blocked in `read(0)`.
struct Target {
    child: Child,
    pid: i32,
    stdout: BufReader<ChildStdout>,
    first: String,
}

impl Target {
    fn start(prefix: &[&str], exe: &Path, args: &[&str]) -> Target {
        let mut cmd = match prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert_eq!(first, "ready\n");
        // Through `unshare` the child execs the target: its pid is the target's.
        let pid = child.id() as i32;
        let target = Target {
            child,
            pid,
            stdout,
            first,
        };
        if !args.contains(&"spin") && !args.contains(&"idle") {
            target.wait_blocked_in_read();
        }
        target
    }

    /// Waits until the main thread is in `read` (syscall 0) on fd 0.
    fn wait_blocked_in_read(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let sc = fs::read_to_string(format!("/proc/{}/syscall", self.pid)).unwrap();
            if sc.starts_with("0 0x0 ") {
                return;
            }
            assert!(Instant::now() < deadline, "never blocked in read: {sc}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn threads(&self) -> usize {
        fs::read_dir(format!("/proc/{}/task", self.pid))
            .unwrap()
            .count()
    }

    fn maps(&self) -> String {
        fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap()
    }

    /// Sends [`LINE`], and returns the whole output once the program exits successfully.
    fn finish(mut self) -> String {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(LINE.as_bytes()).unwrap();
        drop(stdin);
        let mut out = self.first.clone();
        std::io::Read::read_to_string(&mut self.stdout, &mut out).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "target exited {status}: {out}");
        out
    }
}

/// Where the library's function is in the target, through its file's symbols and its maps.
fn function_in(maps: &str, mapped_as: &str, lib: &Path, name: &str) -> Option<u64> {
    let off = SymbolTable::read(lib).unwrap().offset(name)?;
    inject::symbols::address_of(&inject::target::parse_maps(maps), mapped_as, off)
}

#[test]
fn a_library_loads_into_a_busy_process_blocked_in_read_which_then_runs_as_before() {
    require_root!();
    let dir = scratch("inject-busy");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let want = bare_output(&exe, &[LONG]);

    let target = Target::start(&[], &exe, &[LONG]);
    assert_eq!(
        target.threads(),
        4,
        "three workers computing and the main thread"
    );
    let loaded = inject::load(target.pid, &lib).unwrap();
    eprintln!("injection pause: {:?}", loaded.pause);
    assert_eq!(loaded.tid, target.pid, "the main thread makes the call");
    assert_eq!(loaded.path, lib);
    assert!(!loaded.copied);
    assert_ne!(loaded.handle, 0);
    assert_eq!(loaded.dlopen.symbol, "dlopen");
    // The main thread was stopped inside read(2), which the kernel restarts on resume.
    assert_eq!(loaded.interrupted, Interrupted::Restart { nr: 0 });

    let maps = target.maps();
    let lib_str = lib.to_str().unwrap();
    assert!(maps.contains(lib_str), "{maps}");
    let f = function_in(&maps, lib_str, &lib, "krinject_triple_plus_one");
    assert!(f.is_some(), "the library's function is mapped executable");
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid),
        "the constructor ran once, in the target"
    );
    // The read restarted and blocks again; the workers still ran then.
    target.wait_blocked_in_read();
    assert_eq!(
        target.threads(),
        4,
        "the workers were still computing after the injection"
    );
    assert_eq!(target.finish(), want);
}

#[test]
fn a_second_injection_is_refused_as_already_loaded() {
    require_root!();
    let dir = scratch("inject-twice");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let want = bare_output(&exe, &["1000"]);
    let target = Target::start(&[], &exe, &["1000"]);
    inject::load(target.pid, &lib).unwrap();
    let err = inject::load(target.pid, &lib).unwrap_err();
    assert!(matches!(err, InjectError::AlreadyLoaded { .. }), "{err:?}");
    let l = lib.display();
    assert_eq!(
        err.to_string(),
        format!(
            "{l} is already loaded in process {} (mapped as {l})",
            target.pid
        )
    );
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid)
    );
    assert_eq!(target.finish(), want);
}

#[test]
fn a_process_gone_between_lookup_and_attach_is_named() {
    require_root!();
    let dir = scratch("inject-gone");
    let exe = build_target(&dir);
    let lib = build_lib(&dir, &dir.join("marker"));
    let gone = |reap: bool| {
        let mut target = Target::start(&[], &exe, &["1000"]);
        let plan = Plan::prepare(target.pid, &lib).unwrap();
        assert_eq!(plan.target_path(), lib);
        target.child.kill().unwrap();
        if reap {
            target.child.wait().unwrap();
        } else {
            // Killed, not reaped: a zombie whose threads are gone.
            let deadline = Instant::now() + Duration::from_secs(5);
            while inject::target::state(target.pid) != Some('Z') {
                assert!(Instant::now() < deadline, "never became a zombie");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let err = plan.execute().unwrap_err();
        assert!(matches!(err, InjectError::ProcessGone { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "process {} is gone (exited before or during the injection)",
                target.pid
            )
        );
        let _ = target.child.wait();
    };
    gone(true);
    gone(false);
}

#[test]
fn a_library_hidden_from_another_mount_namespace_is_copied_in() {
    require_root!();
    let dir = scratch("inject-mntns");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    // The library's directory is covered by an empty tmpfs in the target's namespace.
    let hidden = scratch("inject-mntns-hidden");
    let lib = build_lib(&hidden, &marker);
    let want = bare_output(&exe, &["1000"]);
    let cover = format!(
        "mount -t tmpfs none {} && exec \"$0\" \"$@\"",
        hidden.display()
    );
    let prefix = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &cover,
    ];
    let target = Target::start(&prefix, &exe, &["1000"]);
    assert!(
        !Path::new(&format!("/proc/{}/root{}", target.pid, lib.display())).exists(),
        "the library must be hidden from the target"
    );
    let loaded = inject::load(target.pid, &lib).unwrap();
    let size = fs::metadata(&lib).unwrap().len();
    let copy = PathBuf::from(format!("/tmp/kreplay-inject-{size}-libkrinject.so"));
    assert!(loaded.copied);
    assert_eq!(loaded.path, copy);
    assert_eq!(loaded.interrupted, Interrupted::Restart { nr: 0 });
    // Mapped, and the copy's name removed: nothing left in the target's /tmp.
    let maps = target.maps();
    assert!(
        maps.contains(&format!("{} (deleted)", copy.display())),
        "{maps}"
    );
    assert!(!Path::new(&format!("/proc/{}/root{}", target.pid, copy.display())).exists());
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid)
    );
    // The removed copy is still recognized as loaded.
    let err = inject::load(target.pid, &lib).unwrap_err();
    assert!(matches!(err, InjectError::AlreadyLoaded { .. }), "{err:?}");
    assert_eq!(target.finish(), want);
}

#[test]
fn a_thread_busy_in_user_code_resumes_where_it_was_stopped() {
    require_root!();
    let dir = scratch("inject-spin");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let args = ["100000000", "spin"];
    let want = bare_output(&exe, &args);
    let target = Target::start(&[], &exe, &args);
    let loaded = inject::load(target.pid, &lib).unwrap();
    // Stopped in its checksum loop, not in a system call: nothing to restart.
    assert_eq!(loaded.interrupted, Interrupted::No);
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid)
    );
    // Its checksum, and the workers', come out as in the bare run.
    assert_eq!(target.finish(), want);
}

#[test]
fn a_thread_asleep_in_futex_makes_the_call_rather_than_a_main_thread_busy_in_user_code() {
    require_root!();
    let dir = scratch("inject-idle");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let args = ["100000000", "idle"];
    let want = bare_output(&exe, &args);
    let target = Target::start(&[], &exe, &args);
    // The one thread in futex (202): the sleeper (the workers and the main thread compute).
    let deadline = Instant::now() + Duration::from_secs(10);
    let sleeper = loop {
        let in_futex: Vec<i32> = fs::read_dir(format!("/proc/{}/task", target.pid))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|t| {
                fs::read_to_string(format!("/proc/{}/task/{t}/syscall", target.pid))
                    .is_ok_and(|s| s.starts_with("202 "))
            })
            .collect();
        if let [t] = in_futex[..] {
            break t;
        }
        assert!(Instant::now() < deadline, "no single sleeper: {in_futex:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_ne!(sleeper, target.pid);
    let loaded = inject::load(target.pid, &lib).unwrap();
    // A busy thread may be stopped inside malloc, holding a lock dlopen takes: the sleeper
    // holds none.
    assert_eq!(loaded.tid, sleeper);
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid)
    );
    // Its wait resumed, and every thread's output is the bare run's.
    assert_eq!(target.finish(), want);
}

#[test]
fn a_sleep_stopped_mid_way_sleeps_its_remaining_time() {
    require_root!();
    let dir = scratch("inject-sleep");
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let started = Instant::now();
    let mut child = Command::new("sleep").arg("1").spawn().unwrap();
    let pid = child.id() as i32;
    // Wait until it sleeps in clock_nanosleep (230).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !fs::read_to_string(format!("/proc/{pid}/syscall"))
        .unwrap()
        .starts_with("230 ")
    {
        assert!(Instant::now() < deadline, "sleep never slept");
        std::thread::sleep(Duration::from_millis(2));
    }
    let loaded = inject::load(pid, &lib).unwrap();
    // The kernel resumes the sleep through restart_syscall with the time left.
    assert_eq!(loaded.interrupted, Interrupted::RestartBlock { nr: 230 });
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {pid}\n")
    );
    let status = child.wait().unwrap();
    let took = started.elapsed();
    assert!(status.success(), "{status}");
    assert!(took >= Duration::from_secs(1), "slept only {took:?}");
    assert!(took < Duration::from_secs(3), "slept {took:?}");
}

#[test]
fn a_process_under_another_tracer_is_refused_with_the_tracer_named() {
    require_root!();
    let dir = scratch("inject-traced");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let tracer_exe = dir.join("tracer");
    cc(&[
        "-O2",
        "-o",
        tracer_exe.to_str().unwrap(),
        src("tracer.c").to_str().unwrap(),
    ]);
    let want = bare_output(&exe, &["1000"]);
    let target = Target::start(&[], &exe, &["1000"]);
    let mut tracer = Command::new(&tracer_exe)
        .arg(target.pid.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(tracer.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "seized\n");
    let err = inject::load(target.pid, &lib).unwrap_err();
    assert!(matches!(err, InjectError::PtraceDenied { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "ptrace(PTRACE_SEIZE) of process {} was denied: it is already traced by process {} \
             (a debugger or another tool)",
            target.pid,
            tracer.id()
        )
    );
    assert!(!marker.exists(), "nothing was loaded");
    // Once the other tracer is gone, the injection goes through.
    tracer.kill().unwrap();
    tracer.wait().unwrap();
    inject::load(target.pid, &lib).unwrap();
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("loaded in {}\n", target.pid)
    );
    assert_eq!(target.finish(), want);
}

#[test]
fn a_stopped_process_is_refused_and_stays_stopped() {
    require_root!();
    let dir = scratch("inject-stopped");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let lib = build_lib(&dir, &marker);
    let want = bare_output(&exe, &["1000"]);
    let target = Target::start(&[], &exe, &["1000"]);
    // SAFETY: kill sends a signal to our own child; no memory is involved.
    unsafe { libc::kill(target.pid, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while inject::target::state(target.pid) != Some('T') {
        assert!(Instant::now() < deadline, "never stopped");
        std::thread::sleep(Duration::from_millis(2));
    }
    let err = inject::load(target.pid, &lib).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "process {0} is stopped (SIGSTOP or a job-control stop): continue it first \
             (kill -CONT {0})",
            target.pid
        )
    );
    assert_eq!(inject::target::state(target.pid), Some('T'));
    assert!(!marker.exists());
    // SAFETY: as above.
    unsafe { libc::kill(target.pid, libc::SIGCONT) };
    assert_eq!(target.finish(), want);
}

#[test]
fn a_failed_dlopen_reports_dlerror_and_the_process_runs_on() {
    require_root!();
    let dir = scratch("inject-bad");
    let exe = build_target(&dir);
    let bad = dir.join("libnot-elf.so");
    fs::write(&bad, vec![b'x'; 4096]).unwrap();
    let want = bare_output(&exe, &["1000"]);
    let target = Target::start(&[], &exe, &["1000"]);
    let err = inject::load(target.pid, &bad).unwrap_err();
    let p = bad.display();
    assert_eq!(
        err.to_string(),
        format!(
            "dlopen({p}) in process {} failed: {p}: invalid ELF header",
            target.pid
        )
    );
    assert!(!target.maps().contains(bad.to_str().unwrap()));
    target.wait_blocked_in_read();
    assert_eq!(target.finish(), want);
}

#[test]
fn a_call_that_outlives_its_timeout_is_abandoned_and_the_thread_restored() {
    require_root!();
    let dir = scratch("inject-slow");
    let exe = build_target(&dir);
    let marker = dir.join("marker");
    let _ = fs::remove_file(&marker);
    // A constructor that sleeps 3 s, against a 300 ms call timeout.
    let lib = dir.join("libkrslow.so");
    let define = format!("-DMARKER=\"{}\"", marker.display());
    cc(&[
        "-O2",
        "-shared",
        "-fPIC",
        &define,
        "-DSLEEP_MS=3000",
        "-o",
        lib.to_str().unwrap(),
        src("marker_lib.c").to_str().unwrap(),
    ]);
    let want = bare_output(&exe, &["1000"]);
    let target = Target::start(&[], &exe, &["1000"]);
    let err = Plan::prepare(target.pid, &lib)
        .unwrap()
        .call_timeout(Duration::from_millis(300))
        .execute()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "thread {}: timed out after 300 ms waiting for the injected call to return",
            target.pid
        )
    );
    // The thread was taken back from inside the constructor: registers restored, so it is
    // blocked in its own read again and finishes as a bare run; the constructor never
    // finished.
    target.wait_blocked_in_read();
    assert_eq!(target.finish(), want);
    assert!(
        !marker.exists(),
        "the abandoned constructor must not have run on"
    );
}
