//! What the target process looks like from `/proc`: its architecture, mappings, start time,
//! why ptrace may be denied, and where the library must be for its `dlopen` to find it.
use std::{
    fs,
    io::Read,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use super::error::InjectError;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: String,
    /// File offset of `start`.
    pub offset: u64,
    /// Device, as `major:minor` in hex.
    pub dev: String,
    /// Inode (0 for anonymous mappings).
    pub inode: u64,
    /// The path, in the target's mount namespace (empty for anonymous mappings).
    pub path: String,
}

/// Parses `/proc/PID/maps` text; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_maps_line).collect()
}

fn parse_maps_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?.to_string();
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let dev = fields.next()?.to_string();
    let inode = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("").trim_start().to_string();
    let (start, end) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms,
        offset,
        dev,
        inode,
        path,
    })
}

fn read_proc(pid: i32, file: &str) -> Result<String, InjectError> {
    let path = format!("/proc/{pid}/{file}");
    fs::read_to_string(&path).map_err(|source| gone_or(pid, path, source))
}

/// Maps a `/proc` read error to `ProcessGone` when the process no longer exists.
fn gone_or(pid: i32, path: String, source: std::io::Error) -> InjectError {
    if source.kind() == std::io::ErrorKind::NotFound || source.raw_os_error() == Some(libc::ESRCH) {
        InjectError::ProcessGone { pid }
    } else {
        InjectError::Proc { path, source }
    }
}

/// The target's mappings.
pub fn maps(pid: i32) -> Result<Vec<Mapping>, InjectError> {
    read_proc(pid, "maps").map(|t| parse_maps(&t))
}

/// The process's start time in clock ticks since boot (`/proc/PID/stat` field 22): with the
/// pid, it names one process even if the pid is reused.
pub fn start_time(pid: i32) -> Result<u64, InjectError> {
    let stat = read_proc(pid, "stat")?;
    stat_field(&stat, 22).ok_or(InjectError::Proc {
        path: format!("/proc/{pid}/stat"),
        source: std::io::Error::other("no start time field"),
    })
}

/// Field `n` (1-based, as proc(5) numbers them) of a `/proc/PID/stat` line, for n ≥ 3.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The process state letter of `/proc/PID/stat` (`Z` zombie, `X` dead), if readable.
pub fn state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Checks the first bytes of an executable: `Err(what it is)` unless a 64-bit x86_64 ELF file.
pub fn check_elf_header(head: &[u8]) -> Result<(), String> {
    if head.len() < 20 || head[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    match (head[4], machine) {
        (2, 62) => Ok(()),
        (1, 62) => Err("x32 (32-bit x86_64 ABI)".into()),
        (1, 3) => Err("32-bit x86 (i386)".into()),
        (2, 183) => Err("aarch64".into()),
        (class, m) => Err(format!("ELF class {class}, machine {m}")),
    }
}

/// Refuses a target whose `/proc/PID/exe` is not an x86_64 ELF program.
pub fn check_arch(pid: i32) -> Result<(), InjectError> {
    let path = format!("/proc/{pid}/exe");
    let mut head = [0u8; 20];
    fs::File::open(&path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|source| gone_or(pid, path, source))?;
    check_elf_header(&head).map_err(|what| InjectError::NotX86_64 { pid, what })
}

/// The capability bit of CAP_SYS_PTRACE (linux/capability.h).
const CAP_SYS_PTRACE: u32 = 19;

/// What may have denied a ptrace attach, as facts read from the system.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DenialFacts {
    /// `/proc/sys/kernel/yama/ptrace_scope`, when Yama is present.
    pub yama_scope: Option<u8>,
    /// The `Seccomp:` mode of kreplay itself (0 none, 1 strict, 2 filter).
    pub own_seccomp: Option<u8>,
    /// Whether kreplay holds CAP_SYS_PTRACE.
    pub cap_sys_ptrace: bool,
    /// The pid already tracing the target, if any.
    pub tracer: Option<i32>,
}

impl DenialFacts {
    /// Reads the facts for target `pid`.
    pub fn read(pid: i32) -> DenialFacts {
        let status = |p: &str, key: &str| -> Option<String> {
            fs::read_to_string(p)
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        };
        let cap_eff = status("/proc/self/status", "CapEff:")
            .and_then(|v| u64::from_str_radix(&v, 16).ok())
            .unwrap_or(0);
        DenialFacts {
            yama_scope: fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            own_seccomp: status("/proc/self/status", "Seccomp:").and_then(|v| v.parse().ok()),
            cap_sys_ptrace: cap_eff & (1 << CAP_SYS_PTRACE) != 0,
            tracer: status(&format!("/proc/{pid}/status"), "TracerPid:")
                .and_then(|v| v.parse().ok())
                .filter(|&t| t != 0),
        }
    }
}

