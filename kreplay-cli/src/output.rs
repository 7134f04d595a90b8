//! Writing outputs without destroying what is already there: kreplay never removes or
//! truncates a file it did not create in this run.
//!
//! - A trace is written under a temporary name in its own directory (`.NAME.tmp-PID`) and
//!   renamed over `NAME` only once it is complete ([`PendingFile`]): a failed or interrupted
//!   write removes the temporary file and leaves an old `NAME` as it was.
//! - An output that is one of the inputs (the same device and inode: by its own name, a hard
//!   link or a symlink) is refused ([`refuse_input_as_output`]).
//! - A directory kreplay writes into is one it created in this run ([`fresh_dir`]: `mkdir`,
//!   which fails when the name exists). When the name is taken, by anyone, the next free
//!   `NAME.2`, `NAME.3`, … is used instead, and cleaning up ([`remove_own`]) removes only the
//!   files this run wrote there, then the directory if that left it empty.
use std::{
    ffi::OsString,
    fs::{self, File, OpenOptions},
    io,
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Path, PathBuf},
    sync::atomic::{AtomicI32, Ordering},
};

use anyhow::{Result, bail};

/// Most numbered alternatives tried for a taken name.
const MAX_TRIES: u32 = 1000;

/// A file being written under a temporary name next to its destination; removed unless
/// [`PendingFile::commit`] renames it over the destination.
#[derive(Debug)]
pub struct PendingFile {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

/// The directory `path` lives in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl PendingFile {
    /// Creates `.NAME.tmp-PID` (or `.NAME.tmp-PID-N` when that is taken) beside `dest`;
    /// `dest` itself is not touched. Fails when `dest` is a directory.
    pub fn create(dest: &Path) -> io::Result<(PendingFile, File)> {
        if fs::metadata(dest).is_ok_and(|m| m.is_dir()) {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        let Some(name) = dest.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file name",
            ));
        };
        let dir = parent_of(dest);
        let pid = std::process::id();
        for n in 0..MAX_TRIES {
            let mut tmp_name = OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".tmp-{pid}"));
            if n > 0 {
                tmp_name.push(format!("-{n}"));
            }
            let tmp = dir.join(tmp_name);
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    crate::quick_exit::set_pending(Some(&tmp));
                    return Ok((
                        PendingFile {
                            tmp,
                            dest: dest.to_path_buf(),
                            committed: false,
                        },
                        file,
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::from_raw_os_error(libc::EEXIST))
    }

    /// The temporary file's path.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs `file` (the one [`PendingFile::create`] returned) and renames it over the
    /// destination.
    pub fn commit(mut self, file: File) -> io::Result<()> {
        file.sync_all()?;
        drop(file);
        fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        crate::quick_exit::set_pending(None);
        Ok(())
    }
}

impl Drop for PendingFile {
    /// Removes the temporary file (this run created it) unless it was committed.
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
            crate::quick_exit::set_pending(None);
        }
    }
}

/// Fails with the reason when a file cannot be created beside `dest` (or `dest` is a
/// directory); creates and removes a temporary file, and leaves `dest` as it is.
pub fn check_writable(dest: &Path) -> io::Result<()> {
    PendingFile::create(dest).map(drop)
}

