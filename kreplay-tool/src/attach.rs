//! The tool's side of `kreplay -p PID` (`docs/attach.md`): the CLI, having loaded the tool
//! into a running process, calls [`kreplay_attach`] in one of its threads with the path of a
//! Unix socket it listens on. The call only starts the session's thread and returns; that
//! thread connects, reads the settings ([`kreplay_common::control`]), turns on what they ask
//! for, answers, then waits for the CLI's end of the socket to close (its `shutdown`, its
//! exit, or its death by SIGKILL: the kernel closes the socket in every case). Then it turns
//! everything off again, flushes the stream, answers `done` if the CLI still listens, and
//! the tool is inert until the next session.
//!
//! In a CUDA process the session starts the GPU timeline (CUPTI activity, [`crate::cupti`]),
//! or replay when the settings ask for more than one pass ([`crate::cuda::attached`]). In an HSA process started with
//! the tool and `KREPLAY_ATTACH=1` it starts the timeline (its queues' profiling) and replay
//! when asked ([`crate::hsa::attach`]).

use core::ffi::{CStr, c_char};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kreplay_common::control::{self, DONE, LIMIT, MAX_MESSAGE, READY, entry};
use kreplay_common::replay_config::ReplaySettings;
use std::time::Instant;

/// Set while a session runs (its thread exists).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// How long the first CUDA session waits for a launch callback while priming CUPTI's callbacks.
const PRIME_WAIT: Duration = Duration::from_millis(100);
/// How long the CLI has to send its settings once connected.
const SETTINGS_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a replay session with `--max-dispatches` looks whether its replays are done.
const LIMIT_CHECK: Duration = Duration::from_millis(50);
/// How often a replay session sends its progress line when its counts changed.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Starts a session with the kreplay listening at `path` (a NUL-terminated path in this
/// process's mount namespace). Returns at once: [`entry::STARTED`], [`entry::BUSY`] (a session
/// runs), [`entry::BAD_PATH`], [`entry::NO_THREAD`] or [`entry::PANICKED`].
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kreplay_attach(path: *const c_char) -> i32 {
    let path = if path.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { CStr::from_ptr(path) }.to_bytes().to_vec())
    };
    crate::fault::guard(move || begin(path)).unwrap_or(entry::PANICKED)
}

fn begin(path: Option<Vec<u8>>) -> i32 {
    use std::os::unix::ffi::OsStringExt;
    let Some(path) = path.filter(|p| p.first() == Some(&b'/')) else {
        return entry::BAD_PATH;
    };
    let path = PathBuf::from(std::ffi::OsString::from_vec(path));
    if ACTIVE.swap(true, Ordering::AcqRel) {
        return entry::BUSY;
    }
    let spawned = std::thread::Builder::new()
        .name("kreplay-ctl".into())
        .spawn(move || {
            let _ = crate::fault::guard(|| session(&path));
            ACTIVE.store(false, Ordering::Release);
        });
    match spawned {
        Ok(_) => entry::STARTED,
        Err(_) => {
            ACTIVE.store(false, Ordering::Release);
            entry::NO_THREAD
        }
    }
}

/// One session, on its own thread.
fn session(path: &std::path::Path) {
    crate::logging::init_logging();
    let mut sock = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("kreplay: cannot reach kreplay at {}: {e}", path.display());
            return;
        }
    };
    let settings = match read_settings(&mut sock) {
        Ok(s) => s,
        Err(why) => {
            let _ = send(&sock, &format!("error: {why}"));
            return;
        }
    };
    if let Err(why) = apply(&settings) {
        let _ = send(&sock, &format!("error: {why}"));
        finish();
        return;
    }
    if send(&sock, READY).is_err() {
        finish();
        return;
    }
    let replaying = settings.passes.is_some_and(|p| p > 1);
    wait_for_close(
        &mut sock,
        replaying,
        replaying && settings.max_dispatches.is_some(),
    );
    finish();
    let _ = send(&sock, DONE);
}

