//! A panic inside any of kreplay-tool's FFI entries is caught there: forced at each site (the
//! tool's `KREPLAY_FORCE_PANIC`), the program under `kreplay replay` prints what it prints
//! without kreplay and exits the same way, on the CUDA sim (linked and runtime-style programs)
//! and the ROCm sim's workloads. Every site is reached by at least one program, so none of
//! them passes by not running.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kreplay_tests::{cuda_sim, kreplay_bin, make_sim, scratch, workload};
use kreplay_tool::fault::{ENV, SITES, message};

/// The program's exit code and its own stdout lines.
type Outcome = (Option<i32>, Vec<String>);

/// Runs `program ARGS` bare or under `kreplay replay --passes 3` (and `replay_args`), with
/// `env`, killed after a minute (a site whose fallback hung the program fails the
/// comparison); returns its outcome and stderr.
fn run(
    program: &Path,
    args: &[&str],
    replay: Option<&[&str]>,
    env: &[(&str, &str)],
    lib_dir: Option<&Path>,
) -> (Outcome, String) {
    let mut c = Command::new("timeout");
    c.arg("60");
    if let Some(replay_args) = replay {
        c.arg(kreplay_bin())
            .args(["replay", "--passes", "3"])
            .args(replay_args)
            .arg("-o")
            .arg(scratch("ffi-panics").join("t.pftrace"))
            .arg("--");
    }
    c.arg(program).args(args).envs(env.iter().copied());
    if let Some(d) = lib_dir {
        c.env("LD_LIBRARY_PATH", d);
    }
    let out = c.output().expect("run the program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let outcome = (
        out.status.code(),
        kreplay_tests::replay_table::app_lines(&stdout),
    );
    (outcome, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Forces a panic at every site in turn while `program ARGS` runs under replay (with
/// `replay_args`); asserts each run matches the bare run and returns the sites reached.
fn every_site(
    program: &Path,
    args: &[&str],
    replay_args: &[&str],
    lib_dir: Option<&Path>,
) -> BTreeSet<&'static str> {
    let (want, _) = run(program, args, None, &[], lib_dir);
    assert_eq!(want.0, Some(0), "{program:?} {args:?} fails bare");
    // Armed for no site, the tool replays as usual (the variable is one it knows).
    let (got, stderr) = run(program, args, Some(replay_args), &[(ENV, "none")], lib_dir);
    assert_eq!(got, want, "{program:?} {args:?}:\n{stderr}");
    assert!(
        !stderr.contains("kreplay: 0 dispatches replayed"),
        "{program:?} {args:?} replayed nothing:\n{stderr}"
    );
    let mut reached = BTreeSet::new();
    for site in SITES {
        let (got, stderr) = run(program, args, Some(replay_args), &[(ENV, site)], lib_dir);
        assert_eq!(
            got, want,
            "{program:?} {args:?}, panic at {site}:\n{stderr}"
        );
        if stderr.contains(&message(site)) {
            reached.insert(*site);
        }
    }
    reached
}

#[test]
fn a_panic_at_any_entry_leaves_the_programs_output_as_without_kreplay() {
    let mut reached = BTreeSet::new();
    let sim = cuda_sim("ffi-panics-cuda");
    for program in [&sim.linked, &sim.runtime] {
        for mode in ["inplace", "devicevar", "vmm", "async", "graph", "teardown"] {
            reached.extend(every_site(program, &[mode], &[], Some(&sim.dir)));
        }
    }
    // Launches after the first, run once beside a replay: a panic once one has run must not
    // run it again (the in-place kernel would count twice).
    reached.extend(every_site(
        &sim.linked,
        &["twice"],
        &["--max-dispatches", "1"],
        Some(&sim.dir),
    ));
    make_sim(&[]);
    let cases: [(&str, &[&str]); 2] = [("saxpy", &["2", "4096", "2"]), ("malloc_async", &["6"])];
    for (name, args) in cases {
        reached.extend(every_site(&workload(name), args, &[], None));
    }
    let missed: Vec<_> = SITES.iter().filter(|s| !reached.contains(*s)).collect();
    assert!(missed.is_empty(), "sites no program reached: {missed:?}");
}
