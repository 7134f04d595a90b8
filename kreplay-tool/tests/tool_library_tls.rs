//! `libkreplay_tool.so` reaches the recording hot path's thread slot with initial-exec TLS
//! (the library is marked `DF_STATIC_TLS`) and loads with every symbol bound: what the
//! contention benchmark, linked into an executable, measures is what the library runs.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::path::PathBuf;

/// `DT_FLAGS` and its `DF_STATIC_TLS` bit (elf.h).
const DT_FLAGS: u64 = 30;
const DF_STATIC_TLS: u64 = 0x10;
/// `PT_DYNAMIC` (elf.h).
const PT_DYNAMIC: u32 = 2;

/// The library cargo built next to this test's executable.
fn tool_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the deps directory");
    [
        deps.join("libkreplay_tool.so"),
        deps.join("../libkreplay_tool.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("no libkreplay_tool.so near {}", deps.display()))
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// The `DT_FLAGS` value of a little-endian ELF64 file, if it has one.
fn dt_flags(elf: &[u8]) -> Option<u64> {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not ELF64");
    let (phoff, phentsize, phnum) = (
        u64_at(elf, 0x20) as usize,
        u16_at(elf, 0x36) as usize,
        u16_at(elf, 0x38) as usize,
    );
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| u32_at(elf, ph) == PT_DYNAMIC)?;
    let (off, size) = (
        u64_at(elf, dynamic + 0x08) as usize,
        u64_at(elf, dynamic + 0x20) as usize,
    );
    elf[off..off + size]
        .chunks_exact(16)
        .map(|d| (u64_at(d, 0), u64_at(d, 8)))
        .take_while(|&(tag, _)| tag != 0)
        .find(|&(tag, _)| tag == DT_FLAGS)
        .map(|(_, v)| v)
}

#[test]
fn the_tool_library_uses_static_tls_and_loads_with_every_symbol_bound() {
    let path = tool_library();
    let elf = std::fs::read(&path).unwrap();
    let flags = dt_flags(&elf).unwrap_or(0);
    assert_eq!(
        flags & DF_STATIC_TLS,
        DF_STATIC_TLS,
        "{} has DT_FLAGS {flags:#x}: no initial-exec TLS",
        path.display()
    );
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; the library's only constructor looks up libc's
    // `dlsym`. RTLD_NOW binds every symbol now, so a TLS symbol left undefined fails here.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen({}) failed", path.display());
}
