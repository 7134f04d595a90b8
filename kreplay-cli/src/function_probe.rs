//! `kreplay probe`'s logic, apart from the probes, rings and terminal it acts on: the checks of
//! a request, where the probe is attached, when the loop stops, the calls it counts, and the
//! lines it prints. The command drives a [`Watch`] with its wake-ups; the tests drive it with
//! plain values.
use std::path::{Path, PathBuf};

use kreplay_common::{
    api::{NO_ARG, USER_FUNCTION},
    probe::{CallRecord, Cookie, Sample, mode, role},
};

use crate::probes::{
    elf::SymbolTable,
    loader::{Counters, Programs, Scope},
};

pub mod watch;

/// The programs attached: empty ones with `--bare` (the bare cost of the probes), else the
/// recording ones.
pub fn programs(bare: bool) -> Programs {
    if bare {
        Programs::Bare
    } else {
        Programs::Record
    }
}

/// Why a request cannot be probed; the text names what the user typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// `--ringbuf-bytes` is not a power of two of at least a page.
    #[error("--ringbuf-bytes must be a power of two of at least 4096, got {0}")]
    RingbufBytes(u32),
    /// Both `-p` and a command.
    #[error("give either -p PID or a command after --, not both")]
    PidsAndCommand,
    /// A `-p` process does not exist.
    #[error("no such process: {0}")]
    NoSuchProcess(u32),
    /// `--lib` does not exist.
    #[error("library not found: {}", .0.display())]
    LibraryNotFound(PathBuf),
    /// `--symbol` is not a function of `--lib`.
    #[error("symbol {symbol} not found in {} ({functions} functions there)", .lib.display())]
    SymbolNotFound {
        /// The name asked for.
        symbol: String,
        /// The library searched.
        lib: PathBuf,
        /// How many functions it defines.
        functions: usize,
    },
}

/// The arguments of `kreplay probe` that are checked before anything is loaded.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `--lib`.
    pub lib: &'a Path,
    /// `-p PID`, repeatable.
    pub pids: &'a [u32],
    /// The command after `--`.
    pub command: &'a [String],
    /// `--ringbuf-bytes`.
    pub ringbuf_bytes: u32,
}

impl Request<'_> {
    /// Checks the request in the order the errors are reported; `exists` says whether a path
    /// exists (`/proc/PID` for a process).
    pub fn check(&self, exists: impl Fn(&Path) -> bool) -> Result<(), RequestError> {
        if !self.ringbuf_bytes.is_power_of_two() || self.ringbuf_bytes < 4096 {
            return Err(RequestError::RingbufBytes(self.ringbuf_bytes));
        }
        if !self.pids.is_empty() && !self.command.is_empty() {
            return Err(RequestError::PidsAndCommand);
        }
        if let Some(&pid) = self
            .pids
            .iter()
            .find(|p| !exists(Path::new(&format!("/proc/{p}"))))
        {
            return Err(RequestError::NoSuchProcess(pid));
        }
        if !exists(self.lib) {
            return Err(RequestError::LibraryNotFound(self.lib.to_path_buf()));
        }
        Ok(())
    }

    /// The file offset of `symbol` in the request's library, whose functions `table` holds.
    pub fn offset_in(&self, table: &SymbolTable, symbol: &str) -> Result<u64, RequestError> {
        table
            .offset(symbol)
            .ok_or_else(|| RequestError::SymbolNotFound {
                symbol: symbol.to_owned(),
                lib: self.lib.to_path_buf(),
                functions: table.len(),
            })
    }

    /// Where the probe is attached: the started command (`child`), each `-p` process, or
    /// every process.
    pub fn scopes(&self, child: Option<u32>) -> Vec<Scope> {
        match child {
            Some(pid) => vec![Scope::Pid(pid)],
            None if !self.pids.is_empty() => self.pids.iter().map(|&p| Scope::Pid(p)).collect(),
            None => vec![Scope::All],
        }
    }

    /// The line said once the probe is in place: from here on every call is seen.
    pub fn probing_line(&self, symbol: &str, child: Option<u32>) -> String {
        let what = match child {
            Some(pid) => format!(
                "{} (pid {pid})",
                self.command.first().map_or("", String::as_str)
            ),
            None if !self.pids.is_empty() => format!(
                "pid {}",
                self.pids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "every process".to_string(),
        };
        format!(
            "kreplay: probing {symbol} in {} for {what}; stop with Ctrl-C",
            self.lib.display()
        )
    }
}

