//! `kreplay trace --all`: processes started after tracing began are traced, each with exact
//! call counts.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use kreplay_tests::{decode_trace, kreplay_bin, make_sim, require_root, sim_dir, workload};

use super::{StderrWatch, assert_valid, counts, expect, hip_only, out_path, thread_tracks};

#[test]
fn all_traces_two_processes_started_after_it_with_exact_counts() {
    require_root!();
    let _one = super::one_all_trace();
    make_sim(&["hsa", "hip"]);
    let out = out_path("all");
    let sim = sim_dir();
    // The sim's libraries are not in the system's library paths: name them.
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "--all", "-o", out.to_str().unwrap(), "--lib"])
        .arg(sim.join("libamdhip64.so.6"))
        .arg("--lib")
        .arg(sim.join("libhsa-runtime64.so.1"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing every process");
    // (buffers, iterations) of each saxpy run: calls scale with both.
    let runs = [(2u64, 3u64), (3, 2)];
    let mut kids: Vec<_> = runs
        .iter()
        .map(|(b, i)| {
            Command::new(workload("saxpy"))
                .args([b.to_string(), "1000".to_string(), i.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = kids.iter().map(|k| k.id()).collect();
    for k in &mut kids {
        assert!(k.wait().unwrap().success());
    }
    // SAFETY: plain signal send: --all runs until stopped.
    assert_eq!(unsafe { libc::kill(kreplay.id() as i32, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(300);
    while kreplay.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "kreplay did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = watch.finish();
    assert_eq!(kreplay.wait().unwrap().code(), Some(0), "{stderr}");
    assert!(Path::new(&out).exists());
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    // Other tests may run sim workloads at the same time: only these two pids are checked.
    for (pid, (nbuf, iters)) in pids.iter().zip(runs) {
        let mine: Vec<_> = threads
            .iter()
            .filter(|t| t.2 == *pid as u64)
            .map(|t| hip_only(&counts(&d, &t.0)))
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            mine,
            vec![expect(&[
                ("hipDeviceSynchronize", 1),
                ("hipFree", 2 * nbuf),
                ("hipLaunchKernel", nbuf * iters),
                ("hipMalloc", 2 * nbuf),
                ("hipMemcpy", 3 * nbuf),
            ])],
            "pid {pid}"
        );
    }
}
