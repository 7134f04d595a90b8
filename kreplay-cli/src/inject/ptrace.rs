//! One traced thread: seize, stop, registers and memory, continue, and a detach that always
//! puts back what was changed (also on error paths and panics, from `Drop`).
use std::{
    fs::File,
    io,
    os::unix::fs::FileExt,
    time::{Duration, Instant},
};

use super::error::InjectError;

/// The thread's general registers.
pub type Regs = libc::user_regs_struct;

/// How a thread stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A `PTRACE_INTERRUPT` or group stop (`PTRACE_EVENT_STOP`), with its signal.
    Event(i32),
    /// A signal-delivery stop: the thread is about to receive this signal.
    Signal(i32),
    /// The thread or process exited.
    Exited,
}

/// A thread under `PTRACE_SEIZE`. Dropping it restores the saved registers and memory and
/// detaches; signals that arrived while it was held are sent again after the detach.
pub struct Tracee {
    pid: i32,
    tid: i32,
    mem: Option<File>,
    stopped: bool,
    gone: bool,
    saved_regs: Option<Regs>,
    saved_mem: Vec<(u64, Vec<u8>)>,
    deferred: Vec<i32>,
}

fn last_error(call: &'static str, tid: i32) -> InjectError {
    InjectError::Ptrace {
        call,
        tid,
        source: io::Error::last_os_error(),
    }
}

