//! Finding the GPU runtime libraries a process really maps.
//!
//! A process's libraries come from `/proc/PID/maps`; each is opened through `/proc/PID/root`
//! so a library inside a container's mount namespace is the one probed. Probes attach by
//! (file, offset), so libraries are identified by device and inode: the same file mapped by
//! many processes is resolved and attached once.
use std::{
    collections::BTreeSet,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use kreplay_common::api::Library;

pub use kreplay_common::probe::discovery::RUNTIME_LIBRARIES;

/// The names looked for, for error messages.
pub fn looked_for() -> String {
    RUNTIME_LIBRARIES
        .iter()
        .map(|(n, _)| format!("{n}*"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The family of a library file name (`libamdhip64.so.6` → HIP), if supported.
pub fn family_of(file_name: &str) -> Option<Library> {
    RUNTIME_LIBRARIES.iter().find_map(|&(prefix, lib)| {
        let rest = file_name.strip_prefix(prefix)?;
        (rest.is_empty() || rest.starts_with('.')).then_some(lib)
    })
}

/// One runtime library file as some process maps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeLib {
    /// Device and inode of the file: its identity for attaching.
    pub dev_ino: (u64, u64),
    /// Path from this process's view (through `/proc/PID/root` when found via a pid).
    pub host_path: PathBuf,
    /// The family of APIs it exports.
    pub family: Library,
}

/// Describes the library at `host_path` if it is a supported runtime and can be stat'ed.
pub fn describe(host_path: &Path) -> Option<RuntimeLib> {
    let name = host_path.file_name()?.to_str()?;
    let family = family_of(name)?;
    let meta = fs::metadata(host_path).ok()?;
    Some(RuntimeLib {
        dev_ino: (meta.dev(), meta.ino()),
        host_path: host_path.to_path_buf(),
        family,
    })
}

/// Paths of mapped files in a `/proc/PID/maps` text.
pub fn mapped_paths(maps: &str) -> BTreeSet<String> {
    maps.lines()
        .filter_map(|l| {
            // address perms offset dev inode path — the path may contain spaces.
            let mut it = l.splitn(6, char::is_whitespace);
            let fields: Vec<&str> = it.by_ref().take(5).collect();
            let path = it.next()?.trim_start();
            (fields.len() == 5 && path.starts_with('/')).then(|| path.to_string())
        })
        .collect()
}

/// The supported runtime libraries process `pid` maps now.
pub fn libs_of_pid(pid: u32) -> std::io::Result<Vec<RuntimeLib>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut out = BTreeSet::new();
    for path in mapped_paths(&maps) {
        let trimmed = path.trim_end_matches(" (deleted)");
        let Some(name) = Path::new(trimmed).file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if family_of(name).is_none() {
            continue;
        }
        let host = root.join(trimmed.trim_start_matches('/'));
        if let Some(lib) = describe(&host) {
            out.insert(lib);
        }
    }
    for path in super::static_cudart::in_maps(&maps, &root) {
        if let Some(lib) = static_runtime(&root.join(path.trim_start_matches('/'))) {
            out.insert(lib);
        }
    }
    Ok(out.into_iter().collect())
}

/// The object at `host_path` as a CUDA runtime when it has the runtime linked in statically
/// (see [`super::static_cudart`]).
fn static_runtime(host_path: &Path) -> Option<RuntimeLib> {
    let meta = fs::metadata(host_path).ok()?;
    Some(RuntimeLib {
        dev_ino: (meta.dev(), meta.ino()),
        host_path: host_path.to_path_buf(),
        family: Library::CudaRt,
    })
}

/// The runtime libraries a command about to start will map at startup: its own executable
/// when it has the CUDA runtime linked in, and the libraries the loader will load for it
/// ([`startup_libraries`]), by name or with a static runtime inside.
pub fn startup_objects(program: &str) -> Vec<RuntimeLib> {
    which(program)
        .into_iter()
        .chain(startup_libraries(program))
        .filter_map(|p| {
            describe(&p).or_else(|| {
                super::static_cudart::has_static_cudart(&p)
                    .then(|| static_runtime(&p))
                    .flatten()
            })
        })
        .collect()
}

/// The runtime libraries to probe in process `pid` (plus the `--lib` paths in `extra`), or
/// the one-line reason there are none: no such process, /proc unreadable, nothing mapped.
pub fn target_libs(pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
    let libs = mapped_libs(pid, extra)?;
    if libs.is_empty() {
        anyhow::bail!(
            "process {pid} ({}) maps no supported GPU runtime library (looked for {})",
            super::capture::process_name(pid),
            looked_for()
        );
    }
    Ok(libs)
}

/// The runtime libraries process `pid` maps now (plus `extra`), none at all included (a
/// launcher whose children load the runtimes); an error only when the process is gone or its
/// mappings cannot be read.
pub fn mapped_libs(pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("no such process: {pid}");
    }
    let mut libs = libs_of_pid(pid).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            anyhow::anyhow!("permission denied reading /proc/{pid}/maps: run kreplay as root")
        } else {
            anyhow::anyhow!("reading /proc/{pid}/maps: {e}")
        }
    })?;
    libs.extend(extra.iter().filter_map(|p| describe_forced(p)));
    Ok(libs)
}

