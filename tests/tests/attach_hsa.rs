//! `kreplay trace -p PID --gpu` on a running HSA program of the simulated ROCm runtime
//! (`tests/trace/gpu_timeline.c rounds`). ROCR loads tools only at `hsa_init`, so the program
//! is started with kreplay-tool in `HSA_TOOLS_LIB` and `KREPLAY_ATTACH=1`: the tool passes
//! everything through until a kreplay attaches, records exactly the GPU work of the rounds run
//! while attached, goes back to passing through when kreplay ends or is killed, and serves
//! the next kreplay; the program's output is a bare run's. A program started without the
//! opt-in is refused in one line and the tool is not loaded into it.
use std::path::{Path, PathBuf};
use std::process::Command;

use kreplay_tests::attach_session::{interrupt, replay, replay_ended, stop, trace_gpu as attach};
use kreplay_tests::rounds::Rounds;
use kreplay_tests::trace_json::{gpu_groups, slices_on};
use kreplay_tests::{
    build_hip_program, decode_trace, kreplay_bin, make_sim, require_root, scratch,
};

/// Launches of `fill` per round.
const LAUNCHES: usize = 3;

fn program() -> PathBuf {
    make_sim(&["hsa", "hip"]);
    let src = kreplay_tests::workspace_root().join("tests/trace/gpu_timeline.c");
    build_hip_program(&src, "gpu_timeline")
}

fn tool() -> PathBuf {
    kreplay_bin().with_file_name("libkreplay_tool.so")
}

/// The `rounds` program, started (with the tool waiting for an attach when `opt_in`).
fn start_rounds(opt_in: bool) -> Rounds {
    let mut c = Command::new(program());
    c.args(["rounds", &LAUNCHES.to_string()])
        .env_remove("HSA_TOOLS_LIB")
        .env("KRSIM_KERNEL_LATENCY_US", "200");
    if opt_in {
        c.env("HSA_TOOLS_LIB", tool()).env("KREPLAY_ATTACH", "1");
    }
    Rounds::start(c)
}

fn bare(rounds: usize) -> String {
    let mut r = start_rounds(false);
    r.rounds(rounds);
    r.finish()
}

fn out_path(name: &str) -> PathBuf {
    let out = scratch("attach_hsa").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&out);
    out
}

/// The trace holds the kernels and copies of exactly `rounds` rounds, with the GPU's times and
/// one flow each.
fn check_gpu_work(out: &Path, rounds: usize) {
    let d = decode_trace(out);
    assert_eq!(d["errors"], serde_json::json!([]));
    // Each session's stream file describes the agent: its queues were made before either.
    let groups = gpu_groups(&d);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    let handle = g.name.strip_prefix("GPU agent 0x").unwrap_or_default();
    let handle = &handle[..handle.find(':').unwrap_or(0)];
    assert!(
        !handle.is_empty() && handle.chars().all(|c| c.is_ascii_hexdigit()),
        "{g:?}"
    );
    assert_eq!(
        g.name,
        format!(
            "GPU agent 0x{handle}: KRSim Simulated GPU (gfx90a) ({} {})",
            g.process, g.pid
        )
    );
    let kernels = slices_on(&d, "queue ");
    assert_eq!(kernels.len(), LAUNCHES * rounds, "{kernels:?}");
    for (_, k) in &kernels {
        assert_eq!(k["name"], "fill");
        // The sim's added latency: a GPU time, not the instant of an unprofiled dispatch.
        assert!(k["dur"].as_u64().unwrap() >= 200_000, "{k}");
    }
    let copies = slices_on(&d, "copies");
    assert_eq!(copies.len(), 2 * rounds, "{copies:?}");
    assert_eq!(
        d["flows"].as_object().unwrap().len(),
        (LAUNCHES + 2) * rounds
    );
}

