//! Every copy and host allocation kreplay makes while replaying can fail, one position at a
//! time, and the application still computes exactly what it computes without kreplay: same
//! output, same exit status. Swept on the ROCm sim (allocations, a module variable, vmem
//! mappings) and the CUDA sim (allocations, a module variable, a cuMemMap range), in every
//! snapshot placement and with full restores. The sims' knobs can be scoped to kreplay's own
//! copies (`KRSIM_FAULT_SCOPE=runtime`; the CUDA sim's `FAKECUDA_FAIL_COPY_NTH` never counts
//! the program's own), so a bare run under the same knob is the faultless run.

use std::path::Path;
use std::process::{Command, Output};

use kreplay_tests::{cuda_sim, kreplay_bin, make_sim, scratch, workload};

/// Fault positions swept for each copy knob.
const POSITIONS: std::ops::RangeInclusive<u32> = 1..=20;

/// Snapshot placements and restore modes every sweep runs under.
const CONFIGS: [&[&str]; 5] = [
    &[],
    &["--snapshot-placement", "pinned"],
    &["--snapshot-placement", "pageable"],
    &["--snapshot-placement", "device"],
    &["--restore", "full"],
];

/// What a run left for the comparison: exit code, the program's stdout lines, kreplay's
/// stderr and the per-kernel table's declines.
struct Run {
    code: Option<i32>,
    app: Vec<String>,
    stderr: String,
    stdout: String,
}

fn finish(out: Output) -> Run {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run {
        code: out.status.code(),
        app: kreplay_tests::replay_table::app_lines(&stdout),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout,
    }
}

/// Runs `program ARGS`, under `kreplay replay FLAGS -o TRACE --` when `flags` is given, with
/// `env` (and `lib_dir` on LD_LIBRARY_PATH).
fn run(
    program: &Path,
    args: &[&str],
    flags: Option<&[&str]>,
    env: &[(&str, String)],
    lib_dir: Option<&Path>,
) -> Run {
    let mut c = match flags {
        None => Command::new(program),
        Some(flags) => {
            let mut c = Command::new(kreplay_bin());
            c.arg("replay")
                .args(flags)
                .arg("-o")
                .arg(scratch("replay-faults").join("t.pftrace"))
                .arg("--")
                .arg(program);
            c
        }
    };
    c.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(d) = lib_dir {
        c.env("LD_LIBRARY_PATH", d);
    }
    finish(c.output().expect("run the program"))
}

fn bare(program: &Path, args: &[&str], env: &[(&str, String)], lib_dir: Option<&Path>) -> Run {
    run(program, args, None, env, lib_dir)
}

fn replayed(
    program: &Path,
    args: &[&str],
    flags: &[&str],
    env: &[(&str, String)],
    lib_dir: Option<&Path>,
) -> Run {
    run(program, args, Some(flags), env, lib_dir)
}

/// Runs `program` bare and under `kreplay replay --passes 3 FLAGS` with `env`, and asserts the
/// program's output and exit status are the same. Returns kreplay's run.
fn same_as_bare(
    program: &Path,
    args: &[&str],
    flags: &[&str],
    env: &[(&str, String)],
    lib_dir: Option<&Path>,
) -> Run {
    let want = bare(program, args, env, lib_dir);
    let mut all = vec!["--passes", "3"];
    all.extend_from_slice(flags);
    let got = replayed(program, args, &all, env, lib_dir);
    assert_eq!(
        (got.code, &got.app),
        (want.code, &want.app),
        "{program:?} {args:?} {flags:?} {env:?}:\n{}\n{}",
        got.stdout,
        got.stderr
    );
    got
}

/// Tallies of one sweep: runs in which kreplay reported the injected failure, and runs in which
/// replay stopped early (a restore or a pass failed) and the dispatch was run once again.
#[derive(Default, Debug)]
struct Hits {
    failed: u32,
    stopped: u32,
}

fn tally(h: &mut Hits, run: &Run, status: &str) {
    h.failed += u32::from(run.stderr.contains(status));
    h.stopped += u32::from(run.stdout.contains("replay stopped: "));
}

