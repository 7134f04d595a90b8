//! Replay configuration from the environment (`kreplay replay` sets it). An unknown
//! `KREPLAY_*` variable or a bad value is an error: the tool then logs it and disables replay.

use regex::Regex;

/// Passes per replayed dispatch (N >= 1).
pub const ENV_PASSES: &str = "KREPLAY_PASSES";
/// Regex on the kernel name; only matching kernels are replayed.
pub const ENV_KERNEL: &str = "KREPLAY_KERNEL";
/// Most dispatches replayed per process.
pub const ENV_MAX_DISPATCHES: &str = "KREPLAY_MAX_DISPATCHES";
/// `0` turns the per-pass determinism check off (default on).
pub const ENV_CHECK_DETERMINISM: &str = "KREPLAY_CHECK_DETERMINISM";

/// Chunk size of the dirty check, in bytes (suffix K/M/G allowed; a power of two >= 4 KiB).
pub const ENV_CHUNK_SIZE: &str = "KREPLAY_CHUNK_SIZE";
/// `auto` (default): restore only chunks that changed, unless measuring shows the check costs
/// more than it saves; `dirty`: always restore only changed chunks; `full`: every byte.
pub const ENV_RESTORE: &str = "KREPLAY_RESTORE";
/// Largest snapshot footprint admitted, in bytes (suffix K/M/G); larger ones are declined.
pub const ENV_SNAPSHOT_BUDGET: &str = "KREPLAY_SNAPSHOT_BUDGET";
/// Where snapshot copies live: `auto` (default: device, else pinned, else pageable),
/// `device`, `pinned` or `pageable` (only that one; failing to allocate it declines).
pub const ENV_SNAPSHOT_PLACEMENT: &str = "KREPLAY_SNAPSHOT_PLACEMENT";

/// How a device-resident snapshot finds changed chunks: `hash` (default: the backend's
/// 128-bit chunk hashes, taken at snapshot time and again before each restore, reading the
/// footprint once) or `compare` (exact byte comparison with the device copy: no collision at
/// all, but it reads the footprint twice — as much traffic as copying all of it back).
pub const ENV_DEVICE_CHECK: &str = "KREPLAY_DEVICE_CHECK";

/// Default chunk size: 16 KiB, from the `restore` bench (docs/bench/restore.md): the
/// check costs the same from 4 KiB to 1 MiB chunks (it reads every byte either way), while
/// scattered writes restore bytes in proportion to the chunk (4x at 64 KiB, 16x at 256 KiB);
/// 16 KiB restores 4x 4 KiB's bytes with a quarter of its hash metadata (16 bytes per chunk:
/// 0.1% of the footprint) and a quarter of the copy calls per dirty byte. Backends with a
/// large per-copy cost (GPU copy calls) may want more: KREPLAY_CHUNK_SIZE.
pub const DEFAULT_CHUNK: usize = 16 << 10;
/// Smallest chunk size accepted.
pub const MIN_CHUNK: usize = 4 << 10;

/// Every `KREPLAY_*` variable the tool (or the CLI around it) knows.
pub const KNOWN: &[&str] = &[
    ENV_PASSES,
    ENV_KERNEL,
    ENV_MAX_DISPATCHES,
    ENV_CHECK_DETERMINISM,
    ENV_CHUNK_SIZE,
    ENV_RESTORE,
    ENV_SNAPSHOT_BUDGET,
    ENV_SNAPSHOT_PLACEMENT,
    ENV_DEVICE_CHECK,
    crate::record::ENV_OUTPUT_DIR,
    crate::record::ENV_PER_THREAD,
    crate::record::ENV_PER_THREAD_CAP,
    kreplay_common::progress::ENV,
    crate::fault::ENV,
    "KREPLAY_TOOL_LIB",
    "KREPLAY_BIN",
    "KREPLAY_BENCH_OUT",
    "KREPLAY_LOG",
];

/// A configuration the tool refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// An unknown `KREPLAY_*` variable.
    #[error("unknown environment variable {0}")]
    Unknown(String),
    /// A value that does not parse.
    #[error("{name}={value:?}: {why}")]
    Bad {
        /// Variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: String,
    },
}

