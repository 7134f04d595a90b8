//! Calling an exported function of a library already loaded in a running process, with one
//! string argument: `int FUNCTION(const char *)`, run in one of its threads like the `dlopen`
//! of [`super::load`]. The function is found in the library's own dynamic symbol table and
//! mapped through the target's `/proc/PID/maps`, never by assumed addresses.
use std::{path::Path, time::Duration};

use super::{
    InjectError,
    call::{FAULT_RETURN, Interrupted, frame, interrupted_syscall},
    symbols::{address_of, mapped_file},
    target,
};
use crate::probes::elf::SymbolTable;

/// How long the called function may run.
pub const ENTRY_TIMEOUT: Duration = Duration::from_secs(5);

/// One call made by [`call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryCall {
    /// The function's result (its `int`, sign-extended).
    pub result: i32,
    /// The thread that made the call.
    pub tid: i32,
    /// The system call the thread was stopped in, restarted when it resumed.
    pub interrupted: Interrupted,
    /// How long the thread was held (interrupt to detach).
    pub pause: Duration,
}

/// The mapping of `library` in `pid` (same path, its copy, or the same file), if loaded.
pub fn loaded(pid: i32, library: &Path) -> Result<Option<target::Mapping>, InjectError> {
    let library = library
        .canonicalize()
        .map_err(|source| InjectError::Library {
            what: "finding",
            path: library.to_path_buf(),
            source,
        })?;
    let maps = target::maps(pid)?;
    let placement = target::place_library(pid, &library)?;
    Ok(target::loaded_as(&maps, &library, &placement).cloned())
}

/// Calls `symbol(arg)` of `library` (already loaded in `pid`) in one of its threads; `arg` is
/// passed as a NUL-terminated string on that thread's stack.
pub fn call(pid: i32, library: &Path, symbol: &str, arg: &[u8]) -> Result<EntryCall, InjectError> {
    target::check_arch(pid)?;
    let start_time = target::start_time(pid)?;
    let mapping = loaded(pid, library)?.ok_or_else(|| InjectError::NotLoaded {
        pid,
        library: library.to_path_buf(),
    })?;
    let maps = target::maps(pid)?;
    let file = mapped_file(pid, &mapping);
    let table = SymbolTable::read(&file).map_err(|e| InjectError::NoEntry {
        pid,
        symbol: symbol.to_owned(),
        detail: format!("reading {}: {e}", file.display()),
    })?;
    let addr = table
        .offset(symbol)
        .and_then(|off| address_of(&maps, &mapping.path, off))
        .ok_or_else(|| InjectError::NoEntry {
            pid,
            symbol: symbol.to_owned(),
            detail: format!("not exported by {}", mapping.path),
        })?;
    let (mut tracee, held, _) = super::stop_one_thread(pid, start_time)?;
    let tid = tracee.tid();
    let saved = tracee.save_regs()?;
    let interrupted = interrupted_syscall(saved.orig_rax, saved.rax);
    let mut data = arg.to_vec();
    data.push(0);
    let f = frame(saved.rsp, data.len());
    tracee.write_mem(f.rsp, &FAULT_RETURN.to_le_bytes())?;
    tracee.write_mem(f.data, &data)?;
    let rax = super::call::run_call(&mut tracee, &saved, addr, &[f.data], f.rsp, ENTRY_TIMEOUT)?;
    tracee.detach()?;
    let pause = held.elapsed();
    Ok(EntryCall {
        result: rax as u32 as i32,
        tid,
        interrupted,
        pause,
    })
}