/// Every running process id.
pub fn all_pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The dynamic loader the system's programs use.
pub const SYSTEM_LOADER: &str = "/lib64/ld-linux-x86-64.so.2";

/// Whether a mapped file's name is a dynamic loader's (`ld-linux-x86-64.so.2`, `ld-2.31.so`).
fn is_loader(name: &str) -> bool {
    name.starts_with("ld-linux") || (name.starts_with("ld-") && name.contains(".so"))
}

/// The dynamic loaders of the processes `pids` (seen through `/proc/PID/root`) and the
/// system's, each file once.
pub fn loaders(pids: &[u32]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |p: PathBuf| {
        if let Ok(m) = fs::metadata(&p) {
            use std::os::unix::fs::MetadataExt;
            if seen.insert((m.dev(), m.ino())) {
                out.push(p);
            }
        }
    };
    add(PathBuf::from(SYSTEM_LOADER));
    for &pid in pids {
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for path in mapped_paths(&maps) {
            let trimmed = path.trim_end_matches(" (deleted)");
            if Path::new(trimmed)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_loader)
            {
                add(PathBuf::from(format!("/proc/{pid}/root"))
                    .join(trimmed.trim_start_matches('/')));
            }
        }
    }
    out
}

/// Every process's (pid, parent pid), from `/proc/PID/stat` (the parent is the fourth field,
/// after the command name in parentheses, which may itself hold spaces and parentheses).
pub fn parent_pids() -> Vec<(u32, u32)> {
    all_pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_of_stat(&stat)?))
        })
        .collect()
}

/// The parent pid in a `/proc/PID/stat` line.
fn parent_of_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Where a command about to start will find its runtime libraries: every supported library
/// file in its LD_LIBRARY_PATH, the loader cache's directories and the standard directories,
/// plus `extra` (from `--lib`).
pub fn candidates(ld_library_path: Option<&str>, extra: &[PathBuf]) -> Vec<RuntimeLib> {
    let mut dirs = library_dirs(ld_library_path);
    dirs.extend(loader_cache_dirs());
    libs_in(dirs, extra)
}

/// The runtime libraries running process `pid` could still `dlopen` by name: those in its
/// initial `LD_LIBRARY_PATH` (from `/proc/PID/environ`: the loader reads it once, at start)
/// and in the standard directories, seen through `/proc/PID/root`, plus the loader cache's
/// directories when the process shares kreplay's root. Probes attached to these before the
/// `dlopen` are in place from its first call; a library opened from anywhere else is found by
/// the periodic rescan of the process's mappings.
pub fn dlopen_candidates(pid: u32) -> Vec<RuntimeLib> {
    let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let ld = environ
        .split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"LD_LIBRARY_PATH="))
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let host_root = fs::read_link(&root).is_ok_and(|r| r == Path::new("/"));
    let mut dirs: Vec<PathBuf> = library_dirs(ld.as_deref())
        .into_iter()
        // A relative LD_LIBRARY_PATH entry is relative to the target's working directory.
        .map(|d| {
            if d.is_absolute() {
                root.join(d.strip_prefix("/").unwrap_or(&d))
            } else {
                PathBuf::from(format!("/proc/{pid}/cwd")).join(d)
            }
        })
        .collect();
    if host_root {
        dirs.extend(loader_cache_dirs());
    }
    libs_in(dirs, &[])
}

