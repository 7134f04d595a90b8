//! `kreplay replay --probes`: the runtime calls kreplay makes itself while it snapshots,
//! replays and restores (real uprobes see them like the application's) are told apart in the
//! merged trace: the application's thread track holds exactly the calls the program makes,
//! kreplay's are on the thread's "kreplay (replay)" child track, the live-bytes counter and
//! the printed summary count only the application's.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use kreplay_tests::{cuda_sim, decode_trace, kreplay_bin, require_root, scratch, workload};
use serde_json::Value;

const OWN_TRACK: &str = "kreplay (replay)";

/// Runs `kreplay replay --probes --passes PASSES -o TRACE -- EXE ARGS`; returns the decoded
/// trace and stderr.
fn replay_with_probes(
    trace: &Path,
    passes: u32,
    exe: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> (Value, String) {
    let out = Command::new(kreplay_bin())
        .args(["replay", "--probes", "--passes", &passes.to_string(), "-o"])
        .arg(trace)
        .arg("--")
        .arg(exe)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run kreplay replay --probes");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let d = decode_trace(trace);
    assert_eq!(d["errors"], serde_json::json!([]), "decoder errors");
    (d, stderr)
}

/// The uuids of the tracks of `kind` named `name`.
fn tracks(d: &Value, kind: &str, name: &str) -> Vec<String> {
    d["tracks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["kind"] == kind && t["name"] == name)
        .map(|(u, _)| u.clone())
        .collect()
}

fn slices<'a>(d: &'a Value, track: &str) -> &'a [Value] {
    d["slices"][track].as_array().map_or(&[], Vec::as_slice)
}

