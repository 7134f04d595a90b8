//! `kreplay merge` never destroys a file: an output that is one of the inputs is refused, and
//! a merge that fails or is interrupted leaves the old output as it was and no partial file.
use std::{
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use kreplay_common::stream::{Record, StreamKind};
use kreplay_tests::{decode_trace, kreplay_bin};

use super::{MAIN, call, fresh_dir, names, stderr, write_stream};

/// `kreplay merge INPUTS -o OUTPUT`, leaving OUTPUT as it is before the run.
fn merge_keeping(inputs: &[&Path], output: &Path) -> Output {
    Command::new(kreplay_bin())
        .arg("merge")
        .args(inputs)
        .arg("-o")
        .arg(output)
        .output()
        .expect("run kreplay merge")
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

/// A probe stream of `n` hipDeviceSynchronize calls of 50 ns, one every 100 ns.
fn calls(n: u64) -> Vec<Record> {
    let mut v = names(MAIN, "main");
    v.extend((0..n).map(|i| call(MAIN, "hipDeviceSynchronize", 1000 + i * 100, 1050 + i * 100)));
    v
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_left_byte_identical() {
    let dir = fresh_dir("self-output");
    let input = dir.join("probes-500-501.krs");
    write_stream(&input, StreamKind::Probes, &calls(10), 4);
    let before = std::fs::read(&input).unwrap();
    let hard = dir.join("hard-link.pftrace");
    std::fs::hard_link(&input, &hard).unwrap();
    let sym = dir.join("sym-link.pftrace");
    std::os::unix::fs::symlink(&input, &sym).unwrap();
    // The same file by its own name, through a directory input, a hard link and a symlink.
    for (inputs, output) in [
        (vec![input.as_path()], input.clone()),
        (vec![dir.as_path()], input.clone()),
        (vec![input.as_path()], hard.clone()),
        (vec![input.as_path()], sym.clone()),
    ] {
        let o = merge_keeping(&inputs, &output);
        assert_eq!(o.status.code(), Some(1), "{inputs:?} -o {output:?}");
        assert_eq!(
            stderr(&o).lines().collect::<Vec<_>>(),
            [format!(
                "kreplay: error: the output {} is also an input ({}): write the trace elsewhere",
                output.display(),
                input.display()
            )],
            "{inputs:?} -o {output:?}"
        );
        assert_eq!(std::fs::read(&input).unwrap(), before);
    }
    assert_eq!(
        listing(&dir),
        [
            "hard-link.pftrace",
            "probes-500-501.krs",
            "sym-link.pftrace"
        ]
    );
}

#[test]
fn a_merge_that_fails_while_writing_leaves_the_old_trace_and_no_partial_file() {
    let dir = fresh_dir("failed-write");
    let input = dir.join("probes-500-501.krs");
    write_stream(&input, StreamKind::Probes, &calls(2000), 256);
    let out = dir.join("run.pftrace");
    std::fs::write(&out, b"the previous trace").unwrap();
    let mut cmd = Command::new(kreplay_bin());
    cmd.arg("merge").arg(&input).arg("-o").arg(&out);
    // SAFETY: between fork and exec the child only calls setrlimit and signal, both
    // async-signal-safe, on memory of its own stack.
    unsafe {
        cmd.pre_exec(|| {
            // No file may grow past 4 KiB: the trace (tens of KiB) fails with EFBIG, not
            // SIGXFSZ, since the signal is ignored.
            let lim = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("kreplay: error: writing {}: ", out.display()))
            && err.trim_end().ends_with("File too large (os error 27)"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous trace");
    assert_eq!(listing(&dir), ["probes-500-501.krs", "run.pftrace"]);
    // Without the limit the same merge replaces the old trace.
    let o = merge_keeping(&[&input], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = decode_trace(&out);
    assert_eq!(d["errors"], serde_json::json!([]));
    assert_eq!(listing(&dir), ["probes-500-501.krs", "run.pftrace"]);
}

#[test]
fn an_interrupted_merge_leaves_the_old_trace_and_no_partial_file() {
    let dir = fresh_dir("interrupted");
    let input = dir.join("probes-500-501.krs");
    write_stream(&input, StreamKind::Probes, &calls(400_000), 4096);
    let out = dir.join("run.pftrace");
    std::fs::write(&out, b"the previous trace").unwrap();
    let child = Command::new(kreplay_bin())
        .arg("merge")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once the trace is being written under its temporary name.
    let started = Instant::now();
    let tmp = format!(".run.pftrace.tmp-{}", child.id());
    while !listing(&dir).contains(&tmp) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {tmp}: {:?}",
            listing(&dir)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill has no memory effects; the pid is our running child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).lines().collect::<Vec<_>>(),
        [format!(
            "kreplay: interrupted: {} left as it was",
            out.display()
        )]
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous trace");
    assert_eq!(listing(&dir), ["probes-500-501.krs", "run.pftrace"]);
}