/// The cookie of a user-named function: no API of kreplay's tables, its stack words kept.
pub fn user_cookie() -> Cookie {
    Cookie::new(
        USER_FUNCTION,
        NO_ARG,
        mode::STACK_WORDS,
        0,
        role::NONE,
        NO_ARG,
        NO_ARG,
    )
}

/// What woke `kreplay probe`'s loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A batch of records was read (and has gone to the sink).
    Batch,
    /// The drain timer fired: records may wait without a wake-up.
    DrainTick,
    /// The periodic check whether the `-p` processes still exist.
    ExitCheck,
    /// The started command exited with this status.
    Exited(i32),
    /// Ctrl-C, SIGTERM or `--duration`.
    Stop,
}

/// What the loop does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait for the next wake-up.
    Continue,
    /// Read every record the rings hold, then wait.
    Drain,
    /// Stop: read what is left and report.
    Finish,
}

/// The loop's state: the `-p` processes it watches and the exit code it ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pids: Vec<u32>,
    code: u8,
}

impl Watch {
    /// A loop that ends when all of `pids` (if any) have exited.
    pub fn new(pids: &[u32]) -> Watch {
        Watch {
            pids: pids.to_vec(),
            code: 0,
        }
    }

    /// Whether the loop wants [`Wake::ExitCheck`]s (only with `-p`).
    pub fn checks_exits(&self) -> bool {
        !self.pids.is_empty()
    }

    /// Handles one wake-up; `alive` says whether a process still exists.
    pub fn on(&mut self, wake: Wake, alive: impl Fn(u32) -> bool) -> Next {
        match wake {
            Wake::Batch => Next::Continue,
            Wake::DrainTick => Next::Drain,
            Wake::ExitCheck if self.pids.iter().all(|&p| !alive(p)) => Next::Finish,
            Wake::ExitCheck => Next::Continue,
            Wake::Exited(status) => {
                self.code = status.clamp(0, 255) as u8;
                Next::Finish
            }
            Wake::Stop => Next::Finish,
        }
    }

    /// The exit code of `kreplay probe`: the started command's, else 0.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

/// The calls seen so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Calls {
    /// How many.
    pub count: u64,
}

impl Calls {
    /// Counts `s` when it is a call and returns it; a user-named function names no kernel, so
    /// any other record is left out.
    pub fn take(&mut self, s: Sample) -> Option<CallRecord> {
        match s {
            Sample::Call(r) => {
                self.count += 1;
                Some(r)
            }
            Sample::Name(_) => None,
        }
    }
}

/// One call as printed: a JSON object, or a text line with the arguments and return value in
/// hex and the duration; with its newline.
pub fn call_line(r: &CallRecord, symbol: &str, json: bool) -> String {
    let a = r.args;
    if json {
        format!(
            "{{\"pid\":{},\"tid\":{},\"enter_ns\":{},\"exit_ns\":{},\"args\":[{},{},{},{},{},{}],\"ret\":{}}}\n",
            r.pid, r.tid, r.enter_ns, r.exit_ns, a[0], a[1], a[2], a[3], a[4], a[5], r.ret
        )
    } else {
        format!(
            "{:>7} {:>7} {symbol}({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x}) = {:#x}  {} ns\n",
            r.pid,
            r.tid,
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            r.ret,
            r.exit_ns.saturating_sub(r.enter_ns)
        )
    }
}

/// The closing line: calls recorded, and every cause of a lost one.
pub fn report_line(calls: u64, c: &Counters, malformed: u64) -> String {
    format!(
        "kreplay: {calls} calls recorded; dropped: {} (ring buffer full {}, nested too deep {}, \
         thread slot shared {}); returns without entry {}; unreadable records {malformed}",
        c.lost(),
        c.ringbuf_drops,
        c.entry_map_full,
        c.slot_clash,
        c.missing_entry
    )
}

#[cfg(test)]
mod tests;