/// The one-line reason for an EPERM from `PTRACE_SEIZE`, built from `facts`.
pub fn denied_reason(facts: &DenialFacts) -> String {
    if let Some(tracer) = facts.tracer {
        return format!("it is already traced by process {tracer} (a debugger or another tool)");
    }
    let yama = match facts.yama_scope {
        None => "Yama is absent (no /proc/sys/kernel/yama/ptrace_scope)".to_string(),
        Some(3) => "Yama ptrace_scope is 3 (no process may ptrace; only a reboot lowers it)".into(),
        Some(2) => format!(
            "Yama ptrace_scope is 2 (admin-only attach: needs CAP_SYS_PTRACE, which kreplay {})",
            if facts.cap_sys_ptrace { "has" } else { "lacks" }
        ),
        Some(s) => format!("Yama ptrace_scope is {s}"),
    };
    let caps = if facts.cap_sys_ptrace {
        "kreplay has CAP_SYS_PTRACE"
    } else {
        "kreplay lacks CAP_SYS_PTRACE (run as root)"
    };
    let seccomp = match facts.own_seccomp {
        Some(1) | Some(2) => {
            "; kreplay runs under a seccomp filter, which may block ptrace (a container's default profile does)"
        }
        _ => "",
    };
    format!("{yama}; {caps}{seccomp}")
}

/// Where the library is for the target's `dlopen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The path to pass to `dlopen`, in the target's mount namespace.
    pub path: PathBuf,
    /// The same file as kreplay opens it (through `/proc/PID/root` for another namespace).
    pub here: PathBuf,
    /// True when the path is a copy kreplay must write (the library is not visible there).
    pub needs_copy: bool,
}

fn mount_ns(pid: &str) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()
}

/// Decides where the target's `dlopen` finds `library` (absolute): the same path when it
/// shares kreplay's mount namespace or sees the same file at that path through
/// `/proc/PID/root`; else a copy in the target's `/tmp`.
pub fn place_library(pid: i32, library: &Path) -> Result<Placement, InjectError> {
    let meta = fs::metadata(library).map_err(|source| InjectError::Library {
        what: "reading",
        path: library.to_path_buf(),
        source,
    })?;
    // The same mount namespace and the same root (no chroot): the same paths.
    let same_root = fs::read_link(format!("/proc/{pid}/root")).is_ok_and(|r| r == Path::new("/"));
    if same_root && mount_ns("self") == mount_ns(&pid.to_string()) {
        return Ok(Placement {
            path: library.to_path_buf(),
            here: library.to_path_buf(),
            needs_copy: false,
        });
    }
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    if fs::metadata(&root).is_err() {
        return Err(InjectError::ProcessGone { pid });
    }
    let rel = library.strip_prefix("/").unwrap_or(library);
    let seen = root.join(rel);
    if let Ok(there) = fs::metadata(&seen)
        && there.dev() == meta.dev()
        && there.ino() == meta.ino()
    {
        return Ok(Placement {
            path: library.to_path_buf(),
            here: seen,
            needs_copy: false,
        });
    }
    let name = library
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lib.so".into());
    // One name per library and size: a second injection finds the first copy in the maps.
    let copy = PathBuf::from(format!("/tmp/kreplay-inject-{}-{name}", meta.len()));
    Ok(Placement {
        here: root.join(copy.strip_prefix("/").unwrap_or(&copy)),
        path: copy,
        needs_copy: true,
    })
}

/// Copies the library to `placement.here` (a file in the target's `/tmp`), replacing an
/// earlier copy, written under a temporary name and renamed so a reader never sees half a file.
pub fn copy_in(library: &Path, placement: &Placement) -> Result<(), InjectError> {
    let tmp = placement
        .here
        .with_extension(format!("tmp{}", std::process::id()));
    let err = |what, source| InjectError::Library {
        what,
        path: placement.here.clone(),
        source,
    };
    fs::copy(library, &tmp).map_err(|e| err("copying the library into", e))?;
    fs::rename(&tmp, &placement.here).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err("renaming the copy to", e)
    })
}

