//! A runtime library a process dlopens after `kreplay trace -p` attached is traced from its
//! first call.
use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use kreplay_tests::{cc, decode_trace, make_sim, require_root, scratch, sim_dir, workspace_root};

use super::{assert_valid, counts, expect, hip_only, out_path, thread_tracks, trace_pid};

#[test]
fn a_runtime_dlopened_after_attach_is_traced_from_its_first_call() {
    require_root!();
    make_sim(&["hsa", "hip"]);
    let sim = sim_dir();
    let exe = scratch("hip-programs").join("dlopen_target");
    let src = workspace_root().join("tests/trace/dlopen_target.c");
    let libdir = format!("-L{}", sim.display());
    let rpath = format!("-Wl,-rpath,{}", sim.display());
    cc(&[
        "-std=gnu11",
        "-O1",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
        &libdir,
        "-l:libhsa-runtime64.so.1",
        "-ldl",
        &rpath,
    ]);
    let out = out_path("dlopen");
    let n = 20u64;
    let mut child = Command::new(&exe)
        .arg(n.to_string())
        .env("LD_LIBRARY_PATH", &sim)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child_out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    child_out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
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
