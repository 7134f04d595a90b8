//! Module-scope variables of a cubin (an ELF64 image): `STT_OBJECT` symbols defined in
//! `.nv.global` (uninitialized `__device__`), `.nv.global.init` (initialized `__device__`) and
//! `.nv.constantN` (`__constant__`, which kernels cannot write). CUDA has no API that lists a
//! module's globals, so their names come from here and their addresses from
//! `cuModuleGetGlobal_v2`/`cuLibraryGetGlobal` (docs/runtime-abi.md, "CUDA"). Every read is
//! bounds-checked.

/// One module-scope variable named by the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalSym {
    /// Symbol name as the driver looks it up (mangled for C++ names).
    pub name: String,
    /// Size from the symbol table.
    pub size: u64,
    /// `__constant__` (kernels cannot write it: never snapshotted).
    pub constant: bool,
    /// Index of its section in the cubin (0 when unknown, e.g. from PTX).
    pub section: u16,
    /// Its offset in that section (`st_value`).
    pub offset: u64,
}

/// Why an image could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// Not an ELF64 little-endian image.
    #[error("not an ELF64 little-endian image")]
    NotElf,
    /// A header, table or string lies outside the image.
    #[error("truncated ELF image: {0} out of bounds")]
    Truncated(&'static str),
    /// A fat binary held no entry kreplay can read (compressed, or no ELF/PTX).
    #[error("fat binary has no readable cubin or PTX entry ({0})")]
    NoReadableEntry(String),
    /// The image's tables make reading them cost far more than its size (names running into
    /// one long string, symbol tables over the same entries): not a compiler's output.
    #[error("implausible ELF image: reading its {0} costs more than twice its size")]
    Implausible(&'static str),
    /// The image's first bytes match no known format.
    #[error("unknown image format (magic {0:#010x})")]
    UnknownFormat(u32),
}

const SHT_SYMTAB: u32 = 2;
const STT_OBJECT: u8 = 1;
const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;

/// The `N` bytes at `off` (an offset from a header may be anything: never `off + N`).
fn bytes_at<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..)?.get(..N)?.try_into().ok()
}

fn u16_at(b: &[u8], off: usize, what: &'static str) -> Result<u16, ImageError> {
    bytes_at(b, off)
        .map(u16::from_le_bytes)
        .ok_or(ImageError::Truncated(what))
}

fn u32_at(b: &[u8], off: usize, what: &'static str) -> Result<u32, ImageError> {
    bytes_at(b, off)
        .map(u32::from_le_bytes)
        .ok_or(ImageError::Truncated(what))
}

fn u64_at(b: &[u8], off: usize, what: &'static str) -> Result<u64, ImageError> {
    bytes_at(b, off)
        .map(u64::from_le_bytes)
        .ok_or(ImageError::Truncated(what))
}

/// Bytes [`globals`] may still read. A compiler's cubin has each symbol entry and each string
/// read about once, so twice the image's size is plenty; an image whose tables make it read
/// more (every symbol named into one long string: quadratic time, and as many copies of it)
/// is refused instead.
struct Budget(usize);

impl Budget {
    fn spend(&mut self, n: usize, what: &'static str) -> Result<(), ImageError> {
        self.0 = self.0.checked_sub(n).ok_or(ImageError::Implausible(what))?;
        Ok(())
    }
}

fn c_str<'b>(
    b: &'b [u8],
    off: usize,
    what: &'static str,
    budget: &mut Budget,
) -> Result<&'b str, ImageError> {
    let tail = b.get(off..).ok_or(ImageError::Truncated(what))?;
    let end = tail.iter().position(|&c| c == 0);
    budget.spend(end.map_or(tail.len(), |e| e + 1), "strings")?;
    let end = end.ok_or(ImageError::Truncated(what))?;
    std::str::from_utf8(&tail[..end]).map_err(|_| ImageError::Truncated(what))
}

/// A section header's fields kreplay reads.
struct Section {
    name: u32,
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    entsize: usize,
}

fn sections(b: &[u8]) -> Result<Vec<Section>, ImageError> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err(ImageError::NotElf);
    }
    let shoff = u64_at(b, 0x28, "e_shoff")? as usize;
    let shentsize = u16_at(b, 0x3a, "e_shentsize")? as usize;
    let shnum = u16_at(b, 0x3c, "e_shnum")? as usize;
    if shentsize < 64 {
        return Err(ImageError::Truncated("section header size"));
    }
    (0..shnum)
        .map(|i| {
            // Offsets from the image's headers saturate: past the end, never wrapped round.
            let h = shoff.saturating_add(i * shentsize);
            Ok(Section {
                name: u32_at(b, h, "sh_name")?,
                kind: u32_at(b, h.saturating_add(4), "sh_type")?,
                offset: u64_at(b, h.saturating_add(0x18), "sh_offset")? as usize,
                size: u64_at(b, h.saturating_add(0x20), "sh_size")? as usize,
                link: u32_at(b, h.saturating_add(0x28), "sh_link")?,
                entsize: u64_at(b, h.saturating_add(0x38), "sh_entsize")? as usize,
            })
        })
        .collect()
}

