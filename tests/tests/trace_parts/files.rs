//! `kreplay trace` never removes or truncates a file it did not create in this run: the old
//! trace survives a run that fails, and a stream directory it did not create is left alone.
use std::{path::Path, process::Command};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, scratch, workload};

use super::{assert_valid, counts, expect, hip_only, thread_tracks, trace_command};

/// A fresh directory of its own for one test.
fn fresh(name: &str) -> std::path::PathBuf {
    let dir = scratch("trace-files").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Traces saxpy (3 buffers, 2000 floats, 4 iterations) and checks its calls are all there.
fn trace_saxpy(out: &Path, extra: &[&str]) -> String {
    let r = trace_command(
        out,
        extra,
        &[workload("saxpy").to_str().unwrap(), "3", "2000", "4"],
    );
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(r.status.success(), "{stderr}");
    let d = decode_trace(out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(
        hip_only(&counts(&d, &threads[0].0)),
        expect(&[
            ("hipDeviceSynchronize", 1),
            ("hipFree", 6),
            ("hipLaunchKernel", 12),
            ("hipMalloc", 6),
            ("hipMemcpy", 9),
        ])
    );
    stderr
}

#[test]
fn an_old_trace_survives_a_command_that_cannot_run() {
    require_root!();
    let dir = fresh("cannot-run");
    let out = dir.join("old.pftrace");
    std::fs::write(&out, b"the previous trace").unwrap();
    let r = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap()])
        .args(["--", "/nonexistent/kreplay-cmd"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            "kreplay: error: cannot run /nonexistent/kreplay-cmd: No such file or directory (os error 2)"
        ]
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous trace");
    // Neither the stream directory nor a temporary file is left behind.
    assert_eq!(listing(&dir), ["old.pftrace"]);
}

#[test]
fn a_successful_trace_replaces_the_old_file_and_leaves_no_temporary_file() {
    require_root!();
    let dir = fresh("replace");
    let out = dir.join("run.pftrace");
    std::fs::write(&out, b"the previous trace").unwrap();
    trace_saxpy(&out, &[]);
    assert_eq!(listing(&dir), ["run.pftrace"]);
}

#[test]
fn a_stream_directory_kreplay_did_not_create_is_left_as_it_was() {
    require_root!();
    let dir = fresh("foreign-streams");
    let out = dir.join("run.pftrace");
    let theirs = dir.join("run.pftrace.streams");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), b"a person's notes").unwrap();
    // Named like kreplay's control stream: still not kreplay's to truncate.
    std::fs::write(theirs.join("probes-kreplay.krs"), b"not from this run").unwrap();
    trace_saxpy(&out, &[]);
    assert_eq!(listing(&theirs), ["notes.txt", "probes-kreplay.krs"]);
    assert_eq!(
        std::fs::read(theirs.join("notes.txt")).unwrap(),
        b"a person's notes"
    );
    assert_eq!(
        std::fs::read(theirs.join("probes-kreplay.krs")).unwrap(),
        b"not from this run"
    );
    // This run's streams went to a fresh directory, removed with what it wrote there.
    assert_eq!(listing(&dir), ["run.pftrace", "run.pftrace.streams"]);
}

#[test]
fn kept_streams_go_to_a_fresh_directory_when_the_name_is_taken() {
    require_root!();
    let dir = fresh("kept-streams");
    let out = dir.join("run.pftrace");
    let theirs = dir.join("run.pftrace.streams");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), b"a person's notes").unwrap();
    let stderr = trace_saxpy(&out, &["--keep-streams"]);
    let ours = dir.join("run.pftrace.streams.2");
    assert!(
        stderr.contains(&format!(
            "kreplay: streams kept in {} ({} was taken)\n",
            ours.display(),
            theirs.display()
        )),
        "{stderr}"
    );
    assert_eq!(listing(&theirs), ["notes.txt"]);
    let kept = listing(&ours);
    // saxpy's one thread (its main thread: tid = pid), and the control stream.
    assert_eq!(kept.len(), 2, "{kept:?}");
    let pid = kept[0]
        .strip_prefix("probes-")
        .and_then(|r| r.split('-').next())
        .unwrap_or_else(|| panic!("{kept:?}"));
    assert_eq!(
        kept,
        [
            format!("probes-{pid}-{pid}.krs"),
            "probes-kreplay.krs".into()
        ]
    );
}

#[test]
fn a_directory_as_the_output_is_refused_before_anything_runs() {
    require_root!();
    let dir = fresh("dir-output");
    let out = dir.join("a-dir");
    std::fs::create_dir(&out).unwrap();
    let r = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "kreplay: error: cannot write trace to {}: Is a directory (os error 21)",
            out.display()
        )]
    );
    assert_eq!(listing(&dir), ["a-dir"]);
    assert!(listing(&out).is_empty());
}

#[test]
fn an_old_trace_survives_a_run_without_privileges() {
    require_root!();
    // A directory and a trace that user nobody may write: only the missing capabilities stop
    // the run.
    let dir = std::env::temp_dir().join(format!("kreplay-unprivileged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("old.pftrace");
    std::fs::write(&out, b"the previous trace").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            "kreplay: error: kreplay needs CAP_BPF and CAP_PERFMON (or root) to load probes; \
          this process lacks CAP_BPF and CAP_PERFMON — run it with sudo"
        ]
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous trace");
    assert_eq!(listing(&dir), ["old.pftrace"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
