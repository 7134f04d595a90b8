//! Recognising the CUDA runtime linked statically into an executable or a shared library
//! (`nvcc -cudart static`, the default; cuBLAS and other NVIDIA libraries do it too). Such an
//! object maps no `libcudart.so`, but its own symbol table holds the runtime's `cuda*`
//! functions, which are probed in it as in the shared library.
//!
//! An object is taken for one when it has CUDA device code (a `.nv_fatbin` or
//! `.nvFatBinSegment` section, where nvcc puts a module's fatbinary and its wrapper) and it
//! defines both `cudaLaunchKernel` and `__cudaRegisterFatBinary`. The section test reads only
//! the ELF and section headers, so the thousands of ordinary objects a host maps cost one small
//! read each; only objects with device code have their symbol tables read. The two symbols
//! together are the runtime itself: a program merely using the shared runtime references them
//! without defining them, an interposer that defines `cudaLaunchKernel` does not carry the
//! registration entry nvcc's generated constructors call, and `__cudaRegisterFatBinary` is
//! internal to cudart (no application defines it). Each file is judged once per run, keyed by
//! the device and inode `/proc/PID/maps` gives, so a rescan costs no system call per mapping.
use std::{
    collections::HashMap,
    fs::File,
    path::Path,
    sync::{Mutex, PoisonError},
};

use object::{
    Endianness, Object, ObjectSymbol,
    elf::FileHeader64,
    read::{ReadCache, elf::FileHeader},
};

/// Sections that hold a module's device code in an nvcc-built object.
const FATBIN_SECTIONS: [&[u8]; 2] = [b".nv_fatbin", b".nvFatBinSegment"];

/// Symbols an object with the runtime linked in defines.
const RUNTIME_SYMBOLS: [&str; 2] = ["cudaLaunchKernel", "__cudaRegisterFatBinary"];

/// True when the ELF file at `path` has the CUDA runtime linked in (see the module docs).
pub fn has_static_cudart(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let data = ReadCache::new(file);
    if !has_device_code(&data) {
        return false;
    }
    let Ok(obj) = object::File::parse(&data) else {
        return false;
    };
    let mut found = [false; RUNTIME_SYMBOLS.len()];
    for sym in obj.symbols().chain(obj.dynamic_symbols()) {
        if !sym.is_definition() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let base = name.split_once('@').map_or(name, |(b, _)| b);
        if let Some(i) = RUNTIME_SYMBOLS.iter().position(|&s| s == base) {
            found[i] = true;
            if found.iter().all(|&f| f) {
                return true;
            }
        }
    }
    false
}

/// True when the 64-bit ELF in `data` has a section of [`FATBIN_SECTIONS`]: reads the file
/// header, the section headers and the section-name table only.
fn has_device_code(data: &ReadCache<File>) -> bool {
    let Ok(header) = FileHeader64::<Endianness>::parse(data) else {
        return false;
    };
    let Ok(endian) = header.endian() else {
        return false;
    };
    let Ok(sections) = header.sections(endian, data) else {
        return false;
    };
    sections.iter().any(|s| {
        sections
            .section_name(endian, s)
            .is_ok_and(|n| FATBIN_SECTIONS.contains(&n))
    })
}

/// Verdicts by the (device, inode) of `/proc/PID/maps`, for the whole run.
static JUDGED: Mutex<Option<HashMap<(u64, u64), bool>>> = Mutex::new(None);

/// The files with an executable mapping in a `/proc/PID/maps` text that have the runtime
/// linked in (their paths as the process sees them). Each file is judged once per run.
pub fn in_maps(maps: &str, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path — the path may contain spaces.
        let mut it = line.splitn(6, char::is_whitespace);
        let (Some(_), Some(perms), Some(_), Some(dev), Some(inode), Some(path)) = (
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
        ) else {
            continue;
        };
        let path = path.trim_start().trim_end_matches(" (deleted)");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some(key) = dev_key(dev).zip(inode.parse().ok()) else {
            continue;
        };
        let known = JUDGED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashMap::new)
            .get(&key)
            .copied();
        let yes = known.unwrap_or_else(|| {
            let yes = has_static_cudart(&root.join(path.trim_start_matches('/')));
            JUDGED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(HashMap::new)
                .insert(key, yes);
            yes
        });
        if yes && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// A maps line's `major:minor` device (hex) as one number.
fn dev_key(dev: &str) -> Option<u64> {
    let (major, minor) = dev.split_once(':')?;
    Some(u64::from_str_radix(major, 16).ok()? << 32 | u64::from_str_radix(minor, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_objects_are_not_runtimes_and_are_judged_once() {
        // This test binary and libc: no device code.
        let me = std::env::current_exe().unwrap();
        assert!(!has_static_cudart(&me));
        assert!(!has_static_cudart(Path::new("/nonexistent/prog")));
        assert!(!has_static_cudart(Path::new("/proc/self/status")));
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(in_maps(&maps, Path::new("/")), Vec::<String>::new());
        let judged = JUDGED.lock().unwrap().as_ref().map_or(0, HashMap::len);
        assert!(judged >= 2, "this binary and libc at least: {judged}");
        assert_eq!(dev_key("fd:01"), Some(0xfd << 32 | 1));
        assert_eq!(dev_key("nonsense"), None);
    }
}