/// The size of the ELF image starting at `head` (the end of its furthest table or section),
/// from its headers alone; `read(off, len)` returns image bytes. Used when the driver is handed
/// a bare pointer with no length.
pub fn image_len(read: &dyn Fn(usize, usize) -> Option<Vec<u8>>) -> Result<usize, ImageError> {
    let head = read(0, 64).ok_or(ImageError::Truncated("ELF header"))?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Err(ImageError::NotElf);
    }
    let shoff = u64_at(&head, 0x28, "e_shoff")? as usize;
    let shentsize = u16_at(&head, 0x3a, "e_shentsize")? as usize;
    let shnum = u16_at(&head, 0x3c, "e_shnum")? as usize;
    let table_end = shoff.saturating_add(shentsize * shnum);
    let table = read(shoff, shentsize * shnum).ok_or(ImageError::Truncated("section headers"))?;
    let mut end = table_end;
    for i in 0..shnum {
        let h = i * shentsize;
        let kind = u32_at(&table, h + 4, "sh_type")?;
        let off = u64_at(&table, h + 0x18, "sh_offset")? as usize;
        let size = u64_at(&table, h + 0x20, "sh_size")? as usize;
        // SHT_NOBITS (8) occupies no file bytes.
        if kind != 8 {
            end = end.max(off.saturating_add(size));
        }
    }
    Ok(end)
}

