//! Runtime libraries found as they are mapped (`kreplay trace --all`): a program on the entry
//! of `mmap` looks at every executable file mapping; one of a runtime library file
//! not probed yet holds the process (`hold.rs`) until kreplay has attached to the file
//! (`kreplay_common::probe::discovery`).
use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes,
    },
    macros::{map, tracepoint},
    maps::{Array, HashMap},
    programs::TracePointContext,
};
use kreplay_common::probe::{
    counter,
    discovery::{
        Config, FILES_MAX, FileKey, MAP_FD_AT, MAP_PROT_AT, NAME_BYTES, file_state, is_runtime_name,
    },
    stop_kind,
};

/// The runtime library files seen (state: `file_state`).
#[map]
static RUNTIME_FILES: HashMap<FileKey, u8> = HashMap::with_max_entries(FILES_MAX, 0);

/// Offsets and kreplay's pid (all zero until kreplay writes them: the check is off).
#[map]
static DISCOVERY: Array<Config> = Array::with_max_entries(1, 0);

/// `PROT_EXEC`.
const PROT_EXEC: u64 = 4;

/// Reads a `T` at kernel address `base + offset`.
#[inline(always)]
fn read<T>(base: u64, offset: u32) -> Option<T> {
    if base == 0 {
        return None;
    }
    // SAFETY: bpf_probe_read_kernel checks the address and fails cleanly.
    unsafe { bpf_probe_read_kernel((base + offset as u64) as *const T) }.ok()
}

/// `syscalls:sys_enter_mmap`.
#[tracepoint]
pub fn map_hook(ctx: TracePointContext) -> u32 {
    let _ = try_map(&ctx);
    0
}

#[inline(always)]
fn try_map(ctx: &TracePointContext) -> Option<()> {
    let config = DISCOVERY.get(0)?;
    let o = config.offsets;
    if o.file_inode == 0 {
        return None;
    }
    // SAFETY: reads of the tracepoint's own record, at offsets its format fixes.
    let (prot, fd) = unsafe {
        (
            ctx.read_at::<u64>(MAP_PROT_AT).ok()?,
            ctx.read_at::<u64>(MAP_FD_AT).ok()?,
        )
    };
    // Anonymous mappings pass fd -1 (and any fd above the table is no file).
    if prot & PROT_EXEC == 0 || fd > u32::MAX as u64 {
        return None;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if tgid == config.self_tgid {
        return None;
    }
    // SAFETY: plain helper call; the task pointer is only read through the checked helper.
    let task = unsafe { bpf_get_current_task() };
    let fdt: u64 = read(read::<u64>(task, o.task_files)?, o.files_fdt)?;
    if fd >= read::<u32>(fdt, o.fdt_max_fds)? as u64 {
        return None;
    }
    let file: u64 = read(read::<u64>(fdt, o.fdt_fd)?, (fd * 8) as u32)?;
    let inode: u64 = read(file, o.file_inode)?;
    let key = FileKey {
        dev: read::<u32>(read::<u64>(inode, o.inode_sb)?, o.sb_dev)? as u64,
        ino: read(inode, o.inode_ino)?,
    };
    // SAFETY: a lookup in a map of plain integers; the value is copied at once.
    match unsafe { RUNTIME_FILES.get(key) }.copied() {
        Some(file_state::PROBED) => return None,
        Some(_) => {}
        None => {
            let name: u64 = read(read::<u64>(file, o.file_dentry)?, o.dentry_name)?;
            let mut buf = [0u8; NAME_BYTES];
            // SAFETY: the helper checks the address and writes at most the buffer's length.
            unsafe { bpf_probe_read_kernel_str_bytes(name as *const u8, &mut buf) }.ok()?;
            if !is_runtime_name(&buf) {
                return None;
            }
            let _ = RUNTIME_FILES.insert(key, file_state::PENDING, 0);
        }
    }
    if !super::hold::hold(tgid, stop_kind::NEW_FILE, key) {
        super::bump(counter::NEW_FILE_LOST);
    }
    Some(())
}
