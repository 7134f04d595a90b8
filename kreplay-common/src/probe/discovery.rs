//! Runtime libraries found at the moment a process maps them (`kreplay trace --all`): a
//! program on the `mmap` system call's entry tracepoint sees every executable mapping of a
//! file (the loader maps each library's code that way), finds the file through the calling
//! task's descriptor table, matches the file's name against the runtime libraries kreplay probes, and stops the process (SIGSTOP,
//! named in [`super::LOADS_MAP`]) when the file is not probed yet, so that kreplay attaches to
//! it before the process makes its first call into it. [`FILES_MAP`] keeps each file's state,
//! so a file costs a stop only until it is probed; [`HELD_MAP`] names every process stopped
//! and not yet resumed, for the guardian that resumes them if kreplay dies.

use crate::api::Library;

/// File-name prefixes of the runtime libraries kreplay probes, per family: a file is one when
/// its name is the prefix, or the prefix followed by `.` (`libcuda.so.1`).
pub const RUNTIME_LIBRARIES: &[(&str, Library)] = &[
    ("libhsa-runtime64.so", Library::Hsa),
    ("libamdhip64.so", Library::Hip),
    ("libcuda.so", Library::Cuda),
    ("libcudart.so", Library::CudaRt),
    ("libroctx64.so", Library::Roctx),
];

/// Bytes of a file name the kernel-side check reads (NUL included): more than the longest
/// prefix and its `.`.
pub const NAME_BYTES: usize = 32;
const _: () = {
    let mut i = 0;
    while i < RUNTIME_LIBRARIES.len() {
        assert!(RUNTIME_LIBRARIES[i].0.len() + 2 <= NAME_BYTES);
        i += 1;
    }
};

/// Whether the NUL-terminated file name in `name` is a runtime library's.
#[inline(always)]
pub fn is_runtime_name(name: &[u8; NAME_BYTES]) -> bool {
    let mut i = 0;
    while i < RUNTIME_LIBRARIES.len() {
        let prefix = RUNTIME_LIBRARIES[i].0.as_bytes();
        let mut j = 0;
        let mut same = true;
        while j < prefix.len() && j < NAME_BYTES {
            if name[j] != prefix[j] {
                same = false;
                break;
            }
            j += 1;
        }
        if same && j < NAME_BYTES && (name[j] == 0 || name[j] == b'.') {
            return true;
        }
        i += 1;
    }
    false
}

/// A file as the kernel names it: its superblock's device number (the kernel's encoding,
/// `major << 20 | minor`) and its inode number.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// `inode->i_sb->s_dev`.
    pub dev: u64,
    /// `inode->i_ino`.
    pub ino: u64,
}
const _: () = assert!(core::mem::size_of::<FileKey>() == 16);

impl FileKey {
    /// The key of a file `stat` describes with `st_dev` (glibc's encoding) and `st_ino`.
    pub const fn from_stat(st_dev: u64, st_ino: u64) -> FileKey {
        // glibc: major in bits 8–19 and 32–43, minor in bits 0–7 and 20–31.
        let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
        let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
        FileKey {
            dev: ((major & 0xfff) << 20) | (minor & 0xfffff),
            ino: st_ino,
        }
    }
}

/// Byte offsets of the kernel members the check reads, from the kernel's BTF.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileOffsets {
    /// `task_struct->files`.
    pub task_files: u32,
    /// `files_struct->fdt`.
    pub files_fdt: u32,
    /// `fdtable->max_fds`.
    pub fdt_max_fds: u32,
    /// `fdtable->fd`.
    pub fdt_fd: u32,
    /// `file->f_inode`.
    pub file_inode: u32,
    /// `file->f_path.dentry`.
    pub file_dentry: u32,
    /// `dentry->d_name.name`.
    pub dentry_name: u32,
    /// `inode->i_ino`.
    pub inode_ino: u32,
    /// `inode->i_sb`.
    pub inode_sb: u32,
    /// `super_block->s_dev`.
    pub sb_dev: u32,
}
const _: () = assert!(core::mem::size_of::<FileOffsets>() == 40);