/// (device, inode) of `path`, following symlinks; `None` when it does not exist.
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuses an `output` that is one of `inputs` (the same file: same device and inode), in
/// one line naming both.
pub fn refuse_input_as_output(inputs: &[PathBuf], output: &Path) -> Result<()> {
    let Some(out) = identity(output) else {
        return Ok(());
    };
    if let Some(input) = inputs.iter().find(|i| identity(i) == Some(out)) {
        bail!(
            "the output {} is also an input ({}): write the trace elsewhere",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

/// Creates a new directory at `want`, or at `want.2`, `want.3`, … when that name is taken;
/// returns the one created. Nothing that exists is written to.
pub fn fresh_dir(want: &Path, mode: u32) -> io::Result<PathBuf> {
    let mut builder = fs::DirBuilder::new();
    builder.mode(mode);
    for n in 1..=MAX_TRIES {
        let path = if n == 1 {
            want.to_path_buf()
        } else {
            let mut name = want.as_os_str().to_owned();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        match builder.create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// Removes `files` (which this run created in `dir`), then `dir` if that left it empty;
/// returns whether `dir` is gone. Anything else in `dir` stays, and so does `dir`.
pub fn remove_own(dir: &Path, files: &[PathBuf]) -> bool {
    for f in files {
        let _ = fs::remove_file(f);
    }
    fs::remove_dir(dir).is_ok()
}

/// The signal that interrupted this run (0: none), set by [`catch_interrupts`]' handler.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_interrupt(sig: libc::c_int) {
    INTERRUPTED.store(sig, Ordering::Relaxed);
}

/// From now on SIGINT, SIGTERM and SIGHUP only set a flag ([`interrupted`]), which a merge
/// checks between records: it then stops and removes its temporary file.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is fully initialized (zeroed, then the handler and an empty mask).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_interrupt as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that interrupted this run since [`catch_interrupts`], if one did.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kreplay-output-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_pending_file_replaces_the_destination_only_on_commit() {
        let d = scratch("pending");
        let dest = d.join("t.pftrace");
        fs::write(&dest, b"old").unwrap();
        let (p, mut f) = PendingFile::create(&dest).unwrap();
        let tmp = format!(".t.pftrace.tmp-{}", std::process::id());
        assert_eq!(p.tmp_path(), d.join(&tmp));
        io::Write::write_all(&mut f, b"new").unwrap();
        assert_eq!(listing(&d), [tmp.as_str(), "t.pftrace"]);
        drop((p, f));
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        assert_eq!(listing(&d), ["t.pftrace"]);
        let (p, mut f) = PendingFile::create(&dest).unwrap();
        io::Write::write_all(&mut f, b"new").unwrap();
        p.commit(f).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
        assert_eq!(listing(&d), ["t.pftrace"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_taken_temporary_name_is_not_truncated() {
        let d = scratch("taken-tmp");
        let dest = d.join("t");
        let taken = d.join(format!(".t.tmp-{}", std::process::id()));
        fs::write(&taken, b"someone's").unwrap();
        let (p, _f) = PendingFile::create(&dest).unwrap();
        assert_eq!(
            p.tmp_path(),
            d.join(format!(".t.tmp-{}-1", std::process::id()))
        );
        drop(p);
        assert_eq!(fs::read(&taken).unwrap(), b"someone's");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_taken_directory_name_gets_the_next_free_number_and_only_own_files_are_removed() {
        let d = scratch("fresh");
        let want = d.join("x.streams");
        fs::create_dir(&want).unwrap();
        fs::create_dir(d.join("x.streams.2")).unwrap();
        let got = fresh_dir(&want, 0o777).unwrap();
        assert_eq!(got, d.join("x.streams.3"));
        fs::write(got.join("a.krs"), b"").unwrap();
        assert!(remove_own(&got, &[got.join("a.krs")]));
        assert_eq!(listing(&d), ["x.streams", "x.streams.2"]);
        let got = fresh_dir(&want, 0o777).unwrap();
        fs::write(got.join("a.krs"), b"").unwrap();
        fs::write(got.join("theirs"), b"kept").unwrap();
        assert!(!remove_own(&got, &[got.join("a.krs")]));
        assert_eq!(listing(&got), ["theirs"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_same_file_under_another_name_is_refused() {
        let d = scratch("same");
        let a = d.join("a.krs");
        fs::write(&a, b"x").unwrap();
        let link = d.join("link");
        fs::hard_link(&a, &link).unwrap();
        let err = refuse_input_as_output(&[d.join("b.krs"), a.clone()], &link).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the output {} is also an input ({}): write the trace elsewhere",
                link.display(),
                a.display()
            )
        );
        assert!(refuse_input_as_output(&[a], &d.join("new.pftrace")).is_ok());
        fs::remove_dir_all(&d).unwrap();
    }
}
