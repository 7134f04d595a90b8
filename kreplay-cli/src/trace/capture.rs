//! Turning the ring buffer's call records into per-thread stream files.
//!
//! Capture is separate from rendering (samply's and wprof's split): records go to versioned,
//! chunked stream files first, one per traced thread, and the Perfetto trace is rendered from
//! them afterwards, so a rendering bug never costs the run. Each thread's stream starts with
//! the process's and the thread's names, read from /proc while the thread is alive.
use std::{
    collections::{HashMap, hash_map::Entry},
    fs::{self, File},
    path::{Path, PathBuf},
};

use kreplay_common::{
    probe::CallRecord,
    stream::{
        ApiCall, Drops, KernelName, ProcessName, Record, StreamError, StreamHeader, StreamKind,
        StreamWriter,
    },
};

/// Chunk size of the probe streams: small enough that a crash loses little.
const CHUNK_BYTES: usize = 64 * 1024;

/// One thread's open stream.
struct Open {
    w: StreamWriter<File>,
    /// Records pushed so far, and as of the last [`Capture::close_idle`].
    pushed: u64,
    checked: u64,
}

/// The per-thread stream files of one capture.
///
/// A thread's file stays open while it makes calls; [`Capture::close_idle`] closes those of
/// threads that made none since its previous run (the caller runs it every few seconds), and a
/// closed stream is reopened for appending at its thread's next record. A long `--all` capture
/// sees threads come and go: kept open, every one that ever made a call would hold a
/// descriptor and a chunk buffer until the end.
pub struct Capture {
    dir: PathBuf,
    /// Looked up once per record: foldhash, not std's SipHash (which with a second lookup was
    /// about 10% of the reader's CPU per record).
    threads: HashMap<(u32, u32), Open, foldhash::fast::RandomState>,
    /// Closed streams: chunks written to each.
    closed: HashMap<(u32, u32), u64, foldhash::fast::RandomState>,
    control: StreamWriter<File>,
    /// Process names read while the processes lived ([`Capture::remember_name`]), for those
    /// gone by the time their first record is read.
    names: HashMap<u32, String, foldhash::fast::RandomState>,
    /// Records written.
    pub records: u64,
}

fn comm(path: &str) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// The name of process `pid` from /proc, or `pid N`.
pub fn process_name(pid: u32) -> String {
    comm(&format!("/proc/{pid}/comm")).unwrap_or_else(|| format!("pid {pid}"))
}

impl Capture {
    /// Starts a capture in `dir`, a directory this run created and nothing else writes to
    /// ([`crate::output::fresh_dir`]): the stream files are created there, not checked for.
    pub fn create(dir: &Path) -> Result<Capture, StreamError> {
        let me = std::process::id();
        let control = StreamWriter::create(
            &dir.join("probes-kreplay.krs"),
            &StreamHeader::new(StreamKind::Probes, me),
        )?
        .with_chunk_threshold(CHUNK_BYTES);
        Ok(Capture {
            dir: dir.to_path_buf(),
            threads: HashMap::default(),
            closed: HashMap::default(),
            names: HashMap::default(),
            control,
            records: 0,
        })
    }

    /// The directory holding the stream files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads process `pid`'s name now, while it lives (a process the probes hold, say): a short
    /// process may be gone when the reader reaches its first record.
    pub fn remember_name(&mut self, pid: u32) {
        if let Some(name) = comm(&format!("/proc/{pid}/comm")) {
            self.names.insert(pid, name);
        }
    }

    /// Number of thread streams.
    pub fn threads(&self) -> usize {
        self.threads.len() + self.closed.len()
    }

    /// Appends a kernel's name to the stream of the thread that named it (or launched it).
    pub fn kernel_name(&mut self, tid: u32, k: KernelName) -> Result<(), StreamError> {
        let o = self.thread(k.pid, tid)?;
        o.pushed += 1;
        o.w.push(&Record::KernelName(k))
    }

