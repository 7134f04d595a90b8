//! `--cupti-launches` when CUPTI fails a process: kreplay-tool cannot write that process's launch
//! calls, so it asks for the probes. It creates `launch-probes-<pid>` in the run's stream
//! directory and waits (at most 2 s, inside `cuInit`, before any launch) for
//! `launch-probes-<pid>.ack`; each tick of the recording loop looks for new requests, has the
//! launch entries probed for that process, and answers.
use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

use kreplay_common::replay_config::{ACK_SUFFIX, LAUNCH_PROBES_REQUEST};

/// The requests of one run's stream directory.
#[derive(Debug)]
pub struct LaunchRequests {
    dir: PathBuf,
    answered: HashSet<u32>,
}

impl LaunchRequests {
    /// Requests made in `dir`.
    pub fn new(dir: &Path) -> Self {
        LaunchRequests {
            dir: dir.to_path_buf(),
            answered: HashSet::new(),
        }
    }

    /// The processes that asked since the last look, each once.
    pub fn new_requests(&mut self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut pids: Vec<u32> = entries
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix(LAUNCH_PROBES_REQUEST)?
                    .parse()
                    .ok()
            })
            .filter(|pid| !self.answered.contains(pid))
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Tells process `pid` its launch entries are probed now.
    pub fn answer(&mut self, pid: u32) {
        self.answered.insert(pid);
        let ack = self
            .dir
            .join(format!("{LAUNCH_PROBES_REQUEST}{pid}{ACK_SUFFIX}"));
        if let Err(e) = std::fs::write(&ack, b"") {
            tracing::warn!(pid, error = %e, "cannot answer a request for launch probes");
        }
    }
}

/// The request and answer files left in `dir` (an answer the process no longer waited for),
/// to remove with the run's streams.
pub fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(LAUNCH_PROBES_REQUEST))
        })
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_seen_once_and_answered_beside_it() {
        let dir = std::env::temp_dir().join(format!("kreplay-launch-req-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("launch-probes-41"), b"").unwrap();
        std::fs::write(dir.join("launch-probes-7"), b"").unwrap();
        std::fs::write(dir.join("tool-41.krs"), b"").unwrap();
        let mut r = LaunchRequests::new(&dir);
        assert_eq!(r.new_requests(), [7, 41]);
        r.answer(41);
        assert!(dir.join("launch-probes-41.ack").exists());
        // The answer is not a request; 41 is not asked about again, 7 until answered.
        assert_eq!(r.new_requests(), [7]);
        r.answer(7);
        assert_eq!(r.new_requests(), Vec::<u32>::new());
        let mut left: Vec<String> = leftovers(&dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "launch-probes-41",
                "launch-probes-41.ack",
                "launch-probes-7",
                "launch-probes-7.ack"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
