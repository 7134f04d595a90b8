//! Reads the names of module-scope variables out of whatever image the application hands the
//! driver: a cubin (ELF), a fat binary (`0xBA55ED50`, possibly behind the `0x466243B1` wrapper
//! that nvcc emits), or PTX text. Fat-binary entries compressed with zstd (what nvcc's
//! `-compress-all` and PyTorch's builds produce; flag 0x8000, payload magic `28 b5 2f fd`) are
//! decompressed first. An entry kreplay still cannot read leaves the module's variables
//! unknown, and replay declines while it is loaded (never replaying over memory it cannot
//! restore).

use super::elf::{GlobalSym, ImageError, globals as elf_globals, image_len};

/// Magic of a fat binary.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// Magic of nvcc's `__fatBinC_Wrapper_t` around a fat binary.
pub const FATBIN_WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// Largest image kreplay reads (a bad header must not make it walk the address space).
const MAX_IMAGE: usize = 1 << 30;
/// Most bytes decompressed from one fat binary's entries, all together: a few bytes of zstd
/// can stand for many MiB, and a fat binary may hold thousands of entries.
const MAX_DECOMPRESSED: u64 = 1 << 28;
/// The zstd frame magic.
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// A zstd-compressed entry's contents (its first `limit` bytes at most), or `None` when it does
/// not decompress.
fn unzstd(payload: &[u8], limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut src = payload;
    let dec = ruzstd::decoding::StreamingDecoder::new(&mut src).ok()?;
    let mut out = Vec::new();
    dec.take(limit).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The module-scope variables of a fat binary held in `b`.
pub fn fatbin_globals(b: &[u8]) -> Result<Vec<GlobalSym>, ImageError> {
    fatbin_globals_within(b, MAX_DECOMPRESSED)
}

/// [`fatbin_globals`], decompressing at most `inflate` bytes in all.
fn fatbin_globals_within(b: &[u8], mut inflate: u64) -> Result<Vec<GlobalSym>, ImageError> {
    let magic = b
        .get(..4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    if magic != Some(FATBIN_MAGIC) || b.len() < 16 {
        return Err(ImageError::UnknownFormat(magic.unwrap_or(0)));
    }
    let header = u16::from_le_bytes([b[6], b[7]]) as usize;
    let mut fat = [0u8; 8];
    fat.copy_from_slice(&b[8..16]);
    // Sizes from the headers saturate: past the end, never wrapped round.
    let end = header
        .saturating_add(u64::from_le_bytes(fat) as usize)
        .min(b.len());
    let (mut elf, mut ptx, mut skipped) = (None::<Vec<GlobalSym>>, None, Vec::new());
    let mut off = header;
    while off.saturating_add(16) <= end {
        let kind = u16::from_le_bytes([b[off], b[off + 1]]);
        let hsize = u32::from_le_bytes([b[off + 4], b[off + 5], b[off + 6], b[off + 7]]) as usize;
        let mut sz = [0u8; 8];
        sz.copy_from_slice(&b[off + 8..off + 16]);
        let size = u64::from_le_bytes(sz) as usize;
        if hsize < 16 {
            break;
        }
        let start = off.saturating_add(hsize);
        let Some(stored) = b.get(start..start.saturating_add(size).min(end)) else {
            break;
        };
        let unpacked = if stored.starts_with(ZSTD_MAGIC) && inflate > 0 {
            let u = unzstd(stored, inflate);
            inflate -= u.as_ref().map_or(0, |u| u.len() as u64);
            u
        } else {
            None
        };
        let payload = unpacked.as_deref().unwrap_or(stored);
        if payload.starts_with(b"\x7fELF") {
            if let Ok(g) = elf_globals(payload) {
                // Every architecture's cubin of one source names the same variables: one
                // readable cubin is enough (PyTorch's fat binaries hold six, each compressed).
                elf = Some(g);
                break;
            }
        } else if kind == 1 && looks_like_ptx(payload) {
            ptx.get_or_insert_with(Vec::new)
                .extend(ptx_globals(&String::from_utf8_lossy(
                    payload.split(|&c| c == 0).next().unwrap_or(&[]),
                )));
        } else {
            skipped.push(format!("kind {kind}, {size} bytes"));
        }
        off = start.saturating_add(size);
    }
    let mut out = elf
        .or(ptx)
        .ok_or_else(|| ImageError::NoReadableEntry(skipped.join("; ")))?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}

fn looks_like_ptx(p: &[u8]) -> bool {
    let t = p.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(0);
    p[t..].starts_with(b"//") || p[t..].starts_with(b".version")
}

/// The module-scope `.global` and `.const` variables declared by PTX text (sizes unknown: 0).
pub fn ptx_globals(text: &str) -> Vec<GlobalSym> {
    let mut depth = 0i32;
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.split("//").next().unwrap_or("").trim();
        if depth == 0 && l.ends_with(';') {
            let toks: Vec<&str> = l.trim_end_matches(';').split_whitespace().collect();
            let space = toks.iter().find(|t| **t == ".global" || **t == ".const");
            if let Some(space) = space
                && toks.first().is_some_and(|t| t.starts_with('.'))
                && !toks.contains(&".extern")
            {
                let decl = l
                    .split('=')
                    .next()
                    .unwrap_or(l)
                    .trim_end_matches(';')
                    .trim();
                let last = decl.split_whitespace().last().unwrap_or("");
                let name = last.split('[').next().unwrap_or("");
                // Literal data the compiler named, never variables (see elf.rs).
                if !name.is_empty()
                    && !name.starts_with('.')
                    && !super::elf::is_compiler_literal(name)
                {
                    out.push(GlobalSym {
                        name: name.to_string(),
                        size: 0,
                        constant: *space == ".const",
                        section: 0,
                        offset: 0,
                    });
                }
            }
        }
        depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// Reads `len` bytes at `addr + off` of an image in this process.
///
/// # Safety
/// The image the driver was given must be readable for as long as its headers say.
unsafe fn read_at(addr: *const u8, off: usize, len: usize) -> Option<Vec<u8>> {
    if off.checked_add(len)? > MAX_IMAGE {
        return None;
    }
    // SAFETY: within the image, by the caller's contract and the MAX_IMAGE bound.
    Some(unsafe { std::slice::from_raw_parts(addr.add(off), len) }.to_vec())
}

/// The module-scope variables of the image at `image` (the pointer given to
/// `cuModuleLoadData`, `cuModuleLoadFatBinary` or `cuLibraryLoadData`).
///
/// # Safety
/// `image` is the pointer the application passed to the driver, which read it successfully.
pub unsafe fn globals_of(image: *const u8) -> Result<Vec<GlobalSym>, ImageError> {
    if image.is_null() {
        return Err(ImageError::UnknownFormat(0));
    }
    // SAFETY: every image format has at least 4 bytes (caller's contract).
    let head = unsafe { read_at(image, 0, 4) }.ok_or(ImageError::Truncated("magic"))?;
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    match magic {
        FATBIN_WRAPPER_MAGIC => {
            // struct { int magic; int version; const unsigned long long *data; void *filename; }
            // SAFETY: the wrapper is 24 bytes (caller's contract).
            let w = unsafe { read_at(image, 0, 16) }.ok_or(ImageError::Truncated("wrapper"))?;
            let mut p = [0u8; 8];
            p.copy_from_slice(&w[8..16]);
            // SAFETY: the wrapper's data pointer is the fat binary the driver read.
            unsafe { globals_of(usize::from_le_bytes(p) as *const u8) }
        }
        FATBIN_MAGIC => {
            // SAFETY: the 16-byte fat binary header.
            let h = unsafe { read_at(image, 0, 16) }.ok_or(ImageError::Truncated("fatbin"))?;
            let mut fat = [0u8; 8];
            fat.copy_from_slice(&h[8..16]);
            let len = (u16::from_le_bytes([h[6], h[7]]) as usize)
                .saturating_add(u64::from_le_bytes(fat) as usize);
            // SAFETY: header plus the size it states.
            let all = unsafe { read_at(image, 0, len) }.ok_or(ImageError::Truncated("fatbin"))?;
            fatbin_globals(&all)
        }
        0x464c_457f => {
            // SAFETY: ELF headers and tables, bounded by MAX_IMAGE.
            let read = |off: usize, len: usize| unsafe { read_at(image, off, len) };
            let len = image_len(&read)?;
            let all = read(0, len).ok_or(ImageError::Truncated("ELF image"))?;
            elf_globals(&all)
        }
        _ => {
            // PTX text: NUL-terminated.
            // SAFETY: a C string handed to the driver as PTX.
            let text = unsafe { std::ffi::CStr::from_ptr(image as *const core::ffi::c_char) };
            let t = text.to_bytes();
            if looks_like_ptx(t) {
                Ok(ptx_globals(&String::from_utf8_lossy(t)))
            } else {
                Err(ImageError::UnknownFormat(magic))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_module_scope_declarations_only() {
        let ptx = "\
.version 8.0
.target sm_90
.address_size 64
.visible .global .align 4 .u32 counter;
.global .align 4 .b8 _ZN2ns5tableE[1024];
.visible .const .align 4 .b8 coeffs[64];
.visible .global .align 8 .u64 seeded = 7; // initialized
.global .align 1 .b8 $str[6] = {104, 101, 108, 108, 111, 0};
.extern .global .align 4 .u32 elsewhere;
.visible .entry k(.param .u64 p)
{
  .reg .b32 r<2>;
  ld.global.u32 r1, [counter];
  .global .align 4 .u32 not_module_scope;
}
";
        let g = ptx_globals(ptx);
        let names: Vec<(&str, bool)> = g.iter().map(|s| (s.name.as_str(), s.constant)).collect();
        assert_eq!(
            names,
            vec![
                ("_ZN2ns5tableE", false),
                ("coeffs", true),
                ("counter", false),
                ("seeded", false)
            ]
        );
    }

    #[test]
    fn unknown_and_truncated_images_are_errors() {
        assert_eq!(
            fatbin_globals(&[1, 2, 3, 4]),
            Err(ImageError::UnknownFormat(0x0403_0201))
        );
        let mut fat = FATBIN_MAGIC.to_le_bytes().to_vec();
        fat.extend([1, 0, 16, 0]);
        fat.extend(32u64.to_le_bytes());
        // One entry: kind 2 (ELF), header 16 bytes, 16-byte payload that is not ELF
        // (as a compressed entry looks).
        fat.extend([2, 0, 0, 0, 16, 0, 0, 0]);
        fat.extend(16u64.to_le_bytes());
        fat.extend([0xab; 16]);
        assert_eq!(
            fatbin_globals(&fat),
            Err(ImageError::NoReadableEntry("kind 2, 16 bytes".into()))
        );
        assert_eq!(elf_globals(b"\x7fELF\x02\x01"), Err(ImageError::NotElf));
    }

    /// A fat binary header: `fat` bytes of entries after the 16-byte header.
    fn fat_header(fat: u64) -> Vec<u8> {
        let mut b = FATBIN_MAGIC.to_le_bytes().to_vec();
        b.extend([1, 0, 16, 0]);
        b.extend(fat.to_le_bytes());
        b
    }

    #[test]
    fn sizes_that_overflow_end_the_walk_instead_of_wrapping() {
        // The fat binary's stated size overflows the header's end.
        let mut b = fat_header(u64::MAX);
        b.extend([2, 0, 0, 0, 16, 0, 0, 0]);
        b.extend(8u64.to_le_bytes());
        b.extend([0xab; 8]);
        assert_eq!(
            fatbin_globals(&b),
            Err(ImageError::NoReadableEntry("kind 2, 8 bytes".into()))
        );
        // An entry whose size overflows the next entry's offset: the walk stops after it.
        let mut b = fat_header(48);
        b.extend([2, 0, 0, 0, 16, 0, 0, 0]);
        b.extend(u64::MAX.to_le_bytes());
        b.extend([0xab; 32]);
        assert_eq!(
            fatbin_globals(&b),
            Err(ImageError::NoReadableEntry(format!(
                "kind 2, {} bytes",
                u64::MAX
            )))
        );
    }
}

#[cfg(test)]
mod nvcc_fixtures {
    //! Images nvcc 13.0 built from tests/gpu/module_vars.cu on the H200 machine.
    use super::*;

    const CUBIN: &[u8] = include_bytes!("../../tests/fixtures/module_vars.cubin");
    const FATBIN: &[u8] = include_bytes!("../../tests/fixtures/module_vars.fatbin");
    const PTX: &[u8] = include_bytes!("../../tests/fixtures/module_vars.ptx");

    fn summary(g: &[GlobalSym]) -> Vec<(String, u64, bool)> {
        g.iter()
            .map(|s| (s.name.clone(), s.size, s.constant))
            .collect()
    }

    fn want(sized: bool) -> Vec<(String, u64, bool)> {
        let z = |n: u64| if sized { n } else { 0 };
        vec![
            ("_ZN2ns6scopedE".into(), z(16), false),
            ("bumps".into(), z(4), false),
            ("coeffs".into(), z(64), true),
            ("table".into(), z(1024), false),
        ]
    }

    #[test]
    fn the_cubin_names_every_module_variable_with_its_size() {
        assert_eq!(summary(&elf_globals(CUBIN).unwrap()), want(true));
    }

    #[test]
    fn the_fat_binary_is_read_through_its_uncompressed_cubin() {
        // Its PTX entry is zstd-compressed (magic 28 b5 2f fd); the cubin comes first and suffices.
        assert_eq!(summary(&fatbin_globals(FATBIN).unwrap()), want(true));
    }

    #[test]
    fn a_fat_binary_compressed_with_zstd_is_read_after_decompression() {
        // `nvcc -fatbin -Xfatbin -compress-all`: both the cubin and the PTX are zstd frames.
        const COMPRESSED: &[u8] =
            include_bytes!("../../tests/fixtures/module_vars_compressed.fatbin");
        assert_eq!(summary(&fatbin_globals(COMPRESSED).unwrap()), want(true));
        // The plain fixture's PTX entry is compressed too, and decompresses to the PTX fixture.
        let ptx_entry = FATBIN
            .windows(4)
            .position(|w| w == ZSTD_MAGIC)
            .expect("a compressed entry");
        let text = unzstd(&FATBIN[ptx_entry..], MAX_DECOMPRESSED).expect("decompresses");
        assert_eq!(
            summary(&ptx_globals(&String::from_utf8_lossy(&text))),
            want(false)
        );
    }

    /// The (kind, stored payload) of each entry of a fat binary.
    fn entries(fat: &[u8]) -> Vec<(u16, &[u8])> {
        let mut out = Vec::new();
        let mut off = u16::from_le_bytes([fat[6], fat[7]]) as usize;
        while off + 16 <= fat.len() {
            let kind = u16::from_le_bytes([fat[off], fat[off + 1]]);
            let h = u32::from_le_bytes(fat[off + 4..off + 8].try_into().unwrap()) as usize;
            let n = u64::from_le_bytes(fat[off + 8..off + 16].try_into().unwrap()) as usize;
            out.push((kind, &fat[off + h..off + h + n]));
            off += h + n;
        }
        out
    }

    #[test]
    fn decompression_is_bounded_across_all_entries() {
        const COMPRESSED: &[u8] =
            include_bytes!("../../tests/fixtures/module_vars_compressed.fatbin");
        let e = entries(COMPRESSED);
        let (cubin, ptx) = (e[0].1, e[1].1);
        assert_eq!((e[0].0, e[1].0), (2, 1));
        let (cubin_len, ptx_len) = (
            unzstd(cubin, MAX_DECOMPRESSED).unwrap().len() as u64,
            unzstd(ptx, MAX_DECOMPRESSED).unwrap().len() as u64,
        );
        assert_eq!((cubin_len, ptx_len), (6000, 1088));
        // The PTX frame first, as an entry of an unknown kind (decompressed, then skipped),
        // then the cubin: both count against one limit.
        let mut fat = FATBIN_MAGIC.to_le_bytes().to_vec();
        fat.extend([1, 0, 16, 0]);
        fat.extend((32 + ptx.len() as u64 + cubin.len() as u64).to_le_bytes());
        for (kind, p) in [(7u16, ptx), (2, cubin)] {
            fat.extend(kind.to_le_bytes());
            fat.extend([0, 0, 16, 0, 0, 0]);
            fat.extend((p.len() as u64).to_le_bytes());
            fat.extend(p);
        }
        let all = fatbin_globals_within(&fat, cubin_len + ptx_len).unwrap();
        assert_eq!(summary(&all), want(true));
        // What the PTX entry used leaves 64 bytes of the cubin: its ELF header alone, which
        // names no variables.
        assert_eq!(
            fatbin_globals_within(&fat, ptx_len + 64),
            Err(ImageError::NoReadableEntry(format!(
                "kind 7, {} bytes",
                ptx.len()
            )))
        );
    }

    #[test]
    fn the_ptx_declares_the_same_variables() {
        let text = String::from_utf8_lossy(PTX);
        assert_eq!(summary(&ptx_globals(&text)), want(false));
    }

    #[test]
    fn images_are_read_from_the_pointer_the_driver_gets() {
        // SAFETY: each pointer is a complete image of the kind its magic says.
        unsafe {
            assert_eq!(summary(&globals_of(CUBIN.as_ptr()).unwrap()), want(true));
            assert_eq!(summary(&globals_of(FATBIN.as_ptr()).unwrap()), want(true));
            let mut ptx = PTX.to_vec();
            ptx.push(0);
            assert_eq!(summary(&globals_of(ptx.as_ptr()).unwrap()), want(false));
            // nvcc's wrapper: { magic, version, data, filename }.
            #[repr(C)]
            struct Wrapper {
                magic: u32,
                version: u32,
                data: *const u8,
                file: *const u8,
            }
            let w = Wrapper {
                magic: FATBIN_WRAPPER_MAGIC,
                version: 1,
                data: FATBIN.as_ptr(),
                file: core::ptr::null(),
            };
            let p = &w as *const Wrapper as *const u8;
            assert_eq!(summary(&globals_of(p).unwrap()), want(true));
        }
    }
}