/// Name of the tracepoint program on [`MAP_TRACEPOINT`].
pub const MAP_PROGRAM: &str = "map_hook";
/// The tracepoint the program runs on, (category, name): the entry of `mmap(addr, len, prot,
/// flags, fd, off)`; a signal sent there is taken on the return to user space, with the
/// mapping in place.
pub const MAP_TRACEPOINT: (&str, &str) = ("syscalls", "sys_enter_mmap");
/// Byte offsets of `prot` and `fd` in that tracepoint's record (its `format` file: eight
/// bytes of common fields, the syscall number padded to eight, then the six arguments).
pub const MAP_PROT_AT: usize = 32;
/// See [`MAP_PROT_AT`].
pub const MAP_FD_AT: usize = 48;
/// Name of the one-entry array holding the [`Config`]; all zero (as loaded) turns the check
/// off.
pub const CONFIG_MAP: &str = "DISCOVERY";

/// What the check needs to know, written once by kreplay before it attaches the program.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Where the kernel keeps what the check reads.
    pub offsets: FileOffsets,
    /// kreplay's own process id, never held.
    pub self_tgid: u32,
    /// Zero.
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<Config>() == 48);
/// Name of the map of runtime library files seen ([`FileKey`] → [`file_state`]).
pub const FILES_MAP: &str = "RUNTIME_FILES";
/// Files [`FILES_MAP`] holds at most.
pub const FILES_MAX: u32 = 4096;
/// Name of the one-entry array that turns holding on (1) and off (0, as loaded): kreplay turns
/// it on once it serves the stops, and it (or its guardian) turns it off before resuming the
/// last held processes, so that none is stopped after.
pub const SWITCH_MAP: &str = "HOLDING";
/// Name of the map of processes stopped and not yet resumed (tgid → stop time, ns).
pub const HELD_MAP: &str = "HELD";
/// Processes [`HELD_MAP`] holds at most.
pub const HELD_MAX: u32 = 4096;

/// Values of [`FILES_MAP`].
pub mod file_state {
    /// Seen, not probed yet: a process mapping it is stopped.
    pub const PENDING: u8 = 1;
    /// Probed (or given up on): a process mapping it goes on.
    pub const PROBED: u8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> [u8; NAME_BYTES] {
        let mut b = [0u8; NAME_BYTES];
        b[..s.len()].copy_from_slice(s.as_bytes());
        b
    }

    #[test]
    fn runtime_names_are_the_prefix_alone_or_followed_by_a_dot() {
        for yes in [
            "libcuda.so",
            "libcuda.so.1",
            "libcuda.so.580.159.04",
            "libcudart.so.13",
            "libhsa-runtime64.so.1",
            "libamdhip64.so.6",
            "libroctx64.so.4",
        ] {
            assert!(is_runtime_name(&name(yes)), "{yes}");
        }
        for no in [
            "libcudnn.so.9",
            "libcuda.sox",
            "libcud",
            "libcudart_static.a",
            "libc.so.6",
            "",
        ] {
            assert!(!is_runtime_name(&name(no)), "{no}");
        }
        // A name cut at NAME_BYTES without its NUL is not taken for a shorter one.
        let mut long = [b'x'; NAME_BYTES];
        long[..10].copy_from_slice(b"libcuda.so");
        assert!(!is_runtime_name(&long));
    }

    #[test]
    fn stat_devices_convert_to_the_kernels_encoding() {
        // 8:1 (sda1) and 259:3 (nvme0n1p3), as glibc's makedev encodes them.
        let glibc = |major: u64, minor: u64| {
            ((major & 0xfff) << 8)
                | ((major & !0xfff) << 32)
                | (minor & 0xff)
                | ((minor & !0xff) << 12)
        };
        assert_eq!(FileKey::from_stat(glibc(8, 1), 7).dev, (8 << 20) | 1);
        assert_eq!(FileKey::from_stat(glibc(259, 3), 7).dev, (259 << 20) | 3);
        assert_eq!(FileKey::from_stat(glibc(0, 300), 7).dev, 300);
        assert_eq!(FileKey::from_stat(glibc(8, 1), 7).ino, 7);
    }
}
