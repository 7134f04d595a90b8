//! Kernel names for launch calls, found while the traced processes are alive.
//!
//! A launch call names its kernel by a handle: `hipLaunchKernel` by the host stub's address,
//! `hipModuleLaunchKernel` and `cuLaunchKernel` by a function handle. Names come from two
//! places: the BPF program reads the name string of the calls that create handles
//! (`__hipRegisterFunction`, `hipModuleGetFunction`, `cuModuleGetFunction`,
//! `cuLibraryGetKernel`: [`NameRecord`]s), and a handle nobody named during the trace (a
//! process attached with `-p` registered its kernels long before) is looked up in the ELF
//! symbol table of the file mapped at that address in the process (`/proc/PID/maps`, files
//! opened through `/proc/PID/root`), and, for a host stub without a symbol (a stripped
//! library), in the file's CUDA registration code ([`super::registrations`]). Mangled C++
//! names are demangled. Each name found becomes
//! a [`KernelName`] stream record, so the trace renders it after the process is gone.
use std::{
    collections::{HashMap, HashSet},
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use kreplay_common::{
    api::{ApiKind, NO_ARG, spec_of},
    probe::{CallRecord, FLAG_OUT_VALID, NameRecord},
    stream::KernelName,
};

use super::registrations::registered_kernels;
use crate::probes::elf::{ElfError, SymbolTable};

/// One file-backed mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The file, as the process sees it.
    pub path: String,
}

/// The file-backed mappings of a `/proc/PID/maps` text.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            // address perms offset dev inode path — the path may contain spaces.
            let mut it = l.splitn(6, char::is_whitespace);
            let range = it.next()?;
            let _perms = it.next()?;
            let offset = u64::from_str_radix(it.next()?, 16).ok()?;
            let _dev = it.next()?;
            let _inode = it.next()?;
            let path = it.next()?.trim_start();
            let (start, end) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            path.starts_with('/').then(|| Mapping {
                start,
                end,
                offset,
                path: path.trim_end_matches(" (deleted)").to_string(),
            })
        })
        .collect()
}

/// A C++ (Itanium ABI) name demangled; any other name unchanged.
pub fn demangle(raw: &str) -> String {
    if raw.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(raw)
        && let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return s;
    }
    raw.to_string()
}

/// A process's mappings as last read, and whether it shares kreplay's root directory (its
/// files can then be opened by their own paths after it exits).
struct ProcMaps {
    maps: Vec<Mapping>,
    host_root: bool,
}

impl ProcMaps {
    fn read(pid: u32) -> Option<ProcMaps> {
        let text = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        let root = fs::read_link(format!("/proc/{pid}/root")).ok();
        Some(ProcMaps {
            maps: parse_maps(&text),
            host_root: root.is_some_and(|r| r == std::path::Path::new("/")),
        })
    }

    fn find(&self, addr: u64) -> Option<&Mapping> {
        self.maps.iter().find(|m| addr >= m.start && addr < m.end)
    }
}

/// What one mapped file says about the names of addresses in it: its symbols, and the host
/// stubs its CUDA registration code names (empty for files that do not register kernels).
struct FileNames {
    symbols: SymbolTable,
    registered: HashMap<u64, String>,
}

impl FileNames {
    /// Reads the file at `path` once for both.
    fn read(path: &Path) -> Result<FileNames, ElfError> {
        let data = fs::read(path).map_err(|source| ElfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let symbols = SymbolTable::parse(&data).map_err(|source| ElfError::Parse {
            path: path.display().to_string(),
            source,
        })?;
        let registered = registered_kernels(&data).unwrap_or_else(|e| {
            tracing::debug!(error = %e, path = %path.display(), "no registrations read");
            HashMap::new()
        });
        Ok(FileNames {
            symbols,
            registered,
        })
    }

    /// The symbol at file offset `off`, else the kernel registered with the host stub there.
    fn name_at(&self, off: u64) -> Option<&str> {
        self.symbols
            .name_at(off)
            .or_else(|| self.registered.get(&off).map(String::as_str))
    }
}

/// Whether the ELF file at `path` registers GPU kernels: it imports or defines
/// `__cudaRegisterFunction` or `__hipRegisterFunction`. Only its headers and dynamic symbols are
/// read (the file is mapped, not read whole).
pub fn registers_kernels(path: &Path) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    let Ok(len) = file.metadata().map(|m| m.len() as usize) else {
        return false;
    };
    if len < 64 {
        return false;
    }
    // SAFETY: a private read-only mapping of a file opened here; it is unmapped below, after
    // the last use of the slice made from it. A file truncated meanwhile would fault on the
    // pages past its end: the runtime libraries kreplay reads are not rewritten in place.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: `addr` maps `len` readable bytes until the munmap below.
    let data = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
    let wanted = |n: &str| {
        let base = n.split_once('@').map_or(n, |(b, _)| b);
        base == "__cudaRegisterFunction" || base == "__hipRegisterFunction"
    };
    let found = object::File::parse(data).is_ok_and(|f| {
        f.dynamic_symbols()
            .chain(f.symbols())
            .any(|s| s.name().is_ok_and(wanted))
    });
    // SAFETY: unmaps the mapping made above; `data` is not used after this.
    unsafe { libc::munmap(addr, len) };
    found
}

