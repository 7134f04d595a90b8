//! `kreplay trace -p PID --gpu` on a running CUDA program without a GPU: tests/cuda-sim's
//! driver, its stand-in CUPTI, and its `loop` program (three worker threads launching and
//! copying, one round per line on stdin). kreplay-tool is loaded into the running process,
//! records exactly the GPU work of the rounds run while kreplay traces, with flows from the
//! calls that made it; a second kreplay reuses the loaded tool; a kreplay killed with SIGKILL
//! leaves the tool stopped (a later attach finds it free); `kreplay replay -p PID` replays a
//! named kernel mid-loop through the stand-in CUPTI's launch callbacks; the program's output
//! is the bare run's in every case. The real CUPTI is exercised on the H200 by `tests/gpu/attach.sh`.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kreplay_tests::attach_session::{interrupt, replay, replay_ended, stop, trace_gpu as attach};
use kreplay_tests::rounds::Rounds;
use kreplay_tests::trace_json::{end, gpu_groups, slice_at, slices_on, ts};
use kreplay_tests::{cuda_sim, decode_trace, kreplay_bin, require_root, scratch};

/// Kernel launches, copies and flows one round makes (three workers: a copy in, three
/// launches, a copy out).
const KERNELS_PER_ROUND: usize = 9;
const COPIES_PER_ROUND: usize = 6;

/// The `loop` program, started.
fn start_loop() -> Rounds {
    start_loop_with(&[])
}

/// The `loop` program, started with `env` added.
fn start_loop_with(env: &[(&str, &Path)]) -> Rounds {
    let sim = cuda_sim("attach-cuda");
    let mut c = Command::new(&sim.linked);
    c.arg("loop")
        .env("LD_LIBRARY_PATH", &sim.dir)
        .env_remove("CUDA_INJECTION64_PATH")
        .envs(env.iter().copied());
    Rounds::start(c)
}

/// What the program prints with `rounds` rounds and no kreplay.
fn bare(rounds: usize) -> String {
    let mut l = start_loop();
    l.rounds(rounds);
    l.finish()
}

fn out_path(name: &str) -> PathBuf {
    let out = scratch("attach_cuda").join(format!("{name}.pftrace"));
    let _ = std::fs::remove_file(&out);
    out
}