#[test]
fn every_rocm_copy_position_that_fails_leaves_the_programs_output_as_without_kreplay() {
    make_sim(&[]);
    let cases: [(&str, &[&str]); 2] = [("saxpy", &["2", "4096", "2"]), ("malloc_async", &["6"])];
    for (name, args) in cases {
        let program = workload(name);
        for flags in CONFIGS {
            for knob in ["KRSIM_FAIL_D2H_NTH", "KRSIM_FAIL_H2D_NTH"] {
                let mut hits = Hits::default();
                for n in POSITIONS {
                    let env = [
                        ("KRSIM_FAULT_SCOPE", "runtime".to_owned()),
                        (knob, n.to_string()),
                    ];
                    let run = same_as_bare(&program, args, flags, &env, None);
                    tally(&mut hits, &run, "failed with HSA_STATUS_ERROR (0x1000)");
                }
                // The HSA backend keeps no snapshot in device memory: a device placement
                // declines every dispatch before copying anything.
                if flags.contains(&"device") {
                    assert_eq!((hits.failed, hits.stopped), (0, 0), "{name} {knob}");
                    continue;
                }
                assert!(hits.failed > 0, "{name} {flags:?} {knob}: {hits:?}");
                if knob.contains("H2D") {
                    assert!(
                        hits.stopped > 0,
                        "{name} {flags:?}: a failed restore stopped no replay: {hits:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn refused_host_allocations_of_every_size_leave_the_programs_output_as_without_kreplay() {
    make_sim(&[]);
    let cases: [(&str, &[&str]); 2] = [("saxpy", &["2", "4096", "2"]), ("malloc_async", &["6"])];
    for (name, args) in cases {
        for flags in CONFIGS {
            for cap in [1u64, 4096, 16384, 65536, 1 << 20] {
                let env = [("KRSIM_FAIL_HOST_ALLOC_ABOVE", cap.to_string())];
                same_as_bare(&workload(name), args, flags, &env, None);
            }
        }
    }
}

#[test]
fn the_issues_reproductions_compute_what_a_bare_run_computes() {
    make_sim(&[]);
    let saxpy = workload("saxpy");
    // The application's own copies count here too (no scope), as in the report.
    for (n, passes) in [(3u32, "2"), (4, "2")] {
        let env = [("KRSIM_FAIL_H2D_NTH", n.to_string())];
        let run = replayed(
            &saxpy,
            &["1", "4096", "1"],
            &["--passes", passes],
            &env,
            None,
        );
        let want = bare(&saxpy, &["1", "4096", "1"], &env, None);
        assert_eq!(
            (run.code, &run.app),
            (want.code, &want.app),
            "{}",
            run.stderr
        );
        assert!(run.stdout.contains("replay stopped: "), "{}", run.stdout);
        // The tool's warnings reach a pipe here: no colour codes in them.
        assert!(run.stderr.contains("WARN"), "{}", run.stderr);
        assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
    }
    let args = ["4", "1000", "8"];
    for flags in [
        &["--passes", "2"][..],
        &["--passes", "5"],
        &["--passes", "5", "--restore", "full"],
        &["--passes", "5", "--snapshot-placement", "pageable"],
    ] {
        for n in 9..=69u32 {
            let env = [("KRSIM_FAIL_H2D_NTH", n.to_string())];
            let run = replayed(&saxpy, &args, flags, &env, None);
            let want = bare(&saxpy, &args, &env, None);
            assert_eq!(
                (run.code, &run.app),
                (want.code, &want.app),
                "{flags:?} NTH={n}: {}",
                run.stderr
            );
            // A replay that stopped never reports the kernel nondeterministic.
            let rows = kreplay_tests::replay_table::columns(&run.stdout);
            assert_eq!(
                rows["saxpy"]["nondet"], "0",
                "{flags:?} NTH={n}: {}",
                run.stdout
            );
        }
    }
}

#[test]
fn every_cuda_copy_position_that_fails_leaves_the_programs_output_as_without_kreplay() {
    let sim = cuda_sim("replay-faults-cuda");
    for program in [&sim.linked, &sim.runtime] {
        for mode in ["inplace", "devicevar", "vmm"] {
            for flags in CONFIGS {
                let mut hits = Hits::default();
                for n in POSITIONS {
                    let env = [("FAKECUDA_FAIL_COPY_NTH", n.to_string())];
                    let run = same_as_bare(program, &[mode], flags, &env, Some(&sim.dir));
                    tally(&mut hits, &run, "failed with CUDA_ERROR_UNKNOWN (999)");
                }
                assert!(
                    hits.failed > 0 && hits.stopped > 0,
                    "{program:?} {mode} {flags:?}: {hits:?}"
                );
            }
            for cap in [1u64, 4096, 1 << 20] {
                let env = [
                    ("FAKECUDA_FAIL_HOST_ALLOC_ABOVE", cap.to_string()),
                    ("FAKECUDA_FREE_MIB", "0".to_owned()),
                ];
                same_as_bare(program, &[mode], &[], &env, Some(&sim.dir));
            }
        }
    }
}
