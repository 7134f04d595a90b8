//! The CLI's end of the control channel: a listening socket in the target's `/tmp`, that only
//! the target's owner can open and that is removed as soon as the tool connected, and the
//! connected session.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kreplay_common::control::{self, DONE, LIMIT, READY};
use kreplay_common::replay_config::ReplaySettings;

use super::{AttachError, DONE_TIMEOUT};

/// A socket waiting for the tool; its file is removed when this is dropped.
pub struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AttachError {
    let what = what.into();
    move |source| AttachError::Io { what, source }
}

impl Listener {
    /// Listens at `path`, owned by `uid`:`gid` with mode 0600 (the target's user may connect).
    pub fn bind(path: &Path, uid: u32, gid: u32) -> Result<Listener, AttachError> {
        let listener =
            UnixListener::bind(path).map_err(io(format!("listening at {}", path.display())))?;
        let l = Listener {
            listener,
            path: path.to_path_buf(),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("chmod {}", path.display())))?;
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .map_err(io(format!("chown {}", path.display())))?;
        Ok(l)
    }

    /// The tool's connection, from process `pid` only (its peer credentials are checked),
    /// within `timeout`.
    pub fn accept(self, pid: i32, timeout: Duration) -> Result<Session, AttachError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(AttachError::Timeout {
                    pid,
                    what: "connect",
                    ms: timeout.as_millis(),
                });
            }
            let mut p = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(100) as i32) };
            if n <= 0 {
                if crate::inject::target::state(pid).is_none() {
                    return Err(crate::inject::InjectError::ProcessGone { pid }.into());
                }
                continue;
            }
            let (sock, _) = self.listener.accept().map_err(io("accepting"))?;
            if peer_pid(&sock) == Some(pid) {
                return Ok(Session {
                    sock,
                    pid,
                    pending: Vec::new(),
                });
            }
            tracing::warn!("a process other than {pid} connected to the control socket: closed it");
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The connecting process of `sock` (`SO_PEERCRED`), in kreplay's pid namespace.
fn peer_pid(sock: &UnixStream) -> Option<i32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket and an out-buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.pid)
}

/// What [`Session::poll`] heard from the tool.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// Nothing (or nothing kreplay acts on) within the wait.
    Nothing,
    /// The session's `--max-dispatches` replays are written ([`LIMIT`]).
    Limit,
    /// The replay session's counts: dispatches replayed, passes, ns inside kreplay
    /// ([`control::PROGRESS`]).
    Progress([u64; 3]),
    /// The tool closed its end: its session is over.
    Closed,
}

/// A connected session with the tool in process `pid`: it lasts until [`Session::end`], or
/// until this is dropped, or kreplay dies (the socket closes in every case).
#[derive(Debug)]
pub struct Session {
    sock: UnixStream,
    pid: i32,
    /// Bytes read past the last whole line.
    pending: Vec<u8>,
}

impl Session {
    /// The target process.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends `settings` and waits up to `timeout` for the tool's [`READY`].
    pub fn configure(
        mut self,
        settings: &ReplaySettings,
        timeout: Duration,
    ) -> Result<Session, AttachError> {
        self.sock
            .write_all(&control::encode(settings))
            .map_err(io("sending the settings"))?;
        let pid = self.pid;
        match self.line(timeout, "answer the settings")?.as_deref() {
            Some(READY) => Ok(self),
            Some(l) if l.starts_with("error: ") => Err(AttachError::Refused {
                pid,
                reason: l["error: ".len()..].to_owned(),
            }),
            Some(l) => Err(AttachError::Protocol {
                pid,
                line: l.to_owned(),
            }),
            None => Err(AttachError::Protocol {
                pid,
                line: "(closed before answering)".into(),
            }),
        }
    }