    /// Appends a user annotation (roctx) to its thread's stream.
    pub fn annotation(&mut self, a: kreplay_common::stream::Annotation) -> Result<(), StreamError> {
        let o = self.thread(a.pid, a.tid)?;
        o.pushed += 1;
        o.w.push(&Record::Annotation(a))?;
        self.records += 1;
        Ok(())
    }

    /// The stream of thread `tid` of `pid`, created (with the names) on first sight, reopened
    /// after [`Capture::close_idle`] closed it.
    fn thread(&mut self, pid: u32, tid: u32) -> Result<&mut Open, StreamError> {
        match self.threads.entry((pid, tid)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(slot) => {
                let path = self.dir.join(format!("probes-{pid}-{tid}.krs"));
                if let Some(chunks) = self.closed.remove(&(pid, tid)) {
                    let w = StreamWriter::append(&path, chunks)?.with_chunk_threshold(CHUNK_BYTES);
                    return Ok(slot.insert(Open {
                        w,
                        pushed: 0,
                        checked: 0,
                    }));
                }
                let mut w =
                    StreamWriter::create(&path, &StreamHeader::new(StreamKind::Probes, pid))?
                        .with_chunk_threshold(CHUNK_BYTES);
                let name = comm(&format!("/proc/{pid}/comm"))
                    .or_else(|| self.names.get(&pid).cloned())
                    .unwrap_or_else(|| format!("pid {pid}"));
                w.push(&Record::ProcessName(ProcessName { pid, name }))?;
                let thread = comm(&format!("/proc/{pid}/task/{tid}/comm"))
                    .unwrap_or_else(|| format!("thread {tid}"));
                w.push(&Record::ThreadName(kreplay_common::stream::ThreadName {
                    tid,
                    name: thread,
                }))?;
                Ok(slot.insert(Open {
                    w,
                    pushed: 0,
                    checked: 0,
                }))
            }
        }
    }

    /// Flushes and closes the streams of threads that made no call since the previous run;
    /// returns how many it closed.
    pub fn close_idle(&mut self) -> Result<usize, StreamError> {
        let idle: Vec<(u32, u32)> = self
            .threads
            .iter_mut()
            .filter_map(|(k, o)| {
                let idle = o.pushed == o.checked;
                o.checked = o.pushed;
                idle.then_some(*k)
            })
            .collect();
        for k in &idle {
            if let Some(mut o) = self.threads.remove(k) {
                o.w.flush()?;
                self.closed.insert(*k, o.w.chunks_written());
            }
        }
        Ok(idle.len())
    }

    /// Streams open now.
    pub fn open_streams(&self) -> usize {
        self.threads.len()
    }

    /// Appends one call to its thread's stream, creating the stream on first sight.
    pub fn push(&mut self, r: &CallRecord) -> Result<(), StreamError> {
        let o = self.thread(r.pid, r.tid)?;
        o.pushed += 1;
        o.w.push(&Record::ApiCall(ApiCall {
            pid: r.pid,
            tid: r.tid,
            api: r.api,
            enter_ns: r.enter_ns,
            exit_ns: r.exit_ns,
            ret: r.ret,
            args: r.args,
            extra: r.extra,
            out: r.out,
        }))?;
        self.records += 1;
        Ok(())
    }

    /// Records that `count` more events were lost by `source` as of `ts_ns`.
    pub fn drops(&mut self, ts_ns: u64, source: &str, count: u64) -> Result<(), StreamError> {
        self.control.push(&Record::Drops(Drops {
            ts_ns,
            source: source.to_string(),
            count,
        }))
    }

