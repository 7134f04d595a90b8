//! Starting a traced command so that it runs no instruction of its own before the probes are
//! attached.
//!
//! The child is forked and blocks reading a pipe before `execvp`; kreplay attaches its probes
//! scoped to the child's pid, then releases it. Everything the child touches between fork and
//! exec is prepared before the fork (argument strings), and the child only calls
//! async-signal-safe functions (`read`, `close`, `execvp`, `write`, `_exit`). When the exec
//! fails the child writes its errno into a second, close-on-exec pipe, so
//! [`Launched::release`] says why the command cannot run (a successful exec closes that pipe).
use std::{ffi::CString, io};

/// A forked child waiting for [`Launched::release`].
#[derive(Debug)]
pub struct Launched {
    /// The child's pid.
    pub pid: u32,
    go_fd: libc::c_int,
    /// The read end of the pipe the child writes its exec errno into.
    err_fd: libc::c_int,
}

/// Exit code the child uses when `execvp` fails (as shells do for "command not found").
pub const EXEC_FAILED: i32 = 127;

/// Forks `argv`, leaving the child blocked until [`Launched::release`]. `env` pairs are set
/// (or replaced) in the command's environment only.
pub fn spawn_paused(argv: &[String], env: &[(String, String)]) -> io::Result<Launched> {
    if argv.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no command given",
        ));
    }
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte"))?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // The child's whole environment, built before the fork (setenv is not async-signal-safe).
    let cenv: Vec<CString> = if env.is_empty() {
        Vec::new()
    } else {
        use std::os::unix::ffi::OsStrExt;
        let mut vars: Vec<Vec<u8>> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(e, _)| k.as_bytes() == e.as_bytes()))
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .collect();
        vars.extend(env.iter().map(|(k, v)| format!("{k}={v}").into_bytes()));
        vars.into_iter()
            .map(CString::new)
            .collect::<Result<_, _>>()
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "environment contains a NUL byte",
                )
            })?
    };
    let mut envp: Vec<*const libc::c_char> = cenv.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    let mut efds = [0 as libc::c_int; 2];
    // SAFETY: as above; both ends close on exec, so a successful exec closes the write end.
    if unsafe { libc::pipe2(efds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: closing the fds this function opened.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
        return Err(err);
    }
    let (err_read, err_write) = (efds[0], efds[1]);
    // SAFETY: the child branch only calls async-signal-safe functions on memory prepared
    // before the fork, then execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let err = io::Error::last_os_error();
        // SAFETY: closing the fds this function opened.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
            libc::close(err_read);
            libc::close(err_write);
        }
        return Err(err);
    }
    if pid == 0 {
        // SAFETY: child side, async-signal-safe calls only (see above).
        unsafe {
            libc::close(write_fd);
            libc::close(err_read);
            let mut byte = 0u8;
            let n = libc::read(read_fd, (&raw mut byte).cast(), 1);
            if n != 1 || byte != b'g' {
                libc::_exit(EXEC_FAILED);
            }
            libc::close(read_fd);
            if cenv.is_empty() {
                libc::execvp(ptrs[0], ptrs.as_ptr());
            } else {
                libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr());
            }
            let errno = *libc::__errno_location();
            libc::write(
                err_write,
                (&raw const errno).cast(),
                size_of::<libc::c_int>(),
            );
            libc::_exit(EXEC_FAILED);
        }
    }
    // SAFETY: parent side: the go pipe's read end and the errno pipe's write end belong to
    // the child now.
    unsafe {
        libc::close(read_fd);
        libc::close(err_write);
    }
    Ok(Launched {
        pid: pid as u32,
        go_fd: write_fd,
        err_fd: err_read,
    })
}