/// Checks that the trace holds the GPU work of exactly `rounds` rounds, each kernel and copy
/// with a flow from the call that made it, on the three workers' threads.
fn check_gpu_work(out: &Path, rounds: usize) {
    let d = decode_trace(out);
    assert_eq!(d["errors"], serde_json::json!([]));
    // Each session's stream file describes the device, a second session's too (the tool met
    // it in the first).
    let groups = gpu_groups(&d);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    assert_eq!(
        g.name,
        format!("GPU 0: KRSim CUDA Device (app_linked {})", g.pid)
    );
    assert_eq!(g.tracks, ["GPU busy %", "stream 7", "stream 7 copies"]);
    let kernels = slices_on(&d, "stream 7");
    let (copies, kernels): (Vec<_>, Vec<_>) = kernels
        .into_iter()
        .partition(|(t, _)| *t == "stream 7 copies");
    assert_eq!(kernels.len(), KERNELS_PER_ROUND * rounds, "{kernels:?}");
    assert!(kernels.iter().all(|(_, k)| k["name"] == "axpy_inplace"));
    assert_eq!(copies.len(), COPIES_PER_ROUND * rounds, "{copies:?}");
    let flows = d["flows"].as_object().unwrap();
    assert_eq!(flows.len(), (KERNELS_PER_ROUND + COPIES_PER_ROUND) * rounds);
    let mut threads = BTreeSet::new();
    for f in flows.values() {
        let (call, gpu) = (slice_at(&d, &f["from"][0]), slice_at(&d, &f["to"][0]));
        let name = call["name"].as_str().unwrap();
        assert!(
            ["cuLaunchKernel", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2"].contains(&name),
            "{name}"
        );
        // The stand-in runs the work inside the call: one clock for both.
        assert!(
            ts(call) <= ts(gpu) && end(gpu) <= end(call),
            "{call} / {gpu}"
        );
        threads.insert(f["from"][0]["track"].as_u64().unwrap());
    }
    assert_eq!(threads.len(), 3, "one thread track per worker");
}

#[test]
fn attached_mid_loop_then_again_the_trace_holds_exactly_the_rounds_run_meanwhile() {
    require_root!();
    let want = bare(6);
    let mut l = start_loop();
    l.rounds(1);
    let first = out_path("first");
    let (k, w) = attach(&first, l.pid());
    l.rounds(2);
    let stderr = stop(k, w);
    assert!(
        stderr.contains(&format!(
            "kreplay: process {}: GPU timeline on (kreplay-tool loaded,",
            l.pid()
        )),
        "{stderr}"
    );
    l.rounds(1);
    // The tool is loaded now: the second kreplay finds it and starts a new session.
    let second = out_path("second");
    let (k, w) = attach(&second, l.pid());
    l.rounds(1);
    let stderr = stop(k, w);
    assert!(
        stderr.contains("GPU timeline on (kreplay-tool already loaded,"),
        "{stderr}"
    );
    l.rounds(1);
    assert_eq!(l.finish(), want);
    check_gpu_work(&first, 2);
    check_gpu_work(&second, 1);
}

#[test]
fn the_first_session_subscribes_to_cuptis_callbacks_before_it_turns_activity_on() {
    require_root!();
    // The real CUPTI 13 crashed processes whose first callback subscriber (a replay session's)
    // came after an activity session; the tool subscribes once, first.
    let order = scratch("attach_cuda").join("cupti-order");
    let _ = std::fs::remove_file(&order);
    let want = bare(3);
    let mut l = start_loop_with(&[("FAKECUPTI_ORDER_FILE", &order)]);
    l.rounds(1);
    let out = out_path("order");
    let (k, w) = attach(&out, l.pid());
    l.rounds(1);
    stop(k, w);
    l.rounds(1);
    assert_eq!(l.finish(), want);
    assert_eq!(
        std::fs::read_to_string(&order).unwrap(),
        "first cuptiActivityEnable after 1 cuptiSubscribe\n"
    );
    check_gpu_work(&out, 1);
}

#[test]
fn kreplay_killed_mid_trace_leaves_the_tool_stopped_and_the_program_unchanged() {
    require_root!();
    let want = bare(5);
    let mut l = start_loop();
    l.rounds(1);
    let killed = out_path("killed");
    let (mut k, w) = attach(&killed, l.pid());
    l.rounds(1);
    k.kill().unwrap();
    k.wait().unwrap();
    drop(w);
    // The killed kreplay's streams stay; its tool session ended with its socket.
    l.rounds(2);
    // A session still running would answer "busy": the next kreplay gets the tool.
    let after = out_path("after-kill");
    let (k, w) = attach(&after, l.pid());
    l.rounds(1);
    let stderr = stop(k, w);
    assert!(
        stderr.contains("GPU timeline on (kreplay-tool already loaded,"),
        "{stderr}"
    );
    assert_eq!(l.finish(), want);
    check_gpu_work(&after, 1);
    let streams = PathBuf::from(format!("{}.streams", killed.display()));
    let _ = std::fs::remove_dir_all(streams);
}

#[test]
fn a_second_kreplay_during_a_session_is_refused_in_one_line_and_traces_api_calls_only() {
    require_root!();
    let want = bare(2);
    let mut l = start_loop();
    let (k1, w1) = attach(&out_path("holder"), l.pid());
    let out = Command::new(kreplay_bin())
        .args(["trace", "--gpu", "--duration", "1s", "-o"])
        .arg(out_path("second-holder"))
        .arg("-p")
        .arg(l.pid().to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = format!(
        "kreplay: --gpu: no GPU timeline for process {0}: process {0}: another kreplay is attached to it (one session at a time); tracing its API calls only",
        l.pid()
    );
    assert!(stderr.lines().any(|s| s == line), "{stderr}");
    l.rounds(2);
    stop(k1, w1);
    assert_eq!(l.finish(), want);
}

#[test]
fn a_process_that_exits_while_attached_leaves_its_last_gpu_work_in_the_trace() {
    require_root!();
    let want = bare(2);
    let mut l = start_loop();
    let out = out_path("exits");
    let (mut k, w) = attach(&out, l.pid());
    l.rounds(2);
    assert_eq!(l.finish(), want);
    // kreplay ends with its only target; the tool flushed its stream in the exit handlers.
    let status = k.wait().unwrap();
    let stderr = w.finish();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("ending the GPU timeline"), "{stderr}");
    assert!(
        stderr.contains("GPU timeline off: 30 GPU records"),
        "{stderr}"
    );
    check_gpu_work(&out, 2);
}

#[test]
fn replay_in_a_running_cuda_process_replays_the_named_kernel_n_times_and_changes_nothing() {
    require_root!();
    // Each worker's y += a*x in place three times a round: a pass not restored before the
    // next, or after the last (the application's own launch follows the passes), changes
    // every later sum the program prints.
    let want = bare(6);
    let mut l = start_loop();
    l.rounds(1);
    let pid = l.pid();
    // Four replays of three passes mid-loop; the tool says when the fourth is written and the
    // session ends by itself during the round.
    let args = [
        "--kernel",
        "^axpy",
        "--passes",
        "3",
        "--max-dispatches",
        "4",
    ];
    let first = out_path("replay");
    let (k, w) = replay(&first, pid, &args);
    l.rounds(1);
    let (axpy, stderr) = replay_ended(k, w, "axpy_inplace");
    // The replays' device named by the driver, the workers' stream by its handle (0: the
    // default stream); each snapshot, taken before its dispatch's first pass, on the stream's
    // replay track.
    let groups = gpu_groups(&decode_trace(&first));
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(
        groups[0].name,
        format!("GPU 0: KRSim CUDA Device (app_linked {pid})")
    );
    assert_eq!(
        groups[0].tracks,
        ["GPU busy %", "default stream", "default stream replay"]
    );
    assert_eq!(axpy["dispatches"], "4", "{axpy:?}");
    assert_eq!(axpy["replayed"], "4", "{axpy:?}");
    assert_eq!(axpy["passes"], "3", "{axpy:?}");
    assert_eq!(axpy["nondet"], "0", "{axpy:?}");
    assert!(
        stderr.contains(&format!(
            "kreplay: process {pid}: 4 dispatches replayed (--max-dispatches)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.starts_with("kreplay: warning: CUPTI 13 has crashed processes whose first CUPTI callback subscriber came after"),
        "{stderr}"
    );
    // Killed with SIGKILL mid-session: the tool stops replaying on its own.
    let (mut k, w) = replay(&out_path("replay-killed"), pid, &["--passes", "2"]);
    l.rounds(1);
    k.kill().unwrap();
    k.wait().unwrap();
    drop(w);
    // The next kreplay gets the tool: every launch of its round replayed twice.
    let (k, w) = replay(&out_path("replay-again"), pid, &["--passes", "2"]);
    l.rounds(1);
    // The tool reports its counts at most every 500 ms, when they changed.
    std::thread::sleep(Duration::from_millis(1200));
    interrupt(&k);
    let (axpy, stderr) = replay_ended(k, w, "axpy_inplace");
    let last = stderr
        .lines()
        .rfind(|l| l.contains("replay progress"))
        .unwrap_or_else(|| panic!("no progress line: {stderr}"));
    assert!(
        last.contains(&format!(
            "replayed={KERNELS_PER_ROUND} passes={}",
            2 * KERNELS_PER_ROUND
        )),
        "{last}"
    );
    let round = KERNELS_PER_ROUND.to_string();
    assert_eq!(axpy["dispatches"], round, "{axpy:?}");
    assert_eq!(axpy["replayed"], round, "{axpy:?}");
    assert_eq!(axpy["passes"], "2", "{axpy:?}");
    l.rounds(2);
    assert_eq!(l.finish(), want);
}