/// `LD_LIBRARY_PATH`'s directories, then the standard ones.
fn library_dirs(ld_library_path: Option<&str>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(p) = ld_library_path {
        dirs.extend(p.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    for d in [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/opt/rocm/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/nvidia/lib64",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The supported runtime libraries in `dirs`, plus `extra`, each file once.
fn libs_in(dirs: Vec<PathBuf>, extra: &[PathBuf]) -> Vec<RuntimeLib> {
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if let Some(lib) = describe(&path)
                && seen.insert(lib.dev_ino)
            {
                out.insert(lib);
            }
        }
    }
    for path in extra {
        if let Some(lib) = describe(path).or_else(|| describe_forced(path))
            && seen.insert(lib.dev_ino)
        {
            out.insert(lib);
        }
    }
    out.into_iter().collect()
}

/// Describes a `--lib` path even when its name is not a known runtime's: the family is taken
/// from the name when it matches, else the file is probed for every family's symbols.
pub fn describe_forced(path: &Path) -> Option<RuntimeLib> {
    let meta = fs::metadata(path).ok()?;
    let family = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(family_of)
        .unwrap_or(Library::User);
    Some(RuntimeLib {
        dev_ino: (meta.dev(), meta.ino()),
        host_path: path.to_path_buf(),
        family,
    })
}

/// True when `path` is a dynamically linked ELF executable (it has a PT_INTERP header).
pub fn is_dynamic_elf(path: &Path) -> bool {
    let Ok(data) = fs::read(path) else {
        return false;
    };
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 || data[5] != 1 {
        return false; // only 64-bit little-endian ELF
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(data[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        data.get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes(t.try_into().expect("4 bytes")) == 3)
    })
}

/// Finds `program` the way execvp does (a name without '/' is searched in PATH).
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The libraries the dynamic loader will load for `program` at startup (its DT_NEEDED closure
/// with rpath, runpath and LD_LIBRARY_PATH applied), asked from the loader itself with
/// LD_TRACE_LOADED_OBJECTS, as `ldd` does. Only for dynamically linked ELF files: for
/// anything else the variable would be ignored and the program would run.
pub fn startup_libraries(program: &str) -> Vec<PathBuf> {
    let Some(path) = which(program) else {
        return Vec::new();
    };
    if !is_dynamic_elf(&path) {
        return Vec::new();
    }
    let Ok(out) = std::process::Command::new(&path)
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .stdin(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" => ")?;
            let p = rest.rsplit_once(" (").map_or(rest, |(p, _)| p).trim();
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

/// Directories listed in the dynamic loader's cache (`ldconfig -p`).
fn loader_cache_dirs() -> Vec<PathBuf> {
    let Ok(out) = std::process::Command::new("ldconfig").arg("-p").output() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut dirs = BTreeSet::new();
    for line in text.lines() {
        if let Some((_, path)) = line.rsplit_once(" => ") {
            let name = Path::new(path.trim())
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            if family_of(name).is_some()
                && let Some(parent) = Path::new(path.trim()).parent()
            {
                dirs.insert(parent.to_path_buf());
            }
        }
    }
    dirs.into_iter().collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn loaders_are_known_by_their_file_names() {
        for name in ["ld-linux-x86-64.so.2", "ld-2.31.so", "ld-linux.so.2"] {
            assert!(super::is_loader(name), "{name}");
        }
        for name in ["libld.so", "ld.gold", "libc.so.6", "ld-config.txt"] {
            assert!(!super::is_loader(name), "{name}");
        }
    }

    #[test]
    fn this_process_maps_the_system_loader_once() {
        let found = super::loaders(&[std::process::id()]);
        assert_eq!(found.len(), 1, "{found:?}");
    }

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        assert_eq!(
            super::parent_of_stat("4242 (a) b (c) S 17 4242 4242 0 -1"),
            Some(17)
        );
        assert_eq!(super::parent_of_stat("1 (init) S 0 1 1"), Some(0));
        assert_eq!(super::parent_of_stat("garbage"), None);
    }

    use super::*;

    #[test]
    fn families_by_file_name() {
        assert_eq!(family_of("libhsa-runtime64.so.1"), Some(Library::Hsa));
        assert_eq!(family_of("libhsa-runtime64.so.1.5.0"), Some(Library::Hsa));
        assert_eq!(family_of("libamdhip64.so"), Some(Library::Hip));
        assert_eq!(family_of("libamdhip64.so.6"), Some(Library::Hip));
        assert_eq!(family_of("libcuda.so.1"), Some(Library::Cuda));
        assert_eq!(family_of("libcudart.so.12"), Some(Library::CudaRt));
        assert_eq!(family_of("libroctx64.so.4"), Some(Library::Roctx));
        assert_eq!(family_of("libcudnn.so.9"), None);
        assert_eq!(family_of("libcuda.sox"), None);
    }

    #[test]
    fn maps_paths_with_spaces_and_anonymous_lines() {
        let maps = "\
7f00-7f10 r-xp 00000000 08:01 1234 /usr/lib/libamdhip64.so.6\n\
7f10-7f20 rw-p 00000000 00:00 0 \n\
7f20-7f30 r--p 00000000 08:01 99 /opt/my libs/libcuda.so.1\n\
7f30-7f40 rw-p 00000000 00:00 0 [heap]\n";
        let paths: Vec<String> = mapped_paths(maps).into_iter().collect();
        assert_eq!(
            paths,
            vec!["/opt/my libs/libcuda.so.1", "/usr/lib/libamdhip64.so.6"]
        );
    }

    #[test]
    fn static_and_dynamic_elf_are_told_apart() {
        assert!(is_dynamic_elf(Path::new("/bin/sh")));
        assert!(!is_dynamic_elf(Path::new("/proc/self/status")));
        let libs = startup_libraries("sh");
        assert!(
            libs.iter().any(|p| p.to_string_lossy().contains("libc.so")),
            "{libs:?}"
        );
        assert_eq!(
            startup_libraries("/nonexistent/prog"),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn own_process_maps_no_runtime() {
        assert_eq!(libs_of_pid(std::process::id()).unwrap(), Vec::new());
    }

    #[test]
    fn dlopen_candidates_come_from_the_targets_own_library_path() {
        // A process started with LD_LIBRARY_PATH=dir finds dir's runtime library by name; the
        // library is seen through the process's root, and kreplay's own environment is not
        // consulted.
        let dir = std::env::temp_dir().join(format!("kreplay-dlopen-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libcuda.so.1");
        fs::write(&lib, b"not loaded").unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("LD_LIBRARY_PATH", format!("relative-dir:{}", dir.display()))
            .spawn()
            .unwrap();
        // Until the child is asleep in `sleep`, its exec may not have set up the new
        // environment yet (/proc/PID/environ is the test's, or empty, meanwhile).
        let stat = PathBuf::from(format!("/proc/{}/stat", child.id()));
        let exe = PathBuf::from(format!("/proc/{}/exe", child.id()));
        for _ in 0..500 {
            let asleep = fs::read_to_string(&stat)
                .ok()
                .and_then(|s| s.rsplit(") ").next().map(|r| r.starts_with('S')))
                .unwrap_or(false);
            if asleep && fs::read_link(&exe).is_ok_and(|p| p.ends_with("sleep")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = dlopen_candidates(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        let meta = fs::metadata(&lib).unwrap();
        let ours: Vec<&RuntimeLib> = found
            .iter()
            .filter(|l| l.dev_ino == (meta.dev(), meta.ino()))
            .collect();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(ours.len(), 1, "{found:?}");
        assert_eq!(ours[0].family, Library::Cuda);
        assert_eq!(
            ours[0].host_path,
            PathBuf::from(format!("/proc/{}/root", child.id()))
                .join(lib.strip_prefix("/").unwrap())
        );
    }
}
