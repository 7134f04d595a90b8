//! What `kreplay trace` says as it ends: about the traced command, and about stream files a
//! failed run keeps.
use std::path::Path;

/// Whether process `pid` exists and has not exited (a zombie has).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the command name, which is in parentheses and may hold any
            // character: it is the first field after the last ')'.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// `path` as one shell word: as is when it holds only characters no shell treats specially,
/// else in single quotes.
pub fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command that renders the stream files in `dir` into `output`.
pub fn merge_command(dir: &Path, output: &Path) -> String {
    format!(
        "kreplay merge {} -o {}",
        shell_word(dir),
        shell_word(output)
    )
}

/// What a run that fails after creating its stream files says about them: they are kept,
/// where, and the command that renders the records they hold.
pub fn kept_streams(dir: &Path, output: &Path) -> String {
    format!(
        "the stream files written so far are kept in {}; once what follows is fixed (a full \
         disk: free space), `{}` renders the records they hold",
        dir.display(),
        merge_command(dir, output)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_shell_characters_are_single_quoted() {
        assert_eq!(
            shell_word(Path::new("/tmp/run.pftrace")),
            "/tmp/run.pftrace"
        );
        assert_eq!(shell_word(Path::new("a b")), "'a b'");
        assert_eq!(shell_word(Path::new("it's")), r"'it'\''s'");
        assert_eq!(shell_word(Path::new("")), "''");
        assert_eq!(
            merge_command(Path::new("/d/x y.streams"), Path::new("out.pftrace")),
            "kreplay merge '/d/x y.streams' -o out.pftrace"
        );
    }

    #[test]
    fn this_process_runs_and_a_pid_that_cannot_exist_does_not() {
        assert!(running(std::process::id()));
        assert!(!running(u32::MAX));
    }
}