/// The mapping that shows `library` (or its copy) already loaded: same path in the target's
/// view (also once the copy is removed), or same device and inode.
pub fn loaded_as<'a>(
    maps: &'a [Mapping],
    library: &Path,
    placement: &Placement,
) -> Option<&'a Mapping> {
    let inodes: Vec<(u64, u64)> = [library, placement.here.as_path()]
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let target_path = placement.path.to_string_lossy();
    maps.iter().find(|m| {
        // A copy kreplay removed after loading it shows as `PATH (deleted)`.
        let path = m.path.strip_suffix(" (deleted)").unwrap_or(&m.path);
        m.inode != 0
            && (path == target_path
                || inodes
                    .iter()
                    .any(|&(dev, ino)| ino == m.inode && dev_matches(&m.dev, dev)))
    })
}

/// True when a maps `major:minor` (hex) names device `dev` (a `st_dev`).
fn dev_matches(maps_dev: &str, dev: u64) -> bool {
    let Some((maj, min)) = maps_dev.split_once(':') else {
        return false;
    };
    let (Ok(maj), Ok(min)) = (u32::from_str_radix(maj, 16), u32::from_str_radix(min, 16)) else {
        return false;
    };
    libc::major(dev) == maj && libc::minor(dev) == min
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse_with_paths_holding_spaces() {
        let text = "7f10a0000000-7f10a0028000 r--p 00000000 fd:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f10a0028000-7f10a01bd000 r-xp 00028000 fd:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7ffc1000-7ffc2000 rw-p 00000000 00:00 0 \n\
                    55d0-55e0 r-xp 00001000 08:02 77 /opt/my app/bin (deleted)\n";
        let m = parse_maps(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].start, 0x7f10a0028000);
        assert_eq!(m[1].end, 0x7f10a01bd000);
        assert_eq!(m[1].offset, 0x28000);
        assert_eq!(m[1].perms, "r-xp");
        assert_eq!(m[1].inode, 1835);
        assert_eq!(m[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(m[2].path, "");
        assert_eq!(m[3].path, "/opt/my app/bin (deleted)");
    }

    #[test]
    fn elf_headers_other_than_x86_64_are_named() {
        let mut head = [0u8; 20];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = 2;
        head[18..20].copy_from_slice(&62u16.to_le_bytes());
        assert_eq!(check_elf_header(&head), Ok(()));
        head[18..20].copy_from_slice(&183u16.to_le_bytes());
        assert_eq!(check_elf_header(&head), Err("aarch64".into()));
        head[4] = 1;
        head[18..20].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(check_elf_header(&head), Err("32-bit x86 (i386)".into()));
        assert_eq!(
            check_elf_header(b"#!/bin/sh\n"),
            Err("not an ELF file".into())
        );
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "1234 (a b) c)) S 1 1234 1234 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 3 0 987654 0";
        assert_eq!(stat_field(stat, 22), Some(987654));
        assert_eq!(stat_field(stat, 4), Some(1));
    }

    #[test]
    fn the_eperm_message_names_ptrace_scope_and_capability() {
        let base = DenialFacts::default();
        let msg = denied_reason(&DenialFacts {
            yama_scope: Some(2),
            ..base.clone()
        });
        assert_eq!(
            msg,
            "Yama ptrace_scope is 2 (admin-only attach: needs CAP_SYS_PTRACE, which kreplay lacks); \
             kreplay lacks CAP_SYS_PTRACE (run as root)"
        );
        let msg = denied_reason(&DenialFacts {
            yama_scope: Some(1),
            cap_sys_ptrace: true,
            own_seccomp: Some(2),
            tracer: None,
        });
        assert_eq!(
            msg,
            "Yama ptrace_scope is 1; kreplay has CAP_SYS_PTRACE; kreplay runs under a seccomp \
             filter, which may block ptrace (a container's default profile does)"
        );
        let msg = denied_reason(&base);
        assert!(
            msg.starts_with("Yama is absent (no /proc/sys/kernel/yama/ptrace_scope)"),
            "{msg}"
        );
        let msg = denied_reason(&DenialFacts {
            tracer: Some(77),
            ..base
        });
        assert_eq!(
            msg,
            "it is already traced by process 77 (a debugger or another tool)"
        );
    }

    #[test]
    fn maps_devices_compare_with_st_dev() {
        let dev = libc::makedev(0xfd, 0x01);
        assert!(dev_matches("fd:01", dev));
        assert!(!dev_matches("fd:02", dev));
        assert!(!dev_matches("junk", dev));
    }
}