/// What a launch call's kernel resolved to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The kernel's name, when known.
    pub name: Option<Arc<str>>,
    /// A name just found in the process's symbols, to write before the call.
    pub new_record: Option<KernelName>,
}

/// Names of kernel handles per process, and the symbol tables read to find them.
#[derive(Default)]
pub struct KernelNames {
    names: HashMap<(u32, u64), Arc<str>>,
    /// Handles looked up in the symbols without success (not looked up again).
    misses: HashSet<(u32, u64)>,
    maps: HashMap<u32, ProcMaps>,
    /// Symbol and registration tables by the file's (device, inode); `None` when it could not
    /// be read.
    tables: HashMap<(u64, u64), Option<FileNames>>,
    /// Processes found gone at the last [`KernelNames::forget_exited`].
    gone: HashSet<u32>,
}

impl KernelNames {
    /// Takes the name the BPF program read from a naming call; returns its stream record.
    pub fn named(&mut self, n: &NameRecord) -> KernelName {
        let name = demangle(&String::from_utf8_lossy(n.name_bytes()));
        self.names
            .insert((n.pid, n.handle), Arc::from(name.as_str()));
        self.misses.remove(&(n.pid, n.handle));
        KernelName {
            pid: n.pid,
            ts_ns: n.ts_ns,
            handle: n.handle,
            name,
        }
    }

    /// A name a call passes on: `cuKernelGetFunction` gives the function it returns the name
    /// of the kernel it was given (a naming API with a pointer argument and no name string).
    pub fn alias(&mut self, r: &CallRecord) -> Option<KernelName> {
        let spec = spec_of(r.api)?;
        if spec.kind != ApiKind::Symbol
            || spec.name_arg != NO_ARG
            || spec.ptr_arg == NO_ARG
            || r.ret as u32 != 0
            || r.flags & FLAG_OUT_VALID == 0
            || r.out == 0
        {
            return None;
        }
        let from = r.arg(spec.ptr_arg)?;
        let name = self.names.get(&(r.pid, from))?.clone();
        self.names.insert((r.pid, r.out), name.clone());
        Some(KernelName {
            pid: r.pid,
            ts_ns: r.exit_ns,
            handle: r.out,
            name: name.to_string(),
        })
    }

    /// The name handle `handle` of process `pid` has now, without looking further.
    pub fn known(&self, pid: u32, handle: u64) -> Option<Arc<str>> {
        self.names.get(&(pid, handle)).cloned()
    }

    /// Gives handle `handle` of process `pid` the name `name`, unless it has one: a driver
    /// launch's function gets the name of the runtime launch it was made from (see
    /// [`super::nesting`]). Returns the stream record, timed `ts_ns`, for a name given.
    pub fn name_handle(
        &mut self,
        pid: u32,
        handle: u64,
        name: &Arc<str>,
        ts_ns: u64,
    ) -> Option<KernelName> {
        if handle == 0 || self.names.contains_key(&(pid, handle)) {
            return None;
        }
        self.misses.remove(&(pid, handle));
        self.names.insert((pid, handle), name.clone());
        Some(KernelName {
            pid,
            ts_ns,
            handle,
            name: name.to_string(),
        })
    }

    /// The kernel a launch call runs, for APIs that name one ([`ApiSpec::kernel_arg`]).
    ///
    /// [`ApiSpec::kernel_arg`]: kreplay_common::api::ApiSpec::kernel_arg
    pub fn launch(&mut self, r: &CallRecord) -> Resolved {
        let Some(spec) = spec_of(r.api) else {
            return Resolved::default();
        };
        if spec.kernel_arg == NO_ARG {
            return Resolved::default();
        }
        let handle = r.arg(spec.kernel_arg).unwrap_or(0);
        let key = (r.pid, handle);
        if handle == 0 || self.misses.contains(&key) {
            return Resolved::default();
        }
        if let Some(n) = self.names.get(&key) {
            return Resolved {
                name: Some(n.clone()),
                new_record: None,
            };
        }
        // A driver handle is heap memory, not a symbol: its name is read from the driver's
        // object (see `driver_names`) while the process lives.
        // A runtime launch may also pass a kernel handle instead of a host stub
        // (`cudaKernel_t`, a `CUkernel`: PyTorch's launches do), heap memory outside every file.
        let found = match spec.library {
            kreplay_common::api::Library::Cuda => super::driver_names::function_name(r.pid, handle),
            kreplay_common::api::Library::CudaRt => self
                .symbol_at(r.pid, handle)
                .or_else(|| super::driver_names::function_name(r.pid, handle)),
            _ => self.symbol_at(r.pid, handle),
        };
        match found {
            Some(raw) => {
                let name = demangle(&raw);
                let shared: Arc<str> = Arc::from(name.as_str());
                self.names.insert(key, shared.clone());
                Resolved {
                    name: Some(shared),
                    // Just before the call, so a merge orders it first.
                    new_record: Some(KernelName {
                        pid: r.pid,
                        ts_ns: r.enter_ns.saturating_sub(1),
                        handle,
                        name,
                    }),
                }
            }
            None => {
                if tracing::enabled!(tracing::Level::DEBUG) {
                    let at = self
                        .maps
                        .get(&r.pid)
                        .and_then(|m| m.find(handle))
                        .map(|m| format!("{}+{:#x}", m.path, handle - m.start + m.offset));
                    tracing::debug!(pid = r.pid, handle = %format!("{handle:#x}"), api = spec.name, ?at, "kernel not named");
                }
                self.misses.insert(key);
                Resolved::default()
            }
        }
    }

