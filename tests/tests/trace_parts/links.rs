//! How the probes are attached, read from the kernel's own account of kreplay's BPF links
//! (`/proc/PID/fdinfo`): one uprobe-multi link per library and program, each holding every
//! probed function's offset with its cookie, for the target process only; and one perf event
//! per function and program with `KREPLAY_UPROBE_MULTI=0`.
use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use kreplay_cli::probes::elf::SymbolTable;
use kreplay_common::{
    api::{APIS, Library},
    probe::Cookie,
};
use kreplay_tests::{kreplay_bin, require_root, sim_dir, spawn_pid_target_with};

use super::StderrWatch;

/// One BPF link of kreplay's, as fdinfo shows it.
#[derive(Debug)]
struct Link {
    kind: String,
    pid: Option<u32>,
    path: Option<PathBuf>,
    /// (cookie, offset) of each function of a uprobe-multi link.
    points: BTreeSet<(u64, u64)>,
}

/// Every BPF link `pid` holds.
fn links_of(pid: u32) -> Vec<Link> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap_or_default();
        let Some(kind) = text
            .lines()
            .find_map(|l| l.strip_prefix("link_type:"))
            .map(|k| k.trim().to_string())
        else {
            continue;
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        let mut points = BTreeSet::new();
        let mut table = false;
        for l in text.lines() {
            if l.starts_with("cookie") {
                table = true;
                continue;
            }
            if table {
                let w: Vec<&str> = l.split_whitespace().collect();
                let cookie = w[0].parse().unwrap();
                let offset = u64::from_str_radix(w[1].trim_start_matches("0x"), 16).unwrap();
                points.insert((cookie, offset));
            }
        }
        out.push(Link {
            kind,
            pid: field("pid:").map(|p| p.parse().unwrap()),
            path: field("path:").map(PathBuf::from),
            points,
        });
    }
    out
}

/// The (cookie, offset) of every API of `family` that `lib` exports: what kreplay probes there.
fn expected_points(lib: &Path, family: Library) -> BTreeSet<(u64, u64)> {
    let table = SymbolTable::read(lib).unwrap();
    APIS.iter()
        .enumerate()
        .filter(|(_, s)| s.library == family)
        .filter_map(|(i, s)| {
            table
                .offset(s.name)
                .map(|off| (Cookie::for_spec(i as u16, s).0, off))
        })
        .collect()
}

/// Starts `kreplay trace -p` on a lingering pid_target, returns the target's pid, kreplay's
/// links once it traces and the number of probed functions it reported, then lets both end.
fn links_while_tracing(multi: bool) -> (u32, Vec<Link>, usize) {
    let (mut target, mut target_out) = spawn_pid_target_with(3, true);
    let pid = target.id();
    let out = super::out_path(if multi { "links-multi" } else { "links-perf" });
    let mut c = Command::new(kreplay_bin());
    c.args(["trace", "--no-summary", "-o", out.to_str().unwrap(), "-p"])
        .arg(pid.to_string())
        .stderr(Stdio::piped());
    if !multi {
        c.env("KREPLAY_UPROBE_MULTI", "0");
    }
    let mut kreplay = c.spawn().unwrap();
    let mut watch = StderrWatch::new(&mut kreplay);
    watch.wait_for("kreplay: tracing pid");
    let links = links_of(kreplay.id());
    let said = watch.last().unwrap().to_owned();
    let probed: usize = said
        .split(": ")
        .nth(2)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no probe count in {said:?}"));
    let stdin = target.stdin.as_mut().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    stdin.write_all(b"end\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(kreplay.wait().unwrap().success(), "{}", watch.finish());
    (pid, links, probed)
}

#[test]
fn each_library_gets_one_uprobe_multi_link_per_program_with_every_function() {
    require_root!();
    let (pid, links, probed) = links_while_tracing(true);
    assert!(
        links
            .iter()
            .all(|l| l.kind == "uprobe_multi" || l.kind == "uretprobe_multi"),
        "{links:#?}"
    );
    assert!(links.iter().all(|l| l.pid == Some(pid)), "{links:#?}");
    // Every probed function is in one entry link and one return link.
    for kind in ["uprobe_multi", "uretprobe_multi"] {
        let n: usize = links
            .iter()
            .filter(|l| l.kind == kind)
            .map(|l| l.points.len())
            .sum();
        assert_eq!(n, probed, "{kind}");
    }
    let sim = sim_dir();
    for (name, family, functions) in [
        ("libamdhip64.so.6", Library::Hip, 17),
        ("libhsa-runtime64.so.1", Library::Hsa, 10),
    ] {
        let lib = sim.join(name).canonicalize().unwrap();
        let want = expected_points(&lib, family);
        assert_eq!(want.len(), functions, "{name}: APIs the sim exports");
        let mut kinds = BTreeMap::new();
        for l in links.iter().filter(|l| l.path.as_deref() == Some(&lib)) {
            assert_eq!(l.points, want, "{} on {name}", l.kind);
            *kinds.entry(l.kind.as_str()).or_insert(0) += 1;
        }
        assert_eq!(
            kinds,
            BTreeMap::from([("uprobe_multi", 1), ("uretprobe_multi", 1)]),
            "{name}"
        );
    }
}

#[test]
fn without_uprobe_multi_each_function_gets_a_perf_event_per_program() {
    require_root!();
    let (_, links, probed) = links_while_tracing(false);
    assert!(links.iter().all(|l| l.kind == "perf"), "{links:#?}");
    // At least the sim's HIP and HSA functions (other runtimes the target could still dlopen
    // may add theirs), each at entry and return.
    assert!(probed >= 17 + 10, "{probed}");
    assert_eq!(links.len(), 2 * probed);
}