#[test]
fn an_opted_in_hsa_process_gets_the_gpu_timeline_only_while_kreplay_is_attached() {
    require_root!();
    let want = bare(6);
    let mut r = start_rounds(true);
    r.rounds(1);
    let first = out_path("first");
    let (k, w) = attach(&first, r.pid());
    r.rounds(2);
    let stderr = stop(k, w);
    assert!(
        stderr.contains("GPU timeline on (kreplay-tool already loaded,"),
        "{stderr}"
    );
    r.rounds(1);
    // Killed mid-trace: the tool goes back to passing through on its own.
    let (mut k, w) = attach(&out_path("killed"), r.pid());
    r.rounds(1);
    k.kill().unwrap();
    k.wait().unwrap();
    drop(w);
    let second = out_path("second");
    let (k, w) = attach(&second, r.pid());
    r.rounds(1);
    stop(k, w);
    assert_eq!(r.finish(), want);
    check_gpu_work(&first, 2);
    check_gpu_work(&second, 1);
    let _ = std::fs::remove_dir_all(out_path("killed").with_extension("pftrace.streams"));
}

#[test]
fn an_hsa_process_started_without_the_opt_in_is_refused_in_one_line_and_left_alone() {
    require_root!();
    let mut r = start_rounds(false);
    let out = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "--duration", "1s", "-o"])
        .arg(out_path("refused"))
        .arg("-p")
        .arg(r.pid().to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = format!(
        "kreplay: --gpu: no GPU timeline for process {0}: process {0} uses ROCm (HSA), whose runtime loads tools only at hsa_init: kreplay-tool can join only a process started with HSA_TOOLS_LIB={1} KREPLAY_ATTACH=1; tracing its API calls only",
        r.pid(),
        tool().canonicalize().unwrap().display()
    );
    assert!(stderr.lines().any(|s| s == line), "{stderr}");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", r.pid())).unwrap();
    assert!(!maps.contains("libkreplay_tool"), "the tool was not loaded");
    r.rounds(1);
    r.finish();
}

#[test]
fn replay_in_an_opted_in_hsa_process_replays_the_named_kernel_n_times_and_changes_nothing() {
    require_root!();
    let want = bare(8);
    let mut r = start_rounds(true);
    r.rounds(1);
    let args = [
        "--kernel",
        "^fill$",
        "--passes",
        "3",
        "--max-dispatches",
        "4",
    ];
    let (k, w) = replay(&out_path("replay"), r.pid(), &args);
    r.rounds(2);
    interrupt(&k);
    let (fill, _) = replay_ended(k, w, "fill");
    // The session ends once the 4th replay is written, during the second round: the round's
    // dispatches after it may or may not be in the trace.
    let seen: usize = fill["dispatches"].parse().unwrap();
    assert!((4..=2 * LAUNCHES).contains(&seen), "{fill:?}");
    assert_eq!(fill["replayed"], "4");
    assert_eq!(fill["passes"], "3");
    assert_eq!(fill["nondet"], "0");
    r.rounds(1);
    // With --max-dispatches a round's worth, the session ends by itself after that round:
    // kreplay is told once the last replay is written.
    let max = LAUNCHES.to_string();
    let (k, w) = replay(
        &out_path("replay-limit"),
        r.pid(),
        &[
            "--kernel",
            "^fill$",
            "--passes",
            "2",
            "--max-dispatches",
            &max,
        ],
    );
    r.rounds(1);
    let (fill, stderr) = replay_ended(k, w, "fill");
    assert_eq!(fill["dispatches"], max);
    assert_eq!(fill["replayed"], max);
    assert_eq!(fill["passes"], "2");
    assert!(
        stderr.contains(&format!(
            "kreplay: process {}: {max} dispatches replayed (--max-dispatches)",
            r.pid()
        )),
        "{stderr}"
    );
    // Killed mid-replay: the tool stops replaying on its own, the next session gets it.
    let (mut k, w) = replay(&out_path("replay-killed"), r.pid(), &args);
    r.rounds(1);
    k.kill().unwrap();
    k.wait().unwrap();
    drop(w);
    let (k, w) = replay(&out_path("replay-again"), r.pid(), &["--passes", "2"]);
    r.rounds(1);
    interrupt(&k);
    let (fill, _) = replay_ended(k, w, "fill");
    assert_eq!(fill["dispatches"], LAUNCHES.to_string());
    assert_eq!(fill["replayed"], LAUNCHES.to_string());
    assert_eq!(fill["passes"], "2");
    r.rounds(1);
    assert_eq!(r.finish(), want);
}