    /// Ends the session: closes kreplay's sending side and waits for the tool's [`DONE`]
    /// (its stream written and closed); a process that exited meanwhile is a normal end.
    pub fn end(mut self) -> Result<(), AttachError> {
        let pid = self.pid;
        self.sock
            .shutdown(std::net::Shutdown::Write)
            .map_err(io("closing the control channel"))?;
        let mut answer = self.line(DONE_TIMEOUT, "stop")?;
        // A replay's limit and progress lines may still be unread.
        while answer
            .as_deref()
            .is_some_and(|l| l == LIMIT || control::parse_progress(l).is_some())
        {
            answer = self.line(DONE_TIMEOUT, "stop")?;
        }
        match answer.as_deref() {
            Some(DONE) => Ok(()),
            Some(l) => Err(AttachError::Protocol {
                pid,
                line: l.to_owned(),
            }),
            // The process exited: its tool flushed its stream in its exit handlers.
            None if matches!(crate::inject::target::state(pid), None | Some('Z' | 'X')) => Ok(()),
            None => Err(AttachError::Protocol {
                pid,
                line: "(closed without done)".into(),
            }),
        }
    }

    /// What the tool said within `wait`, while a session runs.
    pub fn poll(&mut self, wait: Duration) -> Heard {
        match self.line(wait, "say its replays are done") {
            Ok(Some(l)) if l == LIMIT => Heard::Limit,
            Ok(Some(l)) => match control::parse_progress(&l) {
                Some(c) => Heard::Progress(c),
                None => {
                    tracing::debug!(
                        pid = self.pid,
                        line = l,
                        "unexpected line from kreplay-tool"
                    );
                    Heard::Nothing
                }
            },
            // The tool's end closed: its session is over ([`Session::end`] says how).
            Ok(None) => Heard::Closed,
            Err(_) => Heard::Nothing,
        }
    }

    /// The next line from the tool (`None` at EOF), within `timeout`.
    fn line(
        &mut self,
        timeout: Duration,
        what: &'static str,
    ) -> Result<Option<String>, AttachError> {
        let deadline = Instant::now() + timeout;
        let mut b = [0u8; 256];
        loop {
            if let Some(i) = self.pending.iter().position(|&c| c == b'\n') {
                let line = String::from_utf8_lossy(&self.pending[..i]).into_owned();
                self.pending.drain(..=i);
                return Ok(Some(line));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(AttachError::Timeout {
                    pid: self.pid,
                    what,
                    ms: timeout.as_millis(),
                });
            }
            self.sock
                .set_read_timeout(Some(left))
                .map_err(io("setting a read timeout"))?;
            match self.sock.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(n) => self.pending.extend_from_slice(&b[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted
                            | std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(io("reading from kreplay-tool")(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session whose tool end is `tool`, in this process.
    fn pair() -> (Session, UnixStream) {
        let (cli, tool) = UnixStream::pair().unwrap();
        let session = Session {
            sock: cli,
            pid: std::process::id() as i32,
            pending: Vec::new(),
        };
        (session, tool)
    }

    #[test]
    fn the_limit_line_is_seen_once_and_lines_split_across_reads_are_whole() {
        let wait = Duration::from_millis(10);
        let (mut s, mut tool) = pair();
        assert_eq!(s.poll(wait), Heard::Nothing, "nothing sent");
        tool.write_all(b"lim").unwrap();
        assert_eq!(s.poll(wait), Heard::Nothing, "half a line");
        tool.write_all(b"it\ndone\n").unwrap();
        assert_eq!(s.poll(wait), Heard::Limit);
        // The rest stays for `end`.
        s.end().unwrap();
        let (mut s, tool) = pair();
        drop(tool);
        assert_eq!(s.poll(wait), Heard::Closed);
    }

    #[test]
    fn end_takes_an_unread_limit_line_before_done() {
        let (s, mut tool) = pair();
        tool.write_all(b"limit\ndone\n").unwrap();
        s.end().unwrap();
        let (s, mut tool) = pair();
        tool.write_all(b"ready\n").unwrap();
        match s.end() {
            Err(AttachError::Protocol { line, .. }) => assert_eq!(line, "ready"),
            other => panic!("{other:?}"),
        }
    }
}