    /// Reads process `pid`'s mappings now, so that its launches can be resolved after it
    /// exits (records are drained a little after they are made). Called when a process is
    /// attached and on each rescan.
    pub fn remember(&mut self, pid: u32) {
        // A process that has exited but not been reaped yet shows no mappings: what was read
        // while it lived is kept, since its last launches may still be waiting in the rings.
        if let Some(m) = ProcMaps::read(pid)
            && !m.maps.is_empty()
        {
            self.maps.insert(pid, m);
        }
    }

    /// Reads, now, the names in every file process `pid` maps that registers GPU kernels (see
    /// [`registers_kernels`]): done at a late attach, so that the first launches drained do not
    /// wait while a large library (PyTorch's is over a gigabyte) is read and scanned, which
    /// would leave the rings to overflow meanwhile. Returns how many files were read.
    pub fn warm(&mut self, pid: u32) -> usize {
        let Some(procmaps) = self.maps.get(&pid) else {
            return 0;
        };
        let paths: HashSet<String> = procmaps.maps.iter().map(|m| m.path.clone()).collect();
        let mut read = 0;
        for path in paths {
            let host =
                PathBuf::from(format!("/proc/{pid}/root")).join(path.trim_start_matches('/'));
            let Ok(meta) = fs::metadata(&host) else {
                continue;
            };
            let key = (meta.dev(), meta.ino());
            if self.tables.contains_key(&key) || !registers_kernels(&host) {
                continue;
            }
            self.tables.insert(key, FileNames::read(&host).ok());
            read += 1;
        }
        read
    }

    /// Drops what is kept about processes that have exited: those found gone at two calls in
    /// a row (the records they made before exiting were drained in between). Called on each
    /// tick, so a long `--all` trace keeps memory for live processes only.
    pub fn forget_exited(&mut self, alive: impl Fn(u32) -> bool) {
        let mut pids: HashSet<u32> = self.maps.keys().copied().collect();
        pids.extend(self.names.keys().map(|k| k.0));
        let now_gone: HashSet<u32> = pids.into_iter().filter(|&p| !alive(p)).collect();
        let forget: HashSet<u32> = now_gone.intersection(&self.gone).copied().collect();
        if !forget.is_empty() {
            self.maps.retain(|p, _| !forget.contains(p));
            self.names.retain(|k, _| !forget.contains(&k.0));
            self.misses.retain(|k| !forget.contains(&k.0));
        }
        self.gone = now_gone;
    }

    /// The symbol at `addr` in the file process `pid` maps there, or the kernel the file's
    /// registration code registers with the host stub at `addr`.
    fn symbol_at(&mut self, pid: u32, addr: u64) -> Option<String> {
        if self.maps.get(&pid).and_then(|m| m.find(addr)).is_none() {
            // Not in the mappings read so far: the process may have mapped more since.
            self.remember(pid);
        }
        let procmaps = self.maps.get(&pid)?;
        let m = procmaps.find(addr)?;
        let through_proc =
            PathBuf::from(format!("/proc/{pid}/root")).join(m.path.trim_start_matches('/'));
        let host = match fs::metadata(&through_proc) {
            Ok(_) => through_proc,
            // The process is gone; a file of the host's own tree can still be opened.
            Err(_) if procmaps.host_root => PathBuf::from(&m.path),
            Err(_) => return None,
        };
        let file_off = addr - m.start + m.offset;
        let meta = fs::metadata(&host).ok()?;
        let table = self
            .tables
            .entry((meta.dev(), meta.ino()))
            .or_insert_with(|| match FileNames::read(&host) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::debug!(error = %e, "no symbols for kernel names");
                    None
                }
            });
        table.as_ref()?.name_at(file_off).map(str::to_string)
    }
}

#[cfg(test)]
mod tests;
