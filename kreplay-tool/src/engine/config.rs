//! The tool's replay policy, derived from the settings `kreplay replay` passes in the
//! environment ([`ReplaySettings`], decoded in `kreplay-common`): the defaults for what the CLI
//! left unset, the compiled `--kernel` regex, and the snapshot policy the engine runs with. An
//! unknown `KREPLAY_*` variable or a bad value is an error: the tool then logs it and disables
//! replay.

use kreplay_common::replay_config::{DeviceCheck, ReplaySettings, RestoreMode, Setting};
use regex::Regex;

pub use kreplay_common::replay_config::ConfigError;
/// Where the engine may put snapshot copies (`--snapshot-placement`).
pub use kreplay_common::replay_config::SnapshotPlacement as PlacementPref;

/// Default chunk size: 16 KiB, from the `restore` bench (docs/bench/restore.md): the
/// check costs the same from 4 KiB to 1 MiB chunks (it reads every byte either way), while
/// scattered writes restore bytes in proportion to the chunk (4x at 64 KiB, 16x at 256 KiB);
/// 16 KiB restores 4x 4 KiB's bytes with a quarter of its hash metadata (16 bytes per chunk:
/// 0.1% of the footprint) and a quarter of the copy calls per dirty byte. Backends with a
/// large per-copy cost (GPU copy calls) may want more: `--chunk-size`.
pub const DEFAULT_CHUNK: usize = 16 << 10;

/// How snapshots are taken and restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Chunk size of the dirty check (a power of two from
    /// [`kreplay_common::replay_config::MIN_CHUNK`] to `MAX_CHUNK`).
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

/// The replay policy the tool runs with: the decoded settings over the tool's defaults.
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
    /// Record each dispatch's and copy's GPU times (`KREPLAY_GPU_TIMELINE`): observe mode
    /// when replay is off.
    pub gpu_timeline: bool,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            passes: 1,
            kernel: None,
            max_dispatches: None,
            check_determinism: true,
            snapshot: SnapshotPolicy::default(),
            gpu_timeline: false,
        }
    }
}

impl ReplayConfig {
    /// From the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_settings(&ReplaySettings::from_env()?)
    }

    /// From `(name, value)` pairs ([`ReplaySettings::decode`]).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        Self::from_settings(&ReplaySettings::decode(vars)?)
    }

    /// The tool's defaults, overridden by what `s` sets.
    pub fn from_settings(s: &ReplaySettings) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(n) = s.passes {
            c.passes = n;
        }
        if let Some(k) = &s.kernel {
            let r = kreplay_common::replay_config::kernel_regex(k);
            c.kernel = Some(r.map_err(|why| ConfigError::Bad {
                setting: Setting::Kernel,
                value: k.clone(),
                why,
            })?);
        }
        c.max_dispatches = s.max_dispatches;
        if let Some(b) = s.check_determinism {
            c.check_determinism = b;
        }
        c.gpu_timeline = s.gpu_timeline.unwrap_or(false);
        let p = &mut c.snapshot;
        if let Some(n) = s.chunk_size {
            p.chunk = n as usize;
        }
        match s.restore {
            Some(RestoreMode::Auto) => (p.dirty_only, p.adaptive) = (true, true),
            Some(RestoreMode::Dirty) => (p.dirty_only, p.adaptive) = (true, false),
            Some(RestoreMode::Full) => p.dirty_only = false,
            None => {}
        }
        if let Some(b) = s.snapshot_budget {
            p.budget = b;
        }
        if let Some(pl) = s.snapshot_placement {
            p.placement = pl;
        }
        if let Some(d) = s.device_check {
            p.exact_device_check = d == DeviceCheck::Compare;
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

    /// The setting a refusal names.
    fn refused(pairs: &[(&str, &str)]) -> Option<Setting> {
        match cfg(pairs) {
            Err(ConfigError::Bad { setting, .. }) => Some(setting),
            _ => None,
        }
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
        assert_eq!(refused(&[("KREPLAY_PASSES", "0")]), Some(Setting::Passes));
        assert_eq!(refused(&[("KREPLAY_KERNEL", "(")]), Some(Setting::Kernel));
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
        for (setting, value) in [
            (Setting::ChunkSize, "3000"),
            (Setting::ChunkSize, "1K"),
            (Setting::Restore, "some"),
            (Setting::SnapshotBudget, "lots"),
            (Setting::SnapshotPlacement, "gpu"),
            (Setting::DeviceCheck, "bytes"),
        ] {
            assert_eq!(
                refused(&[(setting.var(), value)]),
                Some(setting),
                "{setting:?}={value}"
            );
        }
        assert_eq!(
            cfg(&[("KREPLAY_PASES", "2")]).unwrap_err(),
            ConfigError::Unknown("KREPLAY_PASES".into())
        );
    }

    #[test]
    fn unset_settings_keep_the_tools_defaults_and_modes_map_to_the_policy() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (
                c.passes,
                c.kernel.is_none(),
                c.max_dispatches,
                c.check_determinism
            ),
            (1, true, None, true)
        );
        assert_eq!(c.snapshot, SnapshotPolicy::default());
        assert_eq!(c.snapshot.chunk, DEFAULT_CHUNK);
        assert_eq!(c.snapshot.budget, default_budget());
        let mode = |v: &str| {
            let p = cfg(&[("KREPLAY_RESTORE", v)]).unwrap().snapshot;
            (p.dirty_only, p.adaptive)
        };
        assert_eq!(
            [mode("auto"), mode("dirty"), mode("full")],
            [(true, true), (true, false), (false, true)]
        );
        let c = cfg(&[
            ("KREPLAY_CHECK_DETERMINISM", "0"),
            ("KREPLAY_DEVICE_CHECK", "hash"),
            ("KREPLAY_SNAPSHOT_PLACEMENT", "device"),
        ])
        .unwrap();
        assert!(!c.check_determinism);
        assert!(!c.snapshot.exact_device_check);
        assert_eq!(c.snapshot.placement, PlacementPref::Device);
        // What the CLI encodes is what the tool runs with.
        let s = ReplaySettings {
            passes: Some(4),
            chunk_size: Some(64 << 10),
            snapshot_budget: Some(40 << 10),
            ..ReplaySettings::default()
        };
        let pairs = s
            .encode()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_string().unwrap()));
        let c = ReplayConfig::from_vars(pairs).unwrap();
        assert_eq!(
            (c.passes, c.snapshot.chunk, c.snapshot.budget),
            (4, 64 << 10, 40 << 10)
        );
    }
}