/// Whether `name` is one the compiler gives literal data rather than a declared variable.
pub fn is_compiler_literal(name: &str) -> bool {
    name.starts_with('$')
        || name
            .strip_prefix("__unnamed_")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// For a section named `name`: `Some(constant)` when it holds module variables, `None` when not.
fn variable_section(name: &str) -> Option<bool> {
    let constant = name.starts_with(".nv.constant");
    // `.nv.constant0.*` is the kernel-parameter bank, not user variables.
    let variables = (name == ".nv.global" || name == ".nv.global.init" || constant)
        && !name.starts_with(".nv.constant0");
    variables.then_some(constant)
}

/// The module-scope variables of the cubin `b`.
pub fn globals(b: &[u8]) -> Result<Vec<GlobalSym>, ImageError> {
    let secs = sections(b)?;
    let shstrndx = u16_at(b, 0x3e, "e_shstrndx")? as usize;
    let shstr = secs
        .get(shstrndx)
        .ok_or(ImageError::Truncated("e_shstrndx"))?;
    let mut budget = Budget(b.len().saturating_mul(2));
    // Per section: None when it holds no variables, else whether it is `__constant__`.
    let mut kinds: std::collections::HashMap<u16, Option<bool>> = Default::default();
    let mut out = Vec::new();
    for symtab in secs.iter().filter(|s| s.kind == SHT_SYMTAB) {
        let strtab = secs
            .get(symtab.link as usize)
            .ok_or(ImageError::Truncated("symtab sh_link"))?;
        let ent = symtab.entsize.max(24);
        for i in 0..symtab.size / ent {
            budget.spend(ent, "symbol tables")?;
            let e = symtab.offset.saturating_add(i * ent);
            let name = u32_at(b, e, "st_name")?;
            let [info] =
                bytes_at(b, e.saturating_add(4)).ok_or(ImageError::Truncated("st_info"))?;
            let shndx = u16_at(b, e.saturating_add(6), "st_shndx")?;
            let value = u64_at(b, e.saturating_add(8), "st_value")?;
            let size = u64_at(b, e.saturating_add(16), "st_size")?;
            if info & 0xf != STT_OBJECT || shndx == SHN_UNDEF || shndx >= SHN_LORESERVE {
                continue;
            }
            let Some(sec) = secs.get(shndx as usize) else {
                continue;
            };
            let constant = match kinds.get(&shndx) {
                Some(&k) => k,
                None => {
                    let off = shstr.offset.saturating_add(sec.name as usize);
                    let k = variable_section(c_str(b, off, "section name", &mut budget)?);
                    kinds.insert(shndx, k);
                    k
                }
            };
            let Some(constant) = constant else {
                continue;
            };
            let off = strtab.offset.saturating_add(name as usize);
            let n = c_str(b, off, "symbol name", &mut budget)?;
            // `$str`, `$str$1`, `__unnamed_N`: names the compiler gives literal data (device
            // printf formats, the file and function strings of `assert`). Writing them is
            // undefined behaviour and the driver does not resolve them by name, so they are
            // not module variables.
            if n.is_empty() || is_compiler_literal(n) {
                continue;
            }
            out.push(GlobalSym {
                name: n.to_string(),
                size,
                constant,
                section: shndx,
                offset: value,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 little-endian header whose section table of `shnum` 64-byte entries is at
    /// `shoff`.
    fn header(shoff: u64, shnum: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..6].copy_from_slice(b"\x7fELF\x02\x01");
        h[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        h[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        h[0x3c..0x3e].copy_from_slice(&shnum.to_le_bytes());
        h
    }

    fn read_in(b: &[u8]) -> impl Fn(usize, usize) -> Option<Vec<u8>> + '_ {
        |off, len| b.get(off..off.checked_add(len)?).map(<[u8]>::to_vec)
    }

    #[test]
    fn a_section_table_past_the_address_space_is_truncation() {
        let h = header(u64::MAX - 2, 1);
        assert_eq!(globals(&h), Err(ImageError::Truncated("sh_name")));
        assert_eq!(
            image_len(&read_in(&h)),
            Err(ImageError::Truncated("section headers"))
        );
    }

    #[test]
    fn table_offsets_past_the_address_space_are_truncation() {
        // Section 1 a symbol table at an offset a symbol entry's fields overflow; its
        // string table (section 0) at one a name's offset overflows.
        let mut b = header(64, 2);
        let mut strtab = [0u8; 64];
        strtab[0x18..0x20].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        let mut symtab = [0u8; 64];
        symtab[4..8].copy_from_slice(&SHT_SYMTAB.to_le_bytes());
        symtab[0x18..0x20].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        symtab[0x20..0x28].copy_from_slice(&24u64.to_le_bytes());
        b.extend(strtab);
        b.extend(symtab);
        assert_eq!(globals(&b), Err(ImageError::Truncated("st_name")));
        assert_eq!(image_len(&read_in(&b)), Ok(usize::MAX));
    }

    /// Appends a section header: (name offset, type, file offset, size, link, entsize).
    fn section(
        b: &mut Vec<u8>,
        (name, kind, off, size, link, ent): (u32, u32, u64, u64, u32, u64),
    ) {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        h[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
        h[0x38..0x40].copy_from_slice(&ent.to_le_bytes());
        b.extend(h);
    }

    /// A cubin whose `syms` symbols in `.nv.global` (variables when `objects`) are named at
    /// offsets 0, 1, 2... of one `name_len`-byte string, its symbol table listed `symtabs` times.
    fn adversarial(syms: usize, name_len: usize, symtabs: u16, objects: bool) -> Vec<u8> {
        let shstr = b"\0.nv.global\0";
        let shnum = 3 + symtabs;
        let shstr_off = 64 + 64 * shnum as u64;
        let sym_off = shstr_off + shstr.len() as u64;
        let str_off = sym_off + 24 * syms as u64;
        let mut b = header(64, shnum);
        section(&mut b, (0, 3, shstr_off, shstr.len() as u64, 0, 0));
        section(&mut b, (0, 3, str_off, name_len as u64 + 1, 0, 0));
        section(&mut b, (1, 8, 0, 64, 0, 0));
        for _ in 0..symtabs {
            section(&mut b, (0, SHT_SYMTAB, sym_off, 24 * syms as u64, 1, 24));
        }
        b.extend(shstr);
        for i in 0..syms {
            let mut e = [0u8; 24];
            e[..4].copy_from_slice(&(i as u32).to_le_bytes());
            e[4] = if objects { STT_OBJECT } else { 0 };
            e[6..8].copy_from_slice(&2u16.to_le_bytes());
            b.extend(e);
        }
        b.extend(std::iter::repeat_n(b'v', name_len));
        b.push(0);
        b
    }

    #[test]
    fn tables_that_cost_more_than_twice_the_image_to_read_are_refused() {
        // A well-formed table of this shape reads fine, names and all.
        let fine = globals(&adversarial(3, 8, 1, true)).unwrap();
        let names: Vec<&str> = fine.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["vvvvvv", "vvvvvvv", "vvvvvvvv"]);
        // 64 names running into one 4 KiB string: 256 KiB of names from a 6 KiB image.
        assert_eq!(
            globals(&adversarial(64, 4096, 1, true)),
            Err(ImageError::Implausible("strings"))
        );
        // One 100-entry symbol table listed 200 times.
        assert_eq!(globals(&adversarial(100, 8, 1, false)), Ok(vec![]));
        assert_eq!(
            globals(&adversarial(100, 8, 200, false)),
            Err(ImageError::Implausible("symbol tables"))
        );
    }

    #[test]
    fn compiler_literals_are_told_from_variables() {
        for n in ["$str", "$str$12", "__unnamed_1", "__unnamed_22"] {
            assert!(is_compiler_literal(n), "{n}");
        }
        for n in [
            "bumps",
            "_ZN2ns6scopedE",
            "__unnamed_",
            "__unnamed_x",
            "str",
        ] {
            assert!(!is_compiler_literal(n), "{n}");
        }
    }
}