impl Tracee {
    /// `PTRACE_SEIZE` thread `tid` of process `pid` (no stop yet). The raw OS error is
    /// returned so the caller can explain a denial.
    pub fn seize(pid: i32, tid: i32) -> Result<Tracee, io::Error> {
        // SAFETY: PTRACE_SEIZE takes a thread id, a null address and an options word; it reads
        // or writes no memory of ours.
        let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0usize, 0usize) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Tracee {
            pid,
            tid,
            mem: None,
            stopped: false,
            gone: false,
            saved_regs: None,
            saved_mem: Vec::new(),
            deferred: Vec::new(),
        })
    }

    /// The traced thread.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Signals that arrived while the thread was held, to be sent again after the detach.
    pub fn defer(&mut self, sig: i32) {
        if !self.deferred.contains(&sig) {
            self.deferred.push(sig);
        }
    }

    /// Stops the running thread with `PTRACE_INTERRUPT` and waits for the stop. A signal
    /// arriving first stops it too; that signal is deferred.
    pub fn interrupt(&mut self, timeout: Duration) -> Result<(), InjectError> {
        // SAFETY: PTRACE_INTERRUPT of a seized thread; no memory is passed.
        let rc = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, self.tid, 0usize, 0usize) };
        if rc != 0 {
            return Err(self.gone_or(last_error("ptrace(PTRACE_INTERRUPT)", self.tid)));
        }
        match self.wait(timeout, "the interrupt stop")? {
            Stop::Event(_) => Ok(()),
            Stop::Signal(sig) => {
                self.defer(sig);
                Ok(())
            }
            Stop::Exited => Err(InjectError::ProcessGone { pid: self.pid }),
        }
    }

    /// Waits up to `timeout` for the thread's next stop.
    pub fn wait(
        &mut self,
        timeout: Duration,
        waiting_for: &'static str,
    ) -> Result<Stop, InjectError> {
        let deadline = Instant::now() + timeout;
        let mut nap = Duration::from_micros(20);
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status into the int it is given.
            let rc = unsafe { libc::waitpid(self.tid, &mut status, libc::__WALL | libc::WNOHANG) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                if err.raw_os_error() == Some(libc::ECHILD) {
                    self.gone = true;
                    return Ok(Stop::Exited);
                }
                return Err(InjectError::Ptrace {
                    call: "waitpid",
                    tid: self.tid,
                    source: err,
                });
            }
            if rc == self.tid {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    self.gone = true;
                    return Ok(Stop::Exited);
                }
                if libc::WIFSTOPPED(status) {
                    self.stopped = true;
                    let sig = libc::WSTOPSIG(status);
                    return Ok(if status >> 16 == libc::PTRACE_EVENT_STOP {
                        Stop::Event(sig)
                    } else {
                        Stop::Signal(sig)
                    });
                }
                continue;
            }
            if Instant::now() >= deadline {
                return Err(InjectError::Timeout {
                    tid: self.tid,
                    ms: timeout.as_millis(),
                    waiting_for,
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_micros(100));
        }
    }

    /// Resumes the stopped thread (`PTRACE_CONT`) without delivering a signal.
    pub fn cont(&mut self) -> Result<(), InjectError> {
        // SAFETY: PTRACE_CONT of a stopped, seized thread with signal 0; no memory is passed.
        let rc = unsafe { libc::ptrace(libc::PTRACE_CONT, self.tid, 0usize, 0usize) };
        if rc != 0 {
            return Err(self.gone_or(last_error("ptrace(PTRACE_CONT)", self.tid)));
        }
        self.stopped = false;
        Ok(())
    }

    /// The stopped thread's registers.
    pub fn regs(&mut self) -> Result<Regs, InjectError> {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        // SAFETY: PTRACE_GETREGS writes one user_regs_struct into `regs`, which lives until the
        // call returns.
        let rc = unsafe {
            libc::ptrace(
                libc::PTRACE_GETREGS,
                self.tid,
                0usize,
                &mut regs as *mut Regs,
            )
        };
        if rc != 0 {
            return Err(self.gone_or(last_error("ptrace(PTRACE_GETREGS)", self.tid)));
        }
        Ok(regs)
    }

    /// Reads the registers and keeps them to restore at the detach.
    pub fn save_regs(&mut self) -> Result<Regs, InjectError> {
        let regs = self.regs()?;
        self.saved_regs = Some(regs);
        Ok(regs)
    }

    /// Sets the stopped thread's registers.
    pub fn set_regs(&mut self, regs: &Regs) -> Result<(), InjectError> {
        // SAFETY: PTRACE_SETREGS reads one user_regs_struct from `regs`, valid for the call.
        let rc =
            unsafe { libc::ptrace(libc::PTRACE_SETREGS, self.tid, 0usize, regs as *const Regs) };
        if rc != 0 {
            return Err(self.gone_or(last_error("ptrace(PTRACE_SETREGS)", self.tid)));
        }
        Ok(())
    }

    fn mem(&mut self) -> Result<&File, InjectError> {
        if self.mem.is_none() {
            let path = format!("/proc/{}/mem", self.pid);
            let file = File::options()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|source| InjectError::Proc { path, source })?;
            self.mem = Some(file);
        }
        Ok(self.mem.as_ref().expect("opened above"))
    }

    /// Reads `len` bytes of the target's memory at `addr`.
    pub fn read_mem(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, InjectError> {
        let tid = self.tid;
        let mut buf = vec![0u8; len];
        self.mem()?
            .read_exact_at(&mut buf, addr)
            .map_err(|source| InjectError::Ptrace {
                call: "reading /proc/PID/mem",
                tid,
                source,
            })?;
        Ok(buf)
    }

    /// Writes `bytes` at `addr`, keeping the bytes it replaces to put back at the detach.
    pub fn write_mem(&mut self, addr: u64, bytes: &[u8]) -> Result<(), InjectError> {
        let old = self.read_mem(addr, bytes.len())?;
        self.saved_mem.push((addr, old));
        self.write_raw(addr, bytes)
    }

    fn write_raw(&mut self, addr: u64, bytes: &[u8]) -> Result<(), InjectError> {
        let tid = self.tid;
        self.mem()?
            .write_all_at(bytes, addr)
            .map_err(|source| InjectError::Ptrace {
                call: "writing /proc/PID/mem",
                tid,
                source,
            })
    }

    /// Restores the saved registers and memory and detaches; the deferred signals are then
    /// sent again. Errors name the first step that failed (the detach is still attempted).
    pub fn detach(mut self) -> Result<(), InjectError> {
        self.restore_and_detach()
    }

    fn restore_and_detach(&mut self) -> Result<(), InjectError> {
        if self.gone {
            return Ok(());
        }
        let mut first_err = None;
        if !self.stopped
            && let Err(e) = self.interrupt(Duration::from_secs(2))
        {
            first_err = Some(e);
        }
        if self.stopped {
            for (addr, old) in std::mem::take(&mut self.saved_mem).into_iter().rev() {
                if let Err(e) = self.write_raw(addr, &old) {
                    first_err.get_or_insert(e);
                }
            }
            if let Some(regs) = self.saved_regs.take()
                && let Err(e) = self.set_regs(&regs)
            {
                first_err.get_or_insert(e);
            }
        }
        // SAFETY: PTRACE_DETACH of a seized thread with signal 0; no memory is passed.
        let rc = unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, 0usize, 0usize) };
        if rc != 0 && !self.gone {
            let e = self.gone_or(last_error("ptrace(PTRACE_DETACH)", self.tid));
            first_err.get_or_insert(e);
        }
        self.gone = true;
        for sig in std::mem::take(&mut self.deferred) {
            // SAFETY: tgkill sends a signal to one thread; it touches no memory of ours.
            unsafe { libc::syscall(libc::SYS_tgkill, self.pid, self.tid, sig) };
        }
        match first_err {
            Some(InjectError::ProcessGone { .. }) | None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// `ProcessGone` when the thread no longer exists (ESRCH), else `err`.
    fn gone_or(&mut self, err: InjectError) -> InjectError {
        if let InjectError::Ptrace { source, .. } = &err
            && source.raw_os_error() == Some(libc::ESRCH)
            && std::fs::metadata(format!("/proc/{}/task/{}", self.pid, self.tid)).is_err()
        {
            self.gone = true;
            return InjectError::ProcessGone { pid: self.pid };
        }
        err
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if let Err(e) = self.restore_and_detach() {
            tracing::warn!(tid = self.tid, "detaching after an injection error: {e}");
        }
    }
}