/// Reads one settings message.
fn read_settings(sock: &mut UnixStream) -> Result<ReplaySettings, String> {
    sock.set_read_timeout(Some(SETTINGS_TIMEOUT))
        .map_err(|e| format!("setting a read timeout: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(n) = control::message_len(&buf) {
            return control::decode(&buf[..n]).map_err(|e| e.to_string());
        }
        if buf.len() > MAX_MESSAGE {
            return Err("the settings message is too long".into());
        }
        match sock.read(&mut chunk) {
            Ok(0) => return Err("kreplay closed the channel before its settings".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the settings: {e}")),
        }
    }
}

/// Turns on what `s` asks for.
fn apply(s: &ReplaySettings) -> Result<(), String> {
    let hsa = crate::hsa::attach::loaded_by_hsa();
    if s.gpu_timeline != Some(true) {
        return Err("nothing to do: the settings ask for no GPU timeline".into());
    }
    let dir = s
        .output_dir
        .clone()
        .ok_or("no stream directory (KREPLAY_OUTPUT_DIR) in the settings")?;
    if !dir.is_dir() {
        return Err(format!(
            "the stream directory {} is not visible from this process",
            dir.display()
        ));
    }
    crate::record::set_output_dir(Some(dir)).map_err(|e| format!("flushing the stream: {e}"))?;
    if hsa {
        return crate::hsa::attach::start(s);
    }
    // CUPTI 13 on the H200 crashed the process (a fault inside libcupti, in cuLaunchKernel's
    // callback) when its first callback subscriber, a replay session's, came after an activity
    // session: in 5 of 7 runs of a trace then a replay. A subscriber before the first activity
    // never did (2 runs with a replay first, 5 with this priming). So the first session of a
    // process subscribes until one launch callback has run (or 100 ms), before anything else.
    crate::cupti::callbacks::prime(PRIME_WAIT);
    if s.passes.is_some_and(|p| p > 1) {
        // As under `kreplay replay -- CMD`: the replay's own records, no CUPTI activity.
        return crate::cuda::attached::start(s);
    }
    crate::cupti::start().map_err(|e| format!("CUPTI is unusable: {e}"))
}

/// Blocks until the CLI's end closes (EOF or an error); whatever it sends is ignored. While
/// `replaying`, sends the session's counts every [`PROGRESS_EVERY`] when they changed
/// ([`control::progress_line`]). With `limited` (a replay with `--max-dispatches`), looks every
/// [`LIMIT_CHECK`] whether that many replays are written, and then tells the CLI once
/// ([`LIMIT`]).
fn wait_for_close(sock: &mut UnixStream, replaying: bool, limited: bool) {
    let mut told = !limited;
    let check = replaying.then_some(LIMIT_CHECK);
    if sock.set_read_timeout(check).is_err() {
        return;
    }
    let base = crate::progress::totals();
    let (mut sent, mut last_sent) = ([0u64; 3], Instant::now());
    let mut b = [0u8; 64];
    loop {
        match sock.read(&mut b) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
        if replaying && last_sent.elapsed() >= PROGRESS_EVERY {
            let now = crate::progress::totals();
            let c: [u64; 3] = std::array::from_fn(|i| now[i].saturating_sub(base[i]));
            last_sent = Instant::now();
            if c != sent {
                sent = c;
                if send(sock, &control::progress_line(c)).is_err() {
                    return;
                }
            }
        }
        if !told && (crate::hsa::attach::limit_reached() || crate::cuda::attached::limit_reached())
        {
            told = true;
            if send(sock, LIMIT).is_err() {
                return;
            }
        }
    }
}

/// Turns everything off and writes the stream out: the tool is inert again.
fn finish() {
    crate::hsa::attach::stop();
    crate::cuda::attached::stop();
    crate::cupti::stop();
    if let Err(e) = crate::record::set_output_dir(None) {
        tracing::warn!("kreplay: the last flush of the tool stream failed: {e}");
    }
    crate::record::pause_global_flusher();
}

/// Sends one line, without SIGPIPE when the CLI is gone: Rust programs ignore SIGPIPE, but the
/// application this runs in may not, so `send` with `MSG_NOSIGNAL` is used, not a plain write.
fn send(sock: &UnixStream, line: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let msg = format!("{line}\n");
    // SAFETY: a valid socket and buffer of `msg.len()` bytes.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
