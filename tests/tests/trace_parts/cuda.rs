//! `kreplay trace` on CUDA without a GPU: tests/cuda-sim's stand-in libcuda.so.1 under its
//! driver-API program, linked and runtime-style (dlopen + cuGetProcAddress_v2): exact calls,
//! the kernel named by cuModuleGetFunction, the process's CUDA live bytes.
use std::{path::PathBuf, process::Command};

use kreplay_tests::{cuda_sim, decode_trace, kreplay_bin, require_root};
use serde_json::Value;

use super::{assert_valid, counter_values, counts, out_path, thread_tracks};

/// (directory holding libcuda.so.1, the linked program, the runtime-style program).
fn built() -> (&'static PathBuf, &'static PathBuf, &'static PathBuf) {
    let c = cuda_sim("trace-cuda-sim");
    (&c.dir, &c.linked, &c.runtime)
}

#[test]
fn cuda_launches_name_their_module_function_linked_and_runtime_style() {
    require_root!();
    let (dir, linked, runtime) = built();
    for (style, program) in [("linked", linked), ("runtime", runtime)] {
        let out = out_path(&format!("cuda-{style}"));
        let r = Command::new(kreplay_bin())
            .args(["trace", "-q", "-o", out.to_str().unwrap(), "--"])
            .arg(program)
            .arg("inplace")
            .env("LD_LIBRARY_PATH", dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{style}: {stderr}");
        assert!(stderr.contains("events dropped: 0\n"), "{style}: {stderr}");
        let d = decode_trace(&out);
        assert_valid(&d);
        let threads = thread_tracks(&d);
        assert_eq!(threads.len(), 1, "{style}: {threads:?}");
        let c = counts(&d, &threads[0].0);
        let cuda: Vec<(&str, u64)> = c
            .iter()
            .filter(|(k, _)| k.starts_with("cu"))
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            cuda,
            [
                ("cuCtxSynchronize", 1),
                ("cuLaunchKernel", 1),
                ("cuMemAlloc_v2", 2),
                ("cuMemcpyDtoH_v2", 1),
                ("cuMemcpyHtoD_v2", 2),
                ("cuModuleGetFunction", 1),
            ],
            "{style}"
        );
        let launch = d["slices"][&threads[0].0]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "cuLaunchKernel")
            .unwrap();
        assert_eq!(
            launch["args"]["kernel"]["string"],
            Value::from("axpy_inplace")
        );
        assert_eq!(launch["args"]["grid"]["string"], "16x1x1", "{launch}");
        // Two 4096-float buffers, never freed: the program exits with them.
        assert_eq!(
            counter_values(&d, "live bytes (CUDA driver, all devices)"),
            [16384, 32768]
        );
        let row = stderr.lines().find(|l| l.starts_with("axpy_inplace "));
        assert_eq!(
            row.and_then(|l| l.split_whitespace().nth(1)),
            Some("1"),
            "{style}: {stderr}"
        );
    }
}

/// A driver-API program attached after it made its function handle: no naming call is seen,
/// and the handle is heap memory with no symbol; each launch is named from the driver's
/// object, whose second word points to the kernel's name (the sim lays it out as the driver
/// does).
#[test]
fn driver_launches_after_a_late_attach_are_named_from_the_function_object() {
    use std::io::{BufRead, Write};
    require_root!();
    let (dir, linked, _) = built();
    let (mut app, mut app_out) = super::spawn_ready(
        Command::new(linked)
            .arg("attach")
            .env("LD_LIBRARY_PATH", dir),
    );
    let mut line = String::new();
    let out = out_path("cuda-late-attach");
    let mut kreplay = Command::new(kreplay_bin())
        .args(["trace", "-o", out.to_str().unwrap(), "-p"])
        .arg(app.id().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = super::StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    app.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    app_out.read_line(&mut line).unwrap();
    assert_eq!(line, "attach done\n");
    // The records are drained while the process lives on, as a training job does.
    std::thread::sleep(std::time::Duration::from_millis(500));
    app.stdin.as_mut().unwrap().write_all(b"end\n").unwrap();
    assert!(app.wait().unwrap().success());
    assert!(kreplay.wait().unwrap().success());
    let stderr = watch.finish();
    let d = decode_trace(&out);
    assert_valid(&d);
    let threads = thread_tracks(&d);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let c = counts(&d, &threads[0].0);
    assert_eq!(c.get("cuModuleGetFunction"), None, "{c:?}");
    let names: Vec<&str> = d["slices"][&threads[0].0]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "cuLaunchKernel")
        .map(|s| s["args"]["kernel"]["string"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(names, vec!["axpy_inplace"; 5], "{stderr}");
}