/// Where the engine may put snapshot copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlacementPref {
    /// Device memory if the backend can allocate it, else pinned host, else pageable host.
    Auto,
    /// Device memory only.
    Device,
    /// Pinned host memory only.
    Pinned,
    /// Pageable host memory only.
    Pageable,
}

/// How snapshots are taken and restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Chunk size of the dirty check (a power of two >= [`MIN_CHUNK`]).
    pub chunk: usize,
    /// Restore only chunks whose contents changed (else every byte).
    pub dirty_only: bool,
    /// With `dirty_only`: after a restore whose costs were measured, stop checking that
    /// snapshot when checking costs more than writing every byte would (see `restore`).
    pub adaptive: bool,
    /// Largest footprint admitted, in bytes.
    pub budget: u64,
    /// Where copies may live.
    pub placement: PlacementPref,
    /// Device-resident copies: compare bytes exactly instead of hashing on the device.
    pub exact_device_check: bool,
    /// Keep the hashes each one-pass restore computes of the pass it follows (the
    /// determinism check reads them instead of hashing the pass's output again).
    pub pass_hashes: bool,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        Self {
            chunk: DEFAULT_CHUNK,
            dirty_only: true,
            adaptive: true,
            budget: default_budget(),
            placement: PlacementPref::Auto,
            exact_device_check: false,
            pass_hashes: false,
        }
    }
}

/// Default budget: half of the machine's physical memory (the snapshot is held once, on the
/// host unless the device has room), so a replay never pushes the host into swap or OOM.
pub fn default_budget() -> u64 {
    // SAFETY: sysconf only reads system configuration values.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || size <= 0 {
        return 1 << 30;
    }
    (pages as u64).saturating_mul(size as u64) / 2
}

/// The replay settings.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Passes per replayed dispatch.
    pub passes: u32,
    /// Only kernels whose name matches are replayed.
    pub kernel: Option<Regex>,
    /// Most dispatches replayed.
    pub max_dispatches: Option<u64>,
    /// Hash what each pass wrote and report differences.
    pub check_determinism: bool,
    /// Snapshot placement, chunking and budget.
    pub snapshot: SnapshotPolicy,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            passes: 1,
            kernel: None,
            max_dispatches: None,
            check_determinism: true,
            snapshot: SnapshotPolicy::default(),
        }
    }
}

