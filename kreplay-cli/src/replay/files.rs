//! The files of a `kreplay replay` run: the tool library it injects, the tool's streams in the
//! run's directory, and the probes' trace and streams beside them with `--probes`.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kreplay_common::replay_config as contract;

use crate::{output, replay::progress};

/// The probes' trace in the run's directory (`--probes`).
pub const PROBES_TRACE: &str = "probes.pftrace";
/// The probes' stream directory in the run's directory (`--probes`).
pub const PROBES_STREAMS: &str = "probes.pftrace.streams";

/// Where the tool library is: `KREPLAY_TOOL_LIB`, or next to the kreplay binary.
pub fn tool_lib() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(contract::TOOL_LIB) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot locate the kreplay binary")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libkreplay_tool.so"),
        dir.join("deps/libkreplay_tool.so"),
    ] {
        if cand.exists() {
            return Ok(cand);
        }
    }
    bail!(
        "libkreplay_tool.so not found next to {} (set KREPLAY_TOOL_LIB)",
        exe.display()
    )
}

/// The `*.krs` files directly in `dir`, sorted (none when it cannot be read).
pub fn krs_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "krs"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The stream files `kreplay trace --keep-streams` left in `dir`, and the warning to print
/// when there are none (it could not run).
pub fn probe_streams(dir: &Path) -> (Vec<PathBuf>, Option<String>) {
    let v = krs_files(dir);
    let warning = v.is_empty().then(|| {
        format!(
            "kreplay: warning: the probes left no streams in {}; the trace has the tool's records only",
            dir.display()
        )
    });
    (v, warning)
}

/// Removes what a run wrote in its directory `dir`: the streams, the probes' trace and their
/// stream directory, the progress file, then `dir` if nothing else is in it; nothing else in
/// `dir` is kreplay's to remove.
pub fn remove_run_files(dir: &Path) {
    let probes_dir = dir.join(PROBES_STREAMS);
    output::remove_own(&probes_dir, &krs_files(&probes_dir));
    let mut own = krs_files(dir);
    own.push(dir.join(PROBES_TRACE));
    own.push(dir.join(progress::FILE));
    output::remove_own(dir, &own);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kreplay-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn stream_files_are_the_krs_files_directly_in_the_directory_sorted() {
        let d = scratch("krs");
        for f in ["b.krs", "a.krs", "c.txt", "d.krs.tmp"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/e.krs"), b"").unwrap();
        assert_eq!(krs_files(&d), vec![d.join("a.krs"), d.join("b.krs")]);
        assert_eq!(krs_files(&d.join("missing")), Vec::<PathBuf>::new());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn no_probe_streams_is_said_with_the_directory() {
        let d = scratch("probes");
        let (files, warning) = probe_streams(&d);
        assert_eq!(files, Vec::<PathBuf>::new());
        assert_eq!(
            warning,
            Some(format!(
                "kreplay: warning: the probes left no streams in {}; the trace has the tool's records only",
                d.display()
            ))
        );
        std::fs::write(d.join("1.krs"), b"").unwrap();
        assert_eq!(probe_streams(&d), (vec![d.join("1.krs")], None));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_runs_own_files_go_and_anything_else_stays_with_its_directory() {
        let d = scratch("own");
        std::fs::create_dir(d.join(PROBES_STREAMS)).unwrap();
        for f in [
            "1.krs",
            PROBES_TRACE,
            progress::FILE,
            "probes.pftrace.streams/2.krs",
        ] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        remove_run_files(&d);
        assert!(
            !d.exists(),
            "a directory of the run's files alone is removed"
        );
        let d = scratch("others");
        for f in ["1.krs", "user.txt"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        remove_run_files(&d);
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("user.txt")]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