    /// The stream files created so far, sorted.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.dir.join("probes-kreplay.krs")];
        files.extend(
            self.threads
                .keys()
                .chain(self.closed.keys())
                .map(|(pid, tid)| self.dir.join(format!("probes-{pid}-{tid}.krs"))),
        );
        files.sort();
        files
    }

    /// Flushes every stream; returns the stream files written.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, StreamError> {
        let files = self.files();
        self.control.flush()?;
        for o in self.threads.values_mut() {
            o.w.flush()?;
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::stream::StreamReader;

    fn call(tid: u32, enter_ns: u64) -> CallRecord {
        CallRecord {
            enter_ns,
            exit_ns: enter_ns + 1,
            pid: 7,
            tid,
            api: 1,
            flags: 0,
            parent: 0,
            _pad: 0,
            args: [0; 6],
            extra: [0; kreplay_common::probe::EXTRA_WORDS],
            ret: 0,
            out: 0,
        }
    }

    /// The calls' entry times in a stream file, and whether it read back undamaged.
    fn read_back(path: &Path) -> (Vec<u64>, bool) {
        let mut r = StreamReader::open(path).unwrap();
        let calls = r
            .by_ref()
            .filter_map(|rec| match rec {
                Record::ApiCall(c) => Some(c.enter_ns),
                _ => None,
            })
            .collect();
        (calls, r.damage().is_none())
    }

    #[test]
    fn idle_threads_streams_close_and_reopen_for_appending() {
        let dir = std::env::temp_dir().join(format!("kreplay-capture-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let mut c = Capture::create(&dir).unwrap();
        // Enough calls on thread 10 for several 64 KiB chunks before its stream is closed.
        for t in 0..3000 {
            c.push(&call(10, t)).unwrap();
        }
        c.push(&call(11, 0)).unwrap();
        assert_eq!(
            c.close_idle().unwrap(),
            0,
            "both made calls since the start"
        );
        c.push(&call(10, 3000)).unwrap();
        assert_eq!(c.close_idle().unwrap(), 1, "thread 11 was idle");
        assert_eq!((c.open_streams(), c.threads()), (1, 2));
        assert_eq!(c.close_idle().unwrap(), 1, "then thread 10");
        assert_eq!(c.open_streams(), 0);
        // Both come back: appended to their files.
        c.push(&call(10, 3001)).unwrap();
        c.push(&call(11, 1)).unwrap();
        assert_eq!((c.open_streams(), c.threads()), (2, 2));
        let files = c.finish().unwrap();
        assert_eq!(
            files,
            vec![
                dir.join("probes-7-10.krs"),
                dir.join("probes-7-11.krs"),
                dir.join("probes-kreplay.krs")
            ]
        );
        let (calls, undamaged) = read_back(&files[0]);
        assert!(undamaged, "thread 10's stream reads back whole");
        assert_eq!(calls.len(), 3002);
        assert!(calls.iter().copied().eq(0..3002), "every call, in order");
        assert_eq!(read_back(&files[1]), (vec![0, 1], true));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_gone_before_its_first_record_keeps_the_name_read_while_it_lived() {
        let dir = std::env::temp_dir().join(format!("kreplay-names-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let mut c = Capture::create(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Once it has exec'ed (until then it bears this thread's name).
        let t0 = std::time::Instant::now();
        while comm(&format!("/proc/{pid}/comm")).as_deref() != Some("sleep") {
            assert!(t0.elapsed().as_secs() < 10, "sleep never started");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        c.remember_name(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        let mut gone = call(10, 5);
        gone.pid = pid;
        c.push(&gone).unwrap();
        // One never remembered, gone too: named by its pid.
        let mut unknown = call(11, 6);
        unknown.pid = u32::MAX - 1;
        c.push(&unknown).unwrap();
        let files = c.finish().unwrap();
        let name_in = |f: &Path| {
            StreamReader::open(f).unwrap().find_map(|r| match r {
                Record::ProcessName(p) => Some(p.name),
                _ => None,
            })
        };
        assert_eq!(
            name_in(&dir.join(format!("probes-{pid}-10.krs"))),
            Some("sleep".to_string())
        );
        assert_eq!(
            name_in(&dir.join(format!("probes-{}-11.krs", u32::MAX - 1))),
            Some(format!("pid {}", u32::MAX - 1))
        );
        assert_eq!(files.len(), 3);
        fs::remove_dir_all(&dir).unwrap();
    }
}