impl ReplayConfig {
    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// From `(name, value)` pairs (only `KREPLAY_*` ones are looked at).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        for (k, v) in vars {
            if !k.starts_with("KREPLAY_") {
                continue;
            }
            let bad = |name, why: String| ConfigError::Bad {
                name,
                value: v.clone(),
                why,
            };
            match k.as_str() {
                ENV_PASSES => match v.trim().parse::<u32>() {
                    Ok(n) if n >= 1 => c.passes = n,
                    _ => return Err(bad(ENV_PASSES, "passes must be an integer >= 1".into())),
                },
                ENV_KERNEL => match Regex::new(&v) {
                    Ok(r) => c.kernel = Some(r),
                    Err(e) => return Err(bad(ENV_KERNEL, format!("bad regex: {e}"))),
                },
                ENV_MAX_DISPATCHES => match v.trim().parse::<u64>() {
                    Ok(n) => c.max_dispatches = Some(n),
                    _ => return Err(bad(ENV_MAX_DISPATCHES, "not a count".into())),
                },
                ENV_CHECK_DETERMINISM => match v.trim() {
                    "0" => c.check_determinism = false,
                    "1" => c.check_determinism = true,
                    _ => return Err(bad(ENV_CHECK_DETERMINISM, "must be 0 or 1".into())),
                },
                ENV_CHUNK_SIZE => match kreplay_common::size::parse(&v) {
                    Some(n) if n.is_power_of_two() && n >= MIN_CHUNK as u64 && n <= 1 << 30 => {
                        c.snapshot.chunk = n as usize
                    }
                    _ => {
                        return Err(bad(
                            ENV_CHUNK_SIZE,
                            "chunk size must be a power of two from 4K to 1G".into(),
                        ));
                    }
                },
                ENV_RESTORE => match v.trim() {
                    "auto" => (c.snapshot.dirty_only, c.snapshot.adaptive) = (true, true),
                    "dirty" => (c.snapshot.dirty_only, c.snapshot.adaptive) = (true, false),
                    "full" => c.snapshot.dirty_only = false,
                    _ => return Err(bad(ENV_RESTORE, "must be auto, dirty or full".into())),
                },
                ENV_DEVICE_CHECK => match v.trim() {
                    "hash" => c.snapshot.exact_device_check = false,
                    "compare" => c.snapshot.exact_device_check = true,
                    _ => return Err(bad(ENV_DEVICE_CHECK, "must be hash or compare".into())),
                },
                ENV_SNAPSHOT_BUDGET => match kreplay_common::size::parse(&v) {
                    Some(n) => c.snapshot.budget = n,
                    None => return Err(bad(ENV_SNAPSHOT_BUDGET, "not a size".into())),
                },
                ENV_SNAPSHOT_PLACEMENT => {
                    c.snapshot.placement = match v.trim() {
                        "auto" => PlacementPref::Auto,
                        "device" => PlacementPref::Device,
                        "pinned" => PlacementPref::Pinned,
                        "pageable" => PlacementPref::Pageable,
                        _ => {
                            return Err(bad(
                                ENV_SNAPSHOT_PLACEMENT,
                                "must be auto, device, pinned or pageable".into(),
                            ));
                        }
                    }
                }
                other if KNOWN.contains(&other) => {}
                other => return Err(ConfigError::Unknown(other.to_owned())),
            }
        }
        Ok(c)
    }

    /// Whether a kernel of this name is selected.
    pub fn selects(&self, kernel: &str) -> bool {
        self.kernel.as_ref().is_none_or(|r| r.is_match(kernel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<ReplayConfig, ConfigError> {
        ReplayConfig::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn values_parse_and_errors_name_the_variable() {
        let c = cfg(&[
            ("KREPLAY_PASSES", "5"),
            ("KREPLAY_KERNEL", "^sax"),
            ("KREPLAY_MAX_DISPATCHES", "3"),
            ("PATH", "x"),
        ])
        .unwrap();
        assert_eq!((c.passes, c.max_dispatches), (5, Some(3)));
        assert!(c.selects("saxpy") && !c.selects("fill"));
        assert!(matches!(
            cfg(&[("KREPLAY_PASSES", "0")]),
            Err(ConfigError::Bad {
                name: ENV_PASSES,
                ..
            })
        ));
        assert!(matches!(
            cfg(&[("KREPLAY_KERNEL", "(")]),
            Err(ConfigError::Bad {
                name: ENV_KERNEL,
                ..
            })
        ));
        let c = cfg(&[
            ("KREPLAY_CHUNK_SIZE", "16K"),
            ("KREPLAY_RESTORE", "full"),
            ("KREPLAY_SNAPSHOT_BUDGET", "3M"),
            ("KREPLAY_SNAPSHOT_PLACEMENT", "pinned"),
            ("KREPLAY_DEVICE_CHECK", "compare"),
        ])
        .unwrap();
        assert_eq!(
            c.snapshot,
            SnapshotPolicy {
                chunk: 16384,
                dirty_only: false,
                adaptive: true,
                budget: 3 << 20,
                placement: PlacementPref::Pinned,
                exact_device_check: true,
                pass_hashes: false,
            }
        );
        for (name, value) in [
            (ENV_CHUNK_SIZE, "3000"),
            (ENV_CHUNK_SIZE, "1K"),
            (ENV_RESTORE, "some"),
            (ENV_SNAPSHOT_BUDGET, "lots"),
            (ENV_SNAPSHOT_PLACEMENT, "gpu"),
            (ENV_DEVICE_CHECK, "bytes"),
        ] {
            assert!(
                matches!(cfg(&[(name, value)]), Err(ConfigError::Bad { name: n, .. }) if n == name),
                "{name}={value}"
            );
        }
        assert_eq!(
            cfg(&[("KREPLAY_PASES", "2")]).unwrap_err(),
            ConfigError::Unknown("KREPLAY_PASES".into())
        );
    }
}