/// Slices per name on `track` (at `depth`, or every depth).
fn counts(d: &Value, track: &str, depth: Option<u64>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in slices(d, track) {
        if depth.is_none_or(|want| s["depth"] == want) {
            *m.entry(s["name"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    m
}

fn map(v: &[(&str, u64)]) -> BTreeMap<String, u64> {
    v.iter().map(|&(k, n)| (k.to_owned(), n)).collect()
}

/// The values of the counter track named `name`.
fn counter(d: &Value, name: &str) -> Vec<i64> {
    let t = tracks(d, "counter", name);
    assert_eq!(t.len(), 1, "one counter {name:?}");
    d["counters"][&t[0]]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .collect()
}

/// The `calls` column of API `name` in the printed summary.
fn summary_calls(stderr: &str, name: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 8 && f[0] == name).then(|| f[1].parse().unwrap())
    })
}

#[test]
fn on_cuda_the_tools_own_driver_calls_go_on_the_kreplay_track_and_out_of_the_apps_counts() {
    require_root!();
    let sim = cuda_sim("own-calls-cuda");
    let trace = scratch("own-calls").join("cuda.pftrace");
    let passes = 4;
    let env = [("LD_LIBRARY_PATH", sim.dir.as_path())];
    let (d, stderr) = replay_with_probes(&trace, passes, &sim.linked, &["inplace"], &env);

    // tests/cuda-sim/app.c `inplace`: two allocations and uploads, one kernel lookup, one
    // launch (taken by the tool's wrapper, so the driver never sees it from the program), one
    // synchronize, one download. Exactly these are the program's.
    let thread = tracks(&d, "thread", "app_linked");
    assert_eq!(thread.len(), 1);
    let thread = &thread[0];
    assert_eq!(
        counts(&d, thread, None),
        map(&[
            ("cuCtxSynchronize", 1),
            ("cuMemAlloc_v2", 2),
            ("cuMemcpyDtoH_v2", 1),
            ("cuMemcpyHtoD_v2", 2),
            ("cuModuleGetFunction", 1),
        ])
    );

    // kreplay's, under that thread: the real launch once per pass, and one device allocation
    // carved into a copy per snapshot region (x, y and the module variable `hits`, each piece
    // aligned to 256 bytes), allocated and kept for the next replay (not freed).
    let own = tracks(&d, "named", OWN_TRACK);
    assert_eq!(own.len(), 1, "one kreplay track");
    let own = &own[0];
    assert_eq!(d["tracks"][own]["parent"].to_string(), *thread);
    let mine = counts(&d, own, None);
    assert_eq!(mine["cuLaunchKernel"], u64::from(passes), "{mine:?}");
    assert_eq!(
        (mine["cuMemAlloc_v2"], mine.get("cuMemFree_v2").copied()),
        (1, None)
    );
    let snapshot: Vec<&Value> = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|s| s.as_array().unwrap())
        .filter(|s| s["name"] == "snapshot")
        .collect();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0]["args"]["regions"]["uint"], 3);
    let footprint = snapshot[0]["args"]["bytes"]["uint"].as_u64().unwrap();
    assert_eq!(footprint, 16384 + 16384 + 4);
    let allocated: u64 = slices(&d, own)
        .iter()
        .filter(|s| s["name"] == "cuMemAlloc_v2")
        .map(|s| s["args"]["size"]["uint"].as_u64().unwrap())
        .sum();
    assert_eq!(
        allocated,
        16384 + 16384 + 256,
        "kreplay allocated its snapshot copies"
    );

    // Live bytes: the program's two 16 KiB buffers only (it never frees them).
    assert_eq!(
        counter(&d, "live bytes (CUDA driver, all devices)"),
        [16384, 32768]
    );

    // The printed summary counts the program's calls; kreplay's are listed apart, and the
    // list matches its track.
    assert_eq!(summary_calls(&stderr, "cuMemAlloc_v2"), Some(2), "{stderr}");
    assert_eq!(summary_calls(&stderr, "cuMemFree_v2"), None, "{stderr}");
    assert_eq!(summary_calls(&stderr, "cuLaunchKernel"), None, "{stderr}");
    assert!(
        stderr.contains("still allocated at end: pid ")
            && stderr.contains(" (CUDA driver): 32768 bytes"),
        "{stderr}"
    );
    let listed: BTreeMap<String, u64> = stderr
        .lines()
        .find_map(|l| l.strip_prefix("kreplay: kreplay's own runtime calls (on the \"kreplay (replay)\" tracks, left out above): "))
        .expect("the own-calls line")
        .split(", ")
        .map(|e| {
            let (name, n) = e.rsplit_once(" x").unwrap();
            (name.to_owned(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(listed, mine);
}

#[test]
fn on_hsa_the_apps_thread_keeps_exactly_its_calls_while_kernels_are_replayed() {
    require_root!();
    let exe = workload("saxpy");
    let trace = scratch("own-calls").join("hsa.pftrace");
    // One buffer pair of 20000 floats, two launches, each replayed three times.
    let (d, stderr) = replay_with_probes(&trace, 3, &exe, &["1", "20000", "2"], &[]);
    let thread = tracks(&d, "thread", "saxpy");
    assert_eq!(thread.len(), 1);
    let hip: BTreeMap<String, u64> = counts(&d, &thread[0], Some(0))
        .into_iter()
        .filter(|(n, _)| n.starts_with("hip"))
        .collect();
    // tests/rocm-sim/workloads/saxpy.c: hipMalloc x, y; hipMemcpy x, y up and y down; two
    // launches; one device synchronize; hipFree x, y.
    assert_eq!(
        hip,
        map(&[
            ("hipDeviceSynchronize", 1),
            ("hipFree", 2),
            ("hipLaunchKernel", 2),
            ("hipMalloc", 2),
            ("hipMemcpy", 3),
        ])
    );
    // Both dispatches were replayed, inside the application's launch calls...
    let passes = d["slices"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|s| s.as_array().unwrap())
        .filter(|s| s["name"].as_str().unwrap().starts_with("pass "))
        .count();
    assert_eq!(passes, 6);
    // ...and the tool reached the runtime through the HSA API table it was given, below the
    // exported entry points the probes are on: nothing of kreplay's was probed, so no
    // application call was taken for kreplay's and no kreplay track exists.
    assert_eq!(tracks(&d, "named", OWN_TRACK), Vec::<String>::new());
    assert_eq!(
        counter(&d, "live bytes (HIP, device not set during trace)"),
        [80000, 160000, 80000, 0]
    );
    assert_eq!(summary_calls(&stderr, "hipMalloc"), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "kreplay: kreplay's own runtime calls (on the \"kreplay (replay)\" tracks, left out above): none"
        ),
        "{stderr}"
    );
}
