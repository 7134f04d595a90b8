//! The progress line `kreplay replay` keeps on a terminal while the application runs:
//! dispatches replayed, passes and time inside kreplay, read twice a second from the counters
//! the tool adds to ([`kreplay_common::progress`]: a file in the run's directory, mapped shared
//! by both). Off when stderr is not a terminal.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::Duration;

pub use kreplay_common::progress::LEN;
/// File name in the run's directory.
pub const FILE: &str = "progress";

/// The three counters, mapped.
pub struct Progress {
    ptr: *const u64,
    path: PathBuf,
}

impl Progress {
    /// Creates the zeroed counters' file in `dir` and maps it; `None` when it cannot.
    pub fn create(dir: &Path) -> Option<Self> {
        let path = dir.join(FILE);
        let f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .ok()?;
        f.set_len(LEN as u64).ok()?;
        // SAFETY: a new shared read-only mapping of LEN bytes of an open file; checked below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                LEN,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(Self {
            ptr: p as *const u64,
            path,
        })
    }

    /// The file, for the tool's environment and for the run's cleanup.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Dispatches replayed, passes, and nanoseconds inside kreplay, as the tool added them.
    pub fn read(&self) -> [u64; 3] {
        // SAFETY: ptr maps LEN = 3 * 8 bytes, 8-byte aligned (page-aligned); the tool writes
        // them with atomic adds, and an aligned 8-byte volatile load sees a whole value.
        std::array::from_fn(|i| unsafe { core::ptr::read_volatile(self.ptr.add(i)) })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // SAFETY: ptr and LEN are the mapping `create` made, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, LEN) };
    }
}

/// The line for counters `c` (no newline).
pub fn line(c: [u64; 3]) -> String {
    format!(
        "kreplay: {} dispatches replayed, {} passes, {:.1} s inside kreplay",
        c[0],
        c[1],
        c[2] as f64 / 1e9
    )
}

/// Waits for `child`, redrawing the progress line on stderr twice a second when stderr is a
/// terminal and `progress` exists; the line is cleared before returning.
pub fn wait(child: &mut Child, progress: Option<&Progress>) -> std::io::Result<ExitStatus> {
    let progress = progress.filter(|_| std::io::stderr().is_terminal());
    let Some(p) = progress else {
        return child.wait();
    };
    let mut shown = false;
    loop {
        if let Some(status) = child.try_wait()? {
            if shown {
                eprint!("\r\x1b[K");
            }
            return Ok(status);
        }
        let c = p.read();
        if c[2] > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K{}", line(c));
            let _ = err.flush();
            shown = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_file_reads_what_was_written_to_it() {
        let dir = std::env::temp_dir().join(format!("kreplay-progress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = Progress::create(&dir).unwrap();
        assert_eq!(p.read(), [0, 0, 0]);
        let mut bytes = Vec::new();
        for v in [3u64, 30, 2_500_000_000] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(p.path(), &bytes).unwrap();
        assert_eq!(p.read(), [3, 30, 2_500_000_000]);
        assert_eq!(
            line(p.read()),
            "kreplay: 3 dispatches replayed, 30 passes, 2.5 s inside kreplay"
        );
        // A second run's file never replaces this one.
        assert!(Progress::create(&dir).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
