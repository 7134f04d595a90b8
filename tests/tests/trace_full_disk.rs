//! `kreplay trace` on a filesystem that fills up: the error says the stream files were kept,
//! where, and the exact `kreplay merge` command that renders them, which then works once
//! there is room. Its own test binary: its probe teardown must not run beside trace.rs's
//! timing-sensitive tests.
use std::{path::PathBuf, process::Command};

use kreplay_tests::{decode_trace, kreplay_bin, require_root, scratch, workload};

/// A small tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        let _ = Command::new("umount").arg(&dir).status();
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount (util-linux)");
        assert!(ok.success(), "mount -t tmpfs {}", dir.display());
        Tmpfs(dir)
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_keeps_the_streams_and_names_the_merge_that_renders_them() {
    require_root!();
    let fs = Tmpfs::mount(scratch("full-disk").join("mnt"), "256k");
    let out = fs.0.join("full.pftrace");
    let streams = fs.0.join("full.pftrace.streams");
    // About 40,000 records: megabytes of streams for 256 KiB.
    let run = Command::new(kreplay_bin())
        .args(["trace", "-q", "-o", out.to_str().unwrap(), "--"])
        .arg(workload("high_qps"))
        .args(["1", "5000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    let merge = format!("kreplay merge {} -o {}", streams.display(), out.display());
    let error = stderr.lines().last().unwrap();
    let expected = format!(
        "kreplay: error: the stream files written so far are kept in {}; once what follows is \
         fixed (a full disk: free space), `{merge}` renders the records they hold: ",
        streams.display()
    );
    assert!(error.starts_with(&expected), "{stderr}");
    assert!(
        error.ends_with("No space left on device (os error 28)"),
        "{stderr}"
    );
    // Room made, the command named renders what the kept streams hold.
    fs.resize("64m");
    let merged = Command::new(kreplay_bin())
        .args(merge.split(' ').skip(1))
        .output()
        .unwrap();
    let merge_err = String::from_utf8_lossy(&merged.stderr);
    assert!(merged.status.success(), "{merge_err}");
    let d = decode_trace(&out);
    let high_qps_calls = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap())
        .filter(|s| s["name"] == "hipMalloc")
        .count();
    assert!(high_qps_calls > 0, "{merge_err}");
}
