//! Holding the processes that map a runtime library file not probed yet (`kreplay trace
//! --all`; the BPF side is `kreplay-ebpf/src/discovery.rs`), and the maps that say which
//! processes are held and which files are probed.
use std::path::Path;

use aya::{
    maps::{Array, HashMap as BpfHashMap, MapData},
    programs::TracePoint,
};
use kreplay_common::probe::discovery::{
    CONFIG_MAP, Config, FILES_MAP, FileKey, HELD_MAP, MAP_PROGRAM, MAP_TRACEPOINT, SWITCH_MAP,
};

use super::{ProbeError, Probes};
use crate::probes::btf::{VMLINUX_BTF, file_offsets};

/// The maps kreplay keeps while it holds processes: those held (tgid → stop time) and the
/// runtime library files seen ([`kreplay_common::probe::discovery::file_state`]).
pub struct HoldMaps {
    /// Processes stopped and not yet resumed.
    pub held: BpfHashMap<MapData, u32, u64>,
    /// Runtime library files seen.
    pub files: BpfHashMap<MapData, FileKey, u8>,
    /// Holding on (1) or off (0).
    pub switch: Array<MapData, u32>,
}

/// Where tracefs is mounted when no tracefs is (systemd's place for it).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs at [`TRACEFS`] unless a tracefs (or a debugfs with one inside) is mounted.
fn mount_tracefs() -> Result<(), ProbeError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if mounts
        .lines()
        .any(|l| matches!(l.split(' ').nth(2), Some("tracefs" | "debugfs")))
    {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (source, target) = (c("tracefs"), c(TRACEFS));
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            source.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(ProbeError::Discovery(format!(
            "no tracefs mounted, and mounting one at {TRACEFS} failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    tracing::info!(
        "mounted tracefs at {TRACEFS} to attach to {}:{}",
        MAP_TRACEPOINT.0,
        MAP_TRACEPOINT.1
    );
    Ok(())
}

impl Probes {
    /// Holds every process (but this one) that maps, executable, a runtime library file not
    /// probed yet, until kreplay resumes it: loads and attaches the program on
    /// [`MAP_TRACEPOINT`], with the kernel's member offsets read from its BTF. Tracepoints are
    /// named through tracefs, which is mounted at [`TRACEFS`] when no tracefs is mounted.
    pub fn hold_new_files(&mut self) -> Result<(), ProbeError> {
        mount_tracefs()?;
        let offsets = file_offsets(Path::new(VMLINUX_BTF))
            .map_err(|e| ProbeError::Discovery(e.to_string()))?;
        let map = self
            .bpf
            .map_mut(CONFIG_MAP)
            .ok_or(ProbeError::MissingMap(CONFIG_MAP))?;
        let mut config: Array<_, Config> =
            Array::try_from(map).map_err(|source| ProbeError::Map {
                name: CONFIG_MAP,
                source,
            })?;
        config
            .set(
                0,
                Config {
                    offsets,
                    self_tgid: std::process::id(),
                    _pad: 0,
                },
                0,
            )
            .map_err(|source| ProbeError::Map {
                name: CONFIG_MAP,
                source,
            })?;
        let (category, name) = MAP_TRACEPOINT;
        let what = |doing: &str| format!("{doing} {MAP_PROGRAM} on {category}:{name}");
        let prog: &mut TracePoint = self
            .bpf
            .program_mut(MAP_PROGRAM)
            .ok_or_else(|| ProbeError::Discovery(format!("{MAP_PROGRAM}: not in the object")))?
            .try_into()
            .map_err(|source| ProbeError::Program {
                what: what("loading"),
                source,
            })?;
        prog.load().map_err(|source| ProbeError::Program {
            what: what("loading"),
            source,
        })?;
        prog.attach(category, name)
            .map_err(|source| ProbeError::Program {
                what: what("attaching"),
                source,
            })?;
        Ok(())
    }

    /// The mapping check's total run time (ns) and runs, from the kernel's BPF statistics;
    /// `None` unless it is loaded.
    pub fn map_hook_runs(&self) -> Option<(u64, u64)> {
        let prog: &TracePoint = self.bpf.program(MAP_PROGRAM)?.try_into().ok()?;
        let info = prog.info().ok()?;
        Some((info.run_time().as_nanos() as u64, info.run_count()))
    }

    /// Takes the maps of held processes and seen files (once).
    pub fn take_hold_maps(&mut self) -> Result<HoldMaps, ProbeError> {
        let mut take =
            |name: &'static str| self.bpf.take_map(name).ok_or(ProbeError::MissingMap(name));
        let (held, files, switch) = (take(HELD_MAP)?, take(FILES_MAP)?, take(SWITCH_MAP)?);
        Ok(HoldMaps {
            switch: Array::try_from(switch).map_err(|source| ProbeError::Map {
                name: SWITCH_MAP,
                source,
            })?,
            held: BpfHashMap::try_from(held).map_err(|source| ProbeError::Map {
                name: HELD_MAP,
                source,
            })?,
            files: BpfHashMap::try_from(files).map_err(|source| ProbeError::Map {
                name: FILES_MAP,
                source,
            })?,
        })
    }
}
