//! Processes the probes stopped for kreplay (see `kreplay-ebpf/src/hold.rs`): a followed
//! process in the loader's hook, or (`--all`) any process mapping a runtime library file not
//! probed yet. Each is rescanned, so that the runtime libraries it just mapped are probed
//! before their first call, then resumed and struck from the map of held processes. Every
//! process read from the ring is resumed, also when kreplay ends first; a [`Guardian`]
//! resumes the rest if kreplay dies.
use std::collections::HashSet;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use aya::maps::{IterableMap, MapData, RingBuf};
use kreplay_common::{
    probe::{
        LoadStop,
        discovery::{FileKey, file_state},
        stop_kind,
    },
    stream::monotonic_ns,
};
use tokio::io::{Interest, unix::AsyncFd};

use super::ending::Stops;
use super::guardian::Guardian;
use crate::probes::loader::HoldMaps;

/// How long a process that mapped a new file may take to stop before it is rescanned anyway.
const STOP_WAIT: Duration = Duration::from_millis(200);

/// The ring of stopped processes, and the maps of held processes and seen files.
pub struct Holds {
    ring: AsyncFd<RingBuf<MapData>>,
    maps: HoldMaps,
    /// Files marked probed in the kernel's map.
    marked: HashSet<FileKey>,
    _guardian: Option<Guardian>,
    /// Each stop's kind and length, from the stop to the resume, in ns.
    pauses: Vec<(u32, u64)>,
}

/// The stops a ring's records carry (a [`LoadStop`] each; a short record is skipped).
pub fn stops(records: impl IntoIterator<Item = Vec<u8>>) -> Vec<LoadStop> {
    records
        .into_iter()
        .filter_map(|r| {
            let u32_at = |at: usize| Some(u32::from_le_bytes(r.get(at..at + 4)?.try_into().ok()?));
            let u64_at = |at: usize| Some(u64::from_le_bytes(r.get(at..at + 8)?.try_into().ok()?));
            Some(LoadStop {
                tgid: u32_at(0)?,
                kind: u32_at(4)?,
                stop_ns: u64_at(8)?,
                file: FileKey {
                    dev: u64_at(16)?,
                    ino: u64_at(24)?,
                },
            })
        })
        .collect()
}

/// The median and the longest of `pauses` (ns), `None` when there are none.
pub fn pause_summary(pauses: &[u64]) -> Option<(u64, u64)> {
    let mut v = pauses.to_vec();
    v.sort_unstable();
    Some((*v.get(v.len() / 2)?, *v.last()?))
}

/// Resumes process `tgid` (SIGCONT); one already running is left as it is.
pub fn resume(tgid: u32) {
    // SAFETY: plain signal send; a pid that is gone makes it fail harmlessly (ESRCH).
    unsafe { libc::kill(tgid as i32, libc::SIGCONT) };
}

/// The state letter of process `tgid` (`/proc/PID/stat`), `None` once it is gone.
fn state(tgid: u32) -> Option<u8> {
    let stat = std::fs::read(format!("/proc/{tgid}/stat")).ok()?;
    let end = stat.iter().rposition(|&b| b == b')')?;
    stat.get(end + 2).copied()
}

