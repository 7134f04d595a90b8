//! Resolving exported function symbols of a shared library to the file offsets uprobes need.
//!
//! The kernel attaches uprobes by (inode, file offset). A library's symbols are read once from
//! its dynamic symbol table (and the static one when present), and each function's virtual
//! address is translated through the PT_LOAD segment that contains it.
use std::{collections::HashMap, fs, path::Path};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Errors reading a library's symbols.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The library path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not an ELF object this parser understands.
    #[error("parsing {path} as ELF: {source}")]
    Parse {
        /// The library path.
        path: String,
        /// The parser's error.
        source: object::Error,
    },
}

/// The function symbols of one library: name → (file offset, first code bytes).
#[derive(Debug, Default)]
pub struct SymbolTable {
    offsets: HashMap<String, u64>,
    /// First bytes of each function (for prologue inspection), keyed like `offsets`.
    prologues: HashMap<String, [u8; 16]>,
    /// File offset → the first function or data name found there (dynamic symbols first),
    /// for resolving an address in a process back to its symbol.
    names: HashMap<u64, String>,
}

impl SymbolTable {
    /// Reads the function symbols of the ELF file at `path`.
    pub fn read(path: &Path) -> Result<SymbolTable, ElfError> {
        let data = fs::read(path).map_err(|source| ElfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        SymbolTable::parse(&data).map_err(|source| ElfError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads the function symbols of an ELF file held in `data`.
    pub fn parse(data: &[u8]) -> Result<SymbolTable, object::Error> {
        let file = object::File::parse(data)?;
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .filter_map(|s| {
                let (off, size) = s.file_range();
                (size > 0).then_some((s.address(), off, size))
            })
            .collect();
        let mut table = SymbolTable::default();
        for sym in file.dynamic_symbols().chain(file.symbols()) {
            let text = sym.kind() == SymbolKind::Text;
            if !(text || sym.kind() == SymbolKind::Data)
                || !sym.is_definition()
                || sym.address() == 0
            {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            // A versioned symbol's name as a static symbol table may spell it
            // (`cudaMalloc@@libcudart.so.12`): the base name is the API's.
            let name = name.split_once('@').map_or(name, |(base, _)| base);
            if text && table.offsets.contains_key(name) {
                continue;
            }
            let addr = sym.address();
            // Addresses and offsets come from the file: never added unchecked.
            let Some(file_off) = segments
                .iter()
                .find(|&&(va, _, size)| addr >= va && addr - va < size)
                .and_then(|&(va, off, _)| (addr - va).checked_add(off))
            else {
                continue;
            };
            // Data symbols only name addresses (a compiler's kernel handle variable); they
            // are never probed.
            if !text {
                table
                    .names
                    .entry(file_off)
                    .or_insert_with(|| name.to_string());
                continue;
            }
            let mut prologue = [0u8; 16];
            let start = file_off as usize;
            if let Some(bytes) = data.get(start..).and_then(|t| t.get(..16)) {
                prologue.copy_from_slice(bytes);
            }
            table
                .names
                .entry(file_off)
                .or_insert_with(|| name.to_string());
            table.offsets.insert(name.to_string(), file_off);
            table.prologues.insert(name.to_string(), prologue);
        }
        Ok(table)
    }

    /// The file offset of function `name`, if the library defines it.
    pub fn offset(&self, name: &str) -> Option<u64> {
        self.offsets.get(name).copied()
    }

    /// The function or data object that starts at file offset `off`, if any does.
    pub fn name_at(&self, off: u64) -> Option<&str> {
        self.names.get(&off).map(String::as_str)
    }

    /// The first 16 bytes of function `name`.
    pub fn prologue(&self, name: &str) -> Option<[u8; 16]> {
        self.prologues.get(name).copied()
    }

    /// Number of function symbols found.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True when the library defines no function symbols.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_a_libc_function_to_its_file_offset() {
        // The running test binary links libc; find it through our own maps.
        let maps = fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("libc mapped");
        let table = SymbolTable::read(Path::new(libc)).unwrap();
        let off = table.offset("getpid").expect("getpid in libc");
        // The offset lies inside the file and differs from zero.
        let len = fs::metadata(libc).unwrap().len();
        assert!(off > 0 && off < len, "offset {off:#x} outside {len:#x}");
        assert!(table.offset("no_such_function_kreplay").is_none());
        // The reverse lookup finds a function at its offset, and nothing one byte in.
        let name = table.name_at(off).expect("a name at getpid's offset");
        assert_eq!(table.offset(name), Some(off));
        assert_eq!(table.name_at(off + 1), None);
    }

    #[test]
    fn segment_and_symbol_addresses_near_the_top_of_the_address_space_do_not_overflow() {
        // Found by the cli_elf fuzz target in the CUDA sim's libcuda: a segment header mutated
        // so that its end passes u64::MAX. The functions all lie in the other segments and
        // resolve as in the unmutated library.
        let data = include_bytes!("../../../fuzz/corpus/cli_elf/crash-overflow-segment-end");
        let seed = include_bytes!("../../../fuzz/corpus/cli_elf/cuda_sim_libcuda.so.1");
        let (table, whole) = (
            SymbolTable::parse(data).unwrap(),
            SymbolTable::parse(seed).unwrap(),
        );
        assert_eq!((table.len(), whole.len()), (45, 45));
        assert_eq!(table.offset("cuInit"), Some(0x2270));
        assert_eq!(whole.offset("cuInit"), Some(0x2270));
    }

    #[test]
    fn a_non_elf_file_is_a_parse_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("kreplay-elf-{}", std::process::id()));
        fs::write(&dir, b"not an elf").unwrap();
        let err = SymbolTable::read(&dir).unwrap_err().to_string();
        fs::remove_file(&dir).unwrap();
        assert!(
            err.starts_with(&format!("parsing {} as ELF", dir.display())),
            "{err}"
        );
    }
}
