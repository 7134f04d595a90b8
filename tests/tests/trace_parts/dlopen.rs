//! A runtime library a process dlopens after `kreplay trace -p` attached is traced from its
//! first call.
use std::{
    io::{BufRead, Write},
    process::Command,
};

use kreplay_tests::{decode_trace, make_sim, require_root, sim_dir};

use super::{assert_valid, counts, expect, hip_only, out_path, thread_tracks, trace_pid};

#[test]
fn a_runtime_dlopened_after_attach_is_traced_from_its_first_call() {
    require_root!();
    make_sim(&["hsa", "hip"]);
    let sim = sim_dir();
    let exe = super::dlopen_target("dlopen_target", true);
    let out = out_path("dlopen");
    let n = 20u64;
    let (mut child, mut child_out) = super::spawn_ready(
        Command::new(&exe)
            .arg(n.to_string())
            .env("LD_LIBRARY_PATH", &sim),
    );
    let mut line = String::new();
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap();
    assert!(
        !maps.contains("libamdhip64"),
        "HIP is not mapped before the dlopen"
    );
    let (mut kreplay, watch) = trace_pid(&out, child.id());
    // The target dlopens HIP, makes its calls and exits within milliseconds: far inside one
    // rescan tick (200 ms), so only probes attached ahead of the dlopen can see them.
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    child_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    assert!(child.wait().unwrap().success());
    let status = kreplay.wait().unwrap();
    let stderr = watch.finish();
    assert!(status.success(), "{stderr}");
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(
        hip_only(&counts(&d, &threads[0].0)),
        expect(&[("hipFree", n), ("hipMalloc", n)])
    );
}
