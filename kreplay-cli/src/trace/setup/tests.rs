//! Tests of the steps that ready a trace: the command's environment, the followed roots and
//! their descendants, and whether `--all` holds new library files.
use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use super::*;

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_command_gets_its_env_pairs_then_nvtx_then_the_gpu_tool() {
    let dir = Path::new("/t/run.streams");
    let tool = Path::new("/k/libkreplay_tool.so");
    let none = |_: &str| None::<OsString>;
    let user = pairs(&[("LD_PRELOAD", "./x.so")]);
    // Without --gpu: the user's pairs, then kreplay-tool as NVTX injection library.
    let (env, injection) = command_env(&user, dir, Some(tool), None, none);
    assert_eq!(
        env,
        pairs(&[
            ("LD_PRELOAD", "./x.so"),
            ("NVTX_INJECTION64_PATH", "/k/libkreplay_tool.so"),
            ("KREPLAY_OUTPUT_DIR", "/t/run.streams"),
        ])
    );
    assert_eq!(injection, nvtx::Injection::Kreplay(dir.to_path_buf()));
    // With --gpu: the tool is injected in observe mode too, writing to the same directory.
    let (env, _) = command_env(&user, dir, Some(tool), Some(tool), none);
    assert_eq!(
        env,
        pairs(&[
            ("LD_PRELOAD", "./x.so"),
            ("NVTX_INJECTION64_PATH", "/k/libkreplay_tool.so"),
            ("KREPLAY_OUTPUT_DIR", "/t/run.streams"),
            ("CUDA_INJECTION64_PATH", "/k/libkreplay_tool.so"),
            ("HSA_TOOLS_LIB", "/k/libkreplay_tool.so"),
            ("KREPLAY_GPU_TIMELINE", "1"),
        ])
    );
}

#[test]
fn a_users_nvtx_library_is_kept_whether_inherited_or_given_with_env() {
    let dir = Path::new("/t/run.streams");
    let tool = Some(Path::new("/k/libkreplay_tool.so"));
    // Inherited, even when its value is not UTF-8.
    let inherited = |k: &str| {
        use std::os::unix::ffi::OsStringExt;
        (k == "NVTX_INJECTION64_PATH").then(|| OsString::from_vec(vec![0xff, b'x']))
    };
    let (env, injection) = command_env(&[], dir, tool, None, inherited);
    assert_eq!(env, Vec::new());
    assert_eq!(injection, nvtx::Injection::User);
    let user = pairs(&[("NVTX_INJECTION64_PATH", "/u/nvtx.so")]);
    let (env, injection) = command_env(&user, dir, tool, None, |_| None);
    assert_eq!(env, user);
    assert_eq!(injection, nvtx::Injection::User);
    // No tool found: the pairs alone.
    let (env, injection) = command_env(&[], dir, None, None, |_| None);
    assert_eq!(env, Vec::new());
    assert_eq!(injection, nvtx::Injection::NoTool);
}

#[test]
fn a_non_utf8_inherited_hsa_tools_lib_counts_as_unset_for_the_gpu_tool() {
    use std::os::unix::ffi::OsStringExt;
    let tool = Path::new("/k/libkreplay_tool.so");
    let inherited = |k: &str| (k == "HSA_TOOLS_LIB").then(|| OsString::from_vec(vec![0xff]));
    let (env, _) = command_env(&[], Path::new("/d"), None, Some(tool), inherited);
    assert!(
        env.contains(&(
            "HSA_TOOLS_LIB".to_owned(),
            "/k/libkreplay_tool.so".to_owned()
        )),
        "{env:?}"
    );
}

#[test]
fn followed_roots_are_the_pids_or_the_command_and_none_for_all() {
    assert_eq!(follow_roots(&Target::Pids(vec![7, 9])), vec![7, 9]);
    assert_eq!(follow_roots(&Target::Command(42)), vec![42]);
    assert_eq!(follow_roots(&Target::All), Vec::<u32>::new());
}

#[test]
fn each_root_is_followed_by_its_descendants() {
    // (pid, parent): 10 → 11 → 12; 20 → 21; 30 is unrelated.
    let parents = [(11, 10), (12, 11), (21, 20), (30, 1)];
    assert_eq!(follow_seeds(&[10, 20], &parents), vec![10, 11, 12, 20, 21]);
    assert_eq!(follow_seeds(&[30], &parents), vec![30]);
    assert_eq!(follow_seeds(&[], &parents), Vec::<u32>::new());
}

#[test]
fn new_library_files_are_held_only_under_all_and_only_when_the_hold_is_armed() {
    let mut tried = false;
    assert!(!holding_new_files(false, || {
        tried = true;
        Ok::<(), String>(())
    }));
    assert!(!tried, "without --all the hold is not armed at all");
    assert!(holding_new_files(true, || Ok::<(), String>(())));
    assert!(!holding_new_files(true, || Err("no BPF map".to_owned())));
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kreplay-setup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_stream_directory_is_beside_the_trace_or_a_fresh_name_when_taken() {
    let d = scratch("paths");
    let first = Paths::create(d.join("run.pftrace")).unwrap();
    assert_eq!(first.output, d.join("run.pftrace"));
    assert_eq!(first.want, d.join("run.pftrace.streams"));
    assert_eq!(first.dir, first.want);
    assert!(first.dir.is_dir());
    let second = Paths::create(d.join("run.pftrace")).unwrap();
    assert_eq!(second.want, first.want);
    assert_eq!(second.dir, d.join("run.pftrace.streams.2"));
    let err = Paths::create(d.join("missing/run.pftrace")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot create a stream directory "),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_command_that_cannot_run_takes_the_runs_streams_away_and_is_named() {
    let d = scratch("release");
    let dir = d.join("t.streams");
    std::fs::create_dir(&dir).unwrap();
    let files = vec![dir.join("probes-kreplay.krs")];
    std::fs::write(&files[0], b"").unwrap();
    // No command (-p, --all): nothing to let go.
    let never = |_: ()| -> std::io::Result<()> { panic!("no child to release") };
    setup_release_ok(None, never, &dir, &files);
    assert!(files[0].exists());
    // A command that goes on: its streams stay.
    setup_release_ok(Some(()), |()| Ok(()), &dir, &files);
    assert!(files[0].exists());
    // One that cannot: what this run wrote goes, with the directory it emptied.
    let err = release(
        Some(()),
        |()| Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        &dir,
        &files,
        Some("./app"),
    )
    .unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "cannot run ./app: No such file or directory (os error 2)"
    );
    assert!(!dir.exists());
    std::fs::remove_dir_all(&d).unwrap();
}

fn setup_release_ok(
    child: Option<()>,
    go: impl FnOnce(()) -> std::io::Result<()>,
    dir: &Path,
    files: &[PathBuf],
) {
    release(child, go, dir, files, Some("./app")).unwrap();
}

#[test]
fn pids_and_all_start_nothing_and_keep_the_stream_directory() {
    let d = scratch("start");
    let plan = Plan::check(
        crate::trace::plan::Request {
            pids: vec![7],
            ringbuf_bytes: 1 << 23,
            thread_slots: 4096,
            ..Default::default()
        },
        |_| true,
    )
    .unwrap();
    let (target, child) = start_command(&plan, &d, None).unwrap();
    assert_eq!(target, Target::Pids(vec![7]));
    assert!(child.is_none());
    assert!(d.is_dir());
    std::fs::remove_dir_all(&d).unwrap();
}
