//! NVTX under `kreplay trace -- CMD`: kreplay-tool becomes the command's NVTX injection library
//! (NVTX v3 is header-only, so its calls reach a tool only through `NVTX_INJECTION64_PATH`), and
//! the tool's stream files join the probes' in the trace.

use std::path::{Path, PathBuf};

use kreplay_common::replay_config::{self as contract, Setting};

/// The variable NVTX reads to find its injection library (64-bit processes).
pub const INJECTION_VAR: &str = "NVTX_INJECTION64_PATH";

/// What the command's NVTX calls will reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injection {
    /// kreplay-tool, writing its stream to the given directory.
    Kreplay(PathBuf),
    /// The user's own injection library (their value is kept): no annotations.
    User,
    /// No kreplay-tool was found: no annotations.
    NoTool,
}

/// The variables to add to the command's environment so that NVTX loads `tool`, and what
/// that leads to. `set(name)` says whether the variable is already set for the command
/// (inherited or `--env`): a user's `NVTX_INJECTION64_PATH` is never replaced, and an inherited
/// `KREPLAY_OUTPUT_DIR` (`kreplay replay --probes`, whose tool writes to the replay's directory)
/// is kept, the tool's stream then going there.
pub fn injection_env(
    tool: Option<&Path>,
    dir: &Path,
    set: impl Fn(&str) -> bool,
) -> (Vec<(String, String)>, Injection) {
    if set(INJECTION_VAR) {
        return (Vec::new(), Injection::User);
    }
    let Some(tool) = tool else {
        return (Vec::new(), Injection::NoTool);
    };
    let mut env = vec![(INJECTION_VAR.to_owned(), tool.display().to_string())];
    let out = Setting::OutputDir.var();
    if set(out) {
        return (env, Injection::Kreplay(PathBuf::new()));
    }
    env.push((out.to_owned(), dir.display().to_string()));
    (env, Injection::Kreplay(dir.to_path_buf()))
}

/// Where kreplay-tool is: `KREPLAY_TOOL_LIB`, or next to the running kreplay binary.
pub fn tool_lib() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(contract::TOOL_LIB) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libkreplay_tool.so"),
        dir.join("deps/libkreplay_tool.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The tool's stream files in `dir` (`tool-PID.krs`: the traced processes that made NVTX
/// calls), sorted.
pub fn tool_streams(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("tool-") && n.ends_with(".krs"))
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn the_tool_is_injected_unless_the_user_chose_an_injection_library() {
        let tool = Path::new("/k/libkreplay_tool.so");
        let dir = Path::new("/t/x.pftrace.streams");
        assert_eq!(
            injection_env(Some(tool), dir, |_| false),
            (
                pairs(&[
                    ("NVTX_INJECTION64_PATH", "/k/libkreplay_tool.so"),
                    ("KREPLAY_OUTPUT_DIR", "/t/x.pftrace.streams")
                ]),
                Injection::Kreplay(dir.into())
            )
        );
        assert_eq!(
            injection_env(Some(tool), dir, |v| v == "NVTX_INJECTION64_PATH"),
            (vec![], Injection::User)
        );
        assert_eq!(
            injection_env(None, dir, |_| false),
            (vec![], Injection::NoTool)
        );
        // Under `kreplay replay --probes` the tool already writes to the replay's directory.
        assert_eq!(
            injection_env(Some(tool), dir, |v| v == "KREPLAY_OUTPUT_DIR"),
            (
                pairs(&[("NVTX_INJECTION64_PATH", "/k/libkreplay_tool.so")]),
                Injection::Kreplay(PathBuf::new())
            )
        );
    }

    #[test]
    fn only_tool_streams_are_listed() {
        let dir = std::env::temp_dir().join(format!("kreplay-nvtx-streams-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["tool-9.krs", "tool-10.krs", "probes-9-9.krs", "tool-1.txt"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        assert_eq!(
            tool_streams(&dir),
            vec![dir.join("tool-10.krs"), dir.join("tool-9.krs")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