/// Waits until process `tgid` has stopped (the signal is taken on its way back to user space,
/// after the mapping that triggered it is made), is gone, or `limit` has passed.
fn wait_stopped(tgid: u32, limit: Duration) {
    let t0 = Instant::now();
    while let Some(s) = state(tgid) {
        if matches!(s, b'T' | b't') || t0.elapsed() > limit {
            return;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

impl Holds {
    /// Wraps the ring and the maps taken from the probes, and starts the guardian. Must be
    /// called inside a tokio runtime.
    pub fn new(ring: RingBuf<MapData>, maps: HoldMaps) -> std::io::Result<Holds> {
        // SAFETY: the RingBuf owns its map fd and keeps it open, unchanged, until it is
        // dropped, which happens only when this AsyncFd is dropped.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let guardian = Guardian::start(maps.held.map().fd().as_fd(), IterableMap::map(&maps.switch).fd().as_fd())
            .inspect_err(|e| {
                tracing::warn!(error = %e, "no guardian: processes held when kreplay is killed stay stopped");
            })
            .ok();
        let mut maps = maps;
        if let Err(e) = maps.switch.set(0, 1, 0) {
            tracing::warn!(error = %e, "holding could not be turned on: new libraries are found by the rescan");
        }
        Ok(Holds {
            ring,
            maps,
            marked: HashSet::new(),
            _guardian: guardian,
            pauses: Vec::new(),
        })
    }

    /// Waits until a stopped process is waiting (then call [`Holds::serve`]).
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let mut guard = self.ring.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// The stops since the last call.
    fn take(&mut self) -> Vec<LoadStop> {
        let ring = self.ring.get_mut();
        let mut records = Vec::new();
        while let Some(r) = ring.next() {
            records.push(r.to_vec());
        }
        stops(records)
    }

    /// Handles the stops since the last call: `attach` for each stopped process, then resumes
    /// it, noting how long it was stopped. A new file is marked probed once its process is
    /// rescanned, attached or not: a file that cannot be attached must not stop every process
    /// that maps it (the periodic rescan tries again).
    pub fn serve(&mut self, mut attach: impl FnMut(u32)) {
        for stop in self.take() {
            if stop.kind == stop_kind::NEW_FILE {
                wait_stopped(stop.tgid, STOP_WAIT);
            }
            attach(stop.tgid);
            if stop.kind == stop_kind::NEW_FILE {
                self.mark_probed([stop.file]);
            }
            self.release(stop.tgid);
            self.pauses
                .push((stop.kind, monotonic_ns().saturating_sub(stop.stop_ns)));
        }
    }

    /// Marks `files` probed: processes mapping them are no longer held.
    pub fn mark_probed(&mut self, files: impl IntoIterator<Item = FileKey>) {
        for key in files {
            if self.marked.insert(key)
                && let Err(e) = self.maps.files.insert(key, file_state::PROBED, 0)
            {
                tracing::warn!(?key, error = %e, "marking a library file probed");
            }
        }
    }

    /// Resumes `tgid` and strikes it from the map of held processes.
    fn release(&mut self, tgid: u32) {
        resume(tgid);
        let _ = self.maps.held.remove(&tgid);
    }

    /// The stops so far, summarised per reason.
    pub fn stops(&self) -> Stops {
        let of = |kind: u32| {
            let v: Vec<u64> = self
                .pauses
                .iter()
                .filter(|p| p.0 == kind)
                .map(|p| p.1)
                .collect();
            pause_summary(&v).map(|(median, longest)| (median, longest, v.len()))
        };
        Stops {
            loader: of(stop_kind::LOADER),
            new_files: of(stop_kind::NEW_FILE),
        }
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        // No process is stopped from now on: none would be resumed.
        let _ = self.maps.switch.set(0, 0, 0);
        for stop in self.take() {
            self.release(stop.tgid);
        }
        let left: Vec<u32> = self.maps.held.keys().filter_map(Result::ok).collect();
        for tgid in left {
            self.release(tgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_is_one_stop_and_short_ones_are_skipped() {
        let rec = |tgid: u32, kind: u32, ns: u64, dev: u64, ino: u64| {
            [
                &tgid.to_le_bytes()[..],
                &kind.to_le_bytes(),
                &ns.to_le_bytes(),
                &dev.to_le_bytes(),
                &ino.to_le_bytes(),
            ]
            .concat()
        };
        let recs = vec![
            rec(42, stop_kind::LOADER, 1000, 0, 0),
            vec![1, 2, 3, 4],
            rec(7, stop_kind::NEW_FILE, 5, (8 << 20) | 1, 99),
            rec(9, 1, 5, 1, 1)[..24].to_vec(),
        ];
        assert_eq!(
            stops(recs),
            vec![
                LoadStop {
                    tgid: 42,
                    kind: stop_kind::LOADER,
                    stop_ns: 1000,
                    file: FileKey::default(),
                },
                LoadStop {
                    tgid: 7,
                    kind: stop_kind::NEW_FILE,
                    stop_ns: 5,
                    file: FileKey {
                        dev: (8 << 20) | 1,
                        ino: 99
                    },
                },
            ]
        );
    }

    #[test]
    fn pauses_summarise_as_median_and_longest() {
        assert_eq!(pause_summary(&[]), None);
        assert_eq!(pause_summary(&[5]), Some((5, 5)));
        assert_eq!(pause_summary(&[9, 1, 4, 100]), Some((9, 100)));
    }

    #[test]
    fn a_process_is_stopped_once_its_state_says_so() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(state(pid).is_some_and(|s| s != b'T'), "{:?}", state(pid));
        // SAFETY: plain signal send to the child this test started.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        wait_stopped(pid, Duration::from_secs(5));
        assert_eq!(state(pid), Some(b'T'));
        resume(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(state(pid), None);
    }
}