impl Launched {
    /// Lets the child exec its command; waits until it has, and returns the reason when the
    /// exec failed (the child then exits with [`EXEC_FAILED`]).
    pub fn release(mut self) -> io::Result<()> {
        let byte = b'g';
        // SAFETY: go_fd is the pipe's write end, owned by self.
        let n = unsafe { libc::write(self.go_fd, (&raw const byte).cast(), 1) };
        if n != 1 {
            let err = io::Error::last_os_error();
            self.close();
            return Err(err);
        }
        // SAFETY: closing go_fd, owned by self, once: the child has its byte.
        unsafe { libc::close(self.go_fd) };
        self.go_fd = -1;
        let mut errno: libc::c_int = 0;
        let n = loop {
            // SAFETY: reads at most size_of::<c_int>() bytes into errno from the fd self owns.
            let n = unsafe {
                libc::read(
                    self.err_fd,
                    (&raw mut errno).cast(),
                    size_of::<libc::c_int>(),
                )
            };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        self.close();
        match n {
            // End of file: the exec closed the pipe.
            0 => Ok(()),
            n if n == size_of::<libc::c_int>() as isize => Err(io::Error::from_raw_os_error(errno)),
            _ => Err(io::Error::other(
                "the command's exec status could not be read",
            )),
        }
    }

    fn close(&mut self) {
        for fd in [&mut self.go_fd, &mut self.err_fd] {
            if *fd >= 0 {
                // SAFETY: closing an fd this struct owns, once.
                unsafe { libc::close(*fd) };
                *fd = -1;
            }
        }
    }
}

impl Drop for Launched {
    /// Dropping an unreleased child closes the pipe, which makes it exit without running
    /// the command.
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits for `pid` to exit and returns its exit code (128 + signal for a signal death).
pub fn wait_exit(pid: u32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into a valid int.
        let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if rc == pid as libc::pid_t {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else {
        Ok(128 + libc::WTERMSIG(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn_paused_plain(argv: &[String]) -> io::Result<Launched> {
        spawn_paused(argv, &[])
    }

    #[test]
    fn env_pairs_reach_the_command_only() {
        let out = std::env::temp_dir().join(format!("kreplay-launch-env-{}", std::process::id()));
        let _ = std::fs::remove_file(&out);
        // HOME is replaced, KREPLAY_LAUNCH_TEST added; PATH is inherited.
        let l = spawn_paused(
            &[
                "sh".into(),
                "-c".into(),
                format!(
                    "echo \"$HOME|$KREPLAY_LAUNCH_TEST|${{PATH:+path}}\" > {}",
                    out.display()
                ),
            ],
            &[
                ("HOME".into(), "/nowhere".into()),
                ("KREPLAY_LAUNCH_TEST".into(), "a=b c".into()),
            ],
        )
        .unwrap();
        let pid = l.pid;
        l.release().unwrap();
        assert_eq!(wait_exit(pid).unwrap(), 0);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "/nowhere|a=b c|path\n"
        );
        assert!(std::env::var_os("KREPLAY_LAUNCH_TEST").is_none());
        std::fs::remove_file(&out).unwrap();
    }

    #[test]
    fn child_runs_only_after_release() {
        let dir = std::env::temp_dir().join(format!("kreplay-launch-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let l = spawn_paused_plain(&[
            "sh".into(),
            "-c".into(),
            format!("echo ran > {}", dir.display()),
        ])
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!dir.exists(), "the child ran before release");
        let pid = l.pid;
        l.release().unwrap();
        assert_eq!(wait_exit(pid).unwrap(), 0);
        assert_eq!(std::fs::read_to_string(&dir).unwrap(), "ran\n");
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn dropped_child_exits_without_running_and_bad_command_is_127() {
        let l = spawn_paused_plain(&["true".into()]).unwrap();
        let pid = l.pid;
        drop(l);
        assert_eq!(wait_exit(pid).unwrap(), EXEC_FAILED);
        let l = spawn_paused_plain(&["/nonexistent/kreplay-cmd".into()]).unwrap();
        let pid = l.pid;
        let err = l.release().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(wait_exit(pid).unwrap(), EXEC_FAILED);
        // Not executable (mode 0644, which root cannot exec either): the reason is EACCES.
        let file =
            std::env::temp_dir().join(format!("kreplay-launch-noexec-{}", std::process::id()));
        std::fs::write(&file, b"#!/bin/sh\n").unwrap();
        let l = spawn_paused_plain(&[file.display().to_string()]).unwrap();
        let pid = l.pid;
        assert_eq!(l.release().unwrap_err().raw_os_error(), Some(libc::EACCES));
        assert_eq!(wait_exit(pid).unwrap(), EXEC_FAILED);
        std::fs::remove_file(&file).unwrap();
    }
}
