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

/// The per-thread stream files of one capture.
pub struct Capture {
    dir: PathBuf,
    /// Looked up once per record: foldhash, not std's SipHash (which with a second lookup was
    /// about 10% of the reader's CPU per record).
    threads: HashMap<(u32, u32), StreamWriter<File>, foldhash::fast::RandomState>,
    control: StreamWriter<File>,
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
            control,
            records: 0,
        })
    }

    /// The directory holding the stream files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of thread streams.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Appends a kernel's name to the stream of the thread that named it (or launched it).
    pub fn kernel_name(&mut self, tid: u32, k: KernelName) -> Result<(), StreamError> {
        self.thread(k.pid, tid)?.push(&Record::KernelName(k))
    }

    /// The stream of thread `tid` of `pid`, created (with the names) on first sight.
    fn thread(&mut self, pid: u32, tid: u32) -> Result<&mut StreamWriter<File>, StreamError> {
        match self.threads.entry((pid, tid)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(slot) => {
                let path = self.dir.join(format!("probes-{pid}-{tid}.krs"));
                let mut w =
                    StreamWriter::create(&path, &StreamHeader::new(StreamKind::Probes, pid))?
                        .with_chunk_threshold(CHUNK_BYTES);
                w.push(&Record::ProcessName(ProcessName {
                    pid,
                    name: process_name(pid),
                }))?;
                let thread = comm(&format!("/proc/{pid}/task/{tid}/comm"))
                    .unwrap_or_else(|| format!("thread {tid}"));
                w.push(&Record::ThreadName(kreplay_common::stream::ThreadName {
                    tid,
                    name: thread,
                }))?;
                Ok(slot.insert(w))
            }
        }
    }

    /// Appends one call to its thread's stream, creating the stream on first sight.
    pub fn push(&mut self, r: &CallRecord) -> Result<(), StreamError> {
        let w = self.thread(r.pid, r.tid)?;
        w.push(&Record::ApiCall(ApiCall {
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
                .map(|(pid, tid)| self.dir.join(format!("probes-{pid}-{tid}.krs"))),
        );
        files.sort();
        files
    }

    /// Flushes every stream; returns the stream files written.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, StreamError> {
        let files = self.files();
        self.control.flush()?;
        for w in self.threads.values_mut() {
            w.flush()?;
        }
        Ok(files)
    }
}
