//! Sampling processes from `/proc`: resident memory (`VmRSS`, `VmHWM`) and open descriptors,
//! on a background thread every few seconds.
use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// One reading of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Seconds since sampling started.
    pub t_s: u64,
    /// `VmRSS` in KiB.
    pub rss_kb: u64,
    /// `VmHWM` (peak RSS) in KiB.
    pub hwm_kb: u64,
    /// Entries in `/proc/PID/fd`.
    pub fds: u64,
}

/// The KiB figure of `key` (`VmRSS:`) in a `/proc/PID/status` text.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// One process's reading now, `None` once it is gone.
pub fn read(pid: u32, t_s: u64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        t_s,
        rss_kb: status_kb(&status, "VmRSS:")?,
        hwm_kb: status_kb(&status, "VmHWM:")?,
        fds,
    })
}

/// What process `pid`'s descriptors are open on, sorted, each named by kind: `socket`, `pipe`,
/// `anon_inode:…`, or the path (digits after `/proc/` as `N`). Empty once it is gone.
pub fn descriptor_kinds(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return vec![];
    };
    let mut kinds: Vec<String> = dir
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| kind_of(&t.to_string_lossy()))
        .collect();
    kinds.sort();
    kinds
}

/// A descriptor's link target as a kind ([`descriptor_kinds`]).
pub fn kind_of(target: &str) -> String {
    if let Some((kind, inode)) = target.split_once(":[")
        && inode
            .strip_suffix(']')
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    {
        return kind.to_string();
    }
    match target.strip_prefix("/proc/") {
        Some(rest) => {
            let after = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            if after.len() < rest.len() {
                format!("/proc/N{after}")
            } else {
                target.to_string()
            }
        }
        None => target.to_string(),
    }
}

/// A process's `comm`, `None` once it is gone.
pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
}

/// Every descendant of `pid` (children of all its threads, recursively), parents first.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for t in tasks.flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for k in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
                out.push(k);
                todo.push(k);
            }
        }
    }
    out
}

/// Series by role name, filled by a [`Sampler`].
pub type Series = BTreeMap<String, Vec<Sample>>;

/// Per role, each sample's [`descriptor_kinds`], beside the [`Series`].
pub type Descriptors = BTreeMap<String, Vec<Vec<String>>>;

/// A background thread that samples the processes `find` names, every `period`.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    series: Arc<Mutex<(Series, Descriptors)>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling; `find` returns (role, pid) pairs and is asked again at every tick.
    pub fn start<F>(period: Duration, find: F) -> Self
    where
        F: Fn() -> Vec<(String, u32)> + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let series = Arc::new(Mutex::new((Series::new(), Descriptors::new())));
        let (s, out) = (stop.clone(), series.clone());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut next = t0;
            while !s.load(Ordering::Relaxed) {
                let t_s = t0.elapsed().as_secs();
                for (role, pid) in find() {
                    if let Some(sample) = read(pid, t_s) {
                        let kinds = descriptor_kinds(pid);
                        let mut map = out.lock().unwrap_or_else(|e| e.into_inner());
                        map.0.entry(role.clone()).or_default().push(sample);
                        map.1.entry(role).or_default().push(kinds);
                    }
                }
                next += period;
                while Instant::now() < next && !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50).min(period));
                }
            }
        });
        Sampler {
            stop,
            series,
            thread: Some(thread),
        }
    }

    /// Stops the thread and returns what it sampled.
    pub fn finish(self) -> Series {
        self.finish_with_descriptors().0
    }

    /// Stops the thread and returns what it sampled, with what the descriptors were.
    pub fn finish_with_descriptors(mut self) -> (Series, Descriptors) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.series.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kib() {
        let status =
            "Name:\tkreplay\nVmPeak:\t  900 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   18432 kB\n";
        assert_eq!(status_kb(status, "VmRSS:"), Some(18432));
        assert_eq!(status_kb(status, "VmHWM:"), Some(20480));
        assert_eq!(status_kb(status, "VmSwap:"), None);
    }

    #[test]
    fn a_child_is_found_among_the_descendants() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let found = descendants(std::process::id()).contains(&child.id());
        let name = comm(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found);
        assert_eq!(name.as_deref(), Some("sleep"));
    }

    #[test]
    fn descriptors_are_named_by_kind() {
        assert_eq!(kind_of("socket:[48213]"), "socket");
        assert_eq!(kind_of("pipe:[77]"), "pipe");
        assert_eq!(kind_of("anon_inode:bpf-map"), "anon_inode:bpf-map");
        assert_eq!(
            kind_of("anon_inode:[perf_event]"),
            "anon_inode:[perf_event]"
        );
        assert_eq!(kind_of("/proc/4242/maps"), "/proc/N/maps");
        assert_eq!(kind_of("/proc/self/fd"), "/proc/self/fd");
        assert_eq!(kind_of("/dev/null"), "/dev/null");
    }

    #[test]
    fn this_process_can_be_read() {
        let me = read(std::process::id(), 7).expect("own /proc entry");
        assert_eq!(me.t_s, 7);
        assert!(
            me.rss_kb > 0 && me.hwm_kb >= me.rss_kb && me.fds >= 3,
            "{me:?}"
        );
    }
}
