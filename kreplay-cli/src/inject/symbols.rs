//! Finding a function in the target's own mapped libraries: its file's dynamic symbol table
//! gives a file offset, and the executable mapping of that offset gives the address.
use std::path::{Path, PathBuf};

use super::{error::InjectError, target::Mapping};
use crate::probes::elf::SymbolTable;

/// A function's address in the target, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The address in the target.
    pub addr: u64,
    /// The symbol used (`dlopen` or `__libc_dlopen_mode`).
    pub symbol: &'static str,
    /// The library that defines it, as the target's maps name it.
    pub library: String,
}

/// The loader entry points the target may have: `dlopen`/`dlerror` for the call and, for
/// reporting why it failed, the matching error function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    /// `dlopen(path, mode)` or `__libc_dlopen_mode(path, mode)`.
    pub dlopen: Resolved,
    /// `dlerror()`, when the same library has it.
    pub dlerror: Option<u64>,
}

/// The address of file offset `file_off` of the file mapped as `path`, from its executable
/// mapping that covers it.
pub fn address_of(maps: &[Mapping], path: &str, file_off: u64) -> Option<u64> {
    maps.iter()
        .filter(|m| m.path == path && m.perms.contains('x'))
        .find(|m| file_off >= m.offset && file_off - m.offset < m.end - m.start)
        .map(|m| m.start + (file_off - m.offset))
}

/// True for a C library or a dynamic loader whose file may define `dlopen`.
fn is_loader_library(path: &str) -> bool {
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.starts_with("libc.so")
        || name.starts_with("libc-2.")
        || name.starts_with("libdl.so")
        || name.starts_with("libdl-2.")
        || name.starts_with("ld-musl")
}

/// The file kreplay reads for a mapping: `/proc/PID/map_files/START-END` (the exact file,
/// even one replaced on disk or in another mount namespace), else `/proc/PID/root/PATH`.
pub fn mapped_file(pid: i32, m: &Mapping) -> PathBuf {
    let exact = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    if std::fs::metadata(&exact).is_ok() {
        return exact;
    }
    PathBuf::from(format!("/proc/{pid}/root{}", m.path))
}

/// Finds the target's `dlopen`: glibc ≥ 2.34 and musl define it in the C library, older glibc
/// in libdl (when the program maps it) or, always, `__libc_dlopen_mode` in libc.
pub fn find_loader(pid: i32, maps: &[Mapping]) -> Result<Loader, InjectError> {
    let mut seen: Vec<&Mapping> = Vec::new();
    for m in maps {
        if m.inode != 0 && is_loader_library(&m.path) && !seen.iter().any(|s| s.path == m.path) {
            seen.push(m);
        }
    }
    // Prefer a real `dlopen` in any library, then the libc-internal fallback.
    let mut fallback = None;
    for m in &seen {
        let Ok(table) = SymbolTable::read(&mapped_file(pid, m)) else {
            continue;
        };
        let at = |name| {
            table
                .offset(name)
                .and_then(|off| address_of(maps, &m.path, off))
        };
        if let Some(addr) = at("dlopen") {
            return Ok(Loader {
                dlopen: Resolved {
                    addr,
                    symbol: "dlopen",
                    library: m.path.clone(),
                },
                dlerror: at("dlerror"),
            });
        }
        if fallback.is_none()
            && let Some(addr) = at("__libc_dlopen_mode")
        {
            fallback = Some(Loader {
                dlopen: Resolved {
                    addr,
                    symbol: "__libc_dlopen_mode",
                    library: m.path.clone(),
                },
                dlerror: None,
            });
        }
    }
    fallback.ok_or_else(|| InjectError::NoDlopen {
        pid,
        detail: if seen.is_empty() {
            "it maps no C library (a static program?)".into()
        } else {
            format!(
                "searched {}",
                seen.iter()
                    .map(|m| m.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inject::target;

    #[test]
    fn our_own_dlopen_and_dlerror_are_found_through_our_maps() {
        let pid = std::process::id() as i32;
        let maps = target::maps(pid).unwrap();
        let loader = find_loader(pid, &maps).unwrap();
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
        let want = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"dlopen".as_ptr()) } as u64;
        // SAFETY: as above.
        let want_err = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"dlerror".as_ptr()) } as u64;
        assert_eq!(loader.dlopen.addr, want, "{loader:?}");
        assert_eq!(loader.dlopen.symbol, "dlopen");
        assert_eq!(loader.dlerror, Some(want_err));
        assert!(loader.dlopen.library.contains("libc.so"), "{loader:?}");
    }

    #[test]
    fn an_offset_maps_through_the_executable_mapping_that_holds_it() {
        let maps = target::parse_maps(
            "1000-2000 r--p 00000000 fd:01 5 /lib/libc.so.6\n\
             2000-5000 r-xp 00001000 fd:01 5 /lib/libc.so.6\n\
             9000-a000 r-xp 00001000 fd:01 6 /lib/other.so\n",
        );
        assert_eq!(address_of(&maps, "/lib/libc.so.6", 0x1000), Some(0x2000));
        assert_eq!(address_of(&maps, "/lib/libc.so.6", 0x3abc), Some(0x4abc));
        // Past the executable mapping, or only in a non-executable one: no address.
        assert_eq!(address_of(&maps, "/lib/libc.so.6", 0x4000), None);
        assert_eq!(address_of(&maps, "/lib/libc.so.6", 0x0800), None);
        assert_eq!(address_of(&maps, "/lib/other.so", 0x1000), Some(0x9000));
    }

    #[test]
    fn a_process_without_a_c_library_has_no_dlopen() {
        let maps = target::parse_maps("1000-2000 r-xp 00000000 fd:01 5 /bin/static\n");
        let err = find_loader(1, &maps).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no dlopen found in process 1: it maps no C library (a static program?)"
        );
    }
}
