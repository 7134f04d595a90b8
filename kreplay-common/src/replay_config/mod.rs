//! The settings `kreplay replay` hands the injected tool, typed, with one encoding: the CLI
//! builds a [`ReplaySettings`] from its flags and sets the environment from
//! [`ReplaySettings::encode`]; the tool reads it back with [`ReplaySettings::decode`].
//!
//! Each setting's variable and flag are named once, in [`Setting`]. Each value has one parser
//! (`parse_*` below, and `FromStr` for the choices), which the CLI's flags use too, so a value
//! the CLI accepts is one the tool accepts. A setting left `None` is not set by the CLI: the
//! tool's default applies (or whatever the environment around `kreplay replay` holds).
//! Errors name the flag and the variable: `--snapshot-budget: not a size (bytes, or with
//! K/M/G): "lots" (KREPLAY_SNAPSHOT_BUDGET)`. An unknown `KREPLAY_*` variable is refused, so a
//! misspelt one is not silently ignored. `docs/replay-config.md` lists every variable.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::str::FromStr;

#[cfg(test)]
mod tests;

/// Every variable of the contract starts with this.
pub const PREFIX: &str = "KREPLAY_";

/// Recorder path: `0` the shared-mutex baseline, `1` (default) per-thread buffers.
pub const PER_THREAD_BUFFER: &str = "KREPLAY_PER_THREAD_BUFFER";
/// Recorder: most undrained records per thread buffer.
pub const PER_THREAD_CAP: &str = "KREPLAY_PER_THREAD_CAP";
/// The tool's fault injection for tests: sites to panic at (`SITE[,SITE...]` or `all`).
pub const FORCE_PANIC: &str = "KREPLAY_FORCE_PANIC";
/// The tool's log filter (`tracing` env-filter syntax; default `warn`).
pub const LOG: &str = "KREPLAY_LOG";
/// Where `kreplay replay` finds `libkreplay_tool.so` (default: next to the binary).
pub const TOOL_LIB: &str = "KREPLAY_TOOL_LIB";
/// The `kreplay` binary the integration tests run.
pub const BIN: &str = "KREPLAY_BIN";
/// Where a benchmark also writes its results.
pub const BENCH_OUT: &str = "KREPLAY_BENCH_OUT";
/// The CLI's probes: `0` attaches one perf event per function instead of uprobe-multi links.
pub const UPROBE_MULTI: &str = "KREPLAY_UPROBE_MULTI";
/// `1` (with [`Setting::GpuTimeline`]): kreplay-tool writes CUDA kernel launch calls from
/// CUPTI's API records, because the probes do not (`kreplay trace --gpu --cupti-launches`).
pub const CUPTI_LAUNCHES: &str = "KREPLAY_CUPTI_LAUNCHES";
/// The start of the file kreplay-tool creates in its output directory when it cannot write a
/// process's launch calls after all (CUPTI unusable): `launch-probes-<pid>`. The CLI then
/// probes that process's launch entries and creates the same name with [`ACK_SUFFIX`].
pub const LAUNCH_PROBES_REQUEST: &str = "launch-probes-";
/// What the CLI appends to a [`LAUNCH_PROBES_REQUEST`] file's name once the probes are on.
pub const ACK_SUFFIX: &str = ".ack";
/// `1`: kreplay-tool loaded at start through `HSA_TOOLS_LIB` waits, passing everything through,
/// for a `kreplay -p PID` to attach (`docs/attach.md`).
pub const ATTACH: &str = "KREPLAY_ATTACH";

/// `KREPLAY_*` variables that are not [`Setting`]s but that the tool tolerates in its
/// environment: each is read where it is used (the recorder, fault injection, logging), or
/// belongs to the CLI, the tests or the benches.
pub const OTHER_KNOWN: &[&str] = &[
    PER_THREAD_BUFFER,
    PER_THREAD_CAP,
    FORCE_PANIC,
    LOG,
    TOOL_LIB,
    BIN,
    BENCH_OUT,
    UPROBE_MULTI,
    ATTACH,
    CUPTI_LAUNCHES,
];

/// Smallest chunk size of the dirty check.
pub const MIN_CHUNK: u64 = 4 << 10;
/// Largest chunk size of the dirty check.
pub const MAX_CHUNK: u64 = 1 << 30;

/// One setting of [`ReplaySettings`]: its variable and the flag that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setting {
    /// Passes per replayed dispatch.
    Passes,
    /// Regex on the kernel name.
    Kernel,
    /// Most dispatches replayed per process.
    MaxDispatches,
    /// The per-pass determinism check (no flag: the variable only).
    CheckDeterminism,
    /// Chunk size of the dirty check.
    ChunkSize,
    /// Restore mode.
    Restore,
    /// Largest snapshot footprint admitted.
    SnapshotBudget,
    /// Where snapshot copies live.
    SnapshotPlacement,
    /// How a device-resident snapshot finds changed chunks.
    DeviceCheck,
    /// Directory of the tool's stream file.
    OutputDir,
    /// The progress counters' file.
    Progress,
    /// Observe mode's GPU timeline: profile every intercepted queue and copy, and record each
    /// dispatch's and copy's GPU start and end.
    GpuTimeline,
}

impl Setting {
    /// Every setting, in the order [`ReplaySettings::encode`] lists them.
    pub const ALL: [Setting; 12] = [
        Self::Passes,
        Self::Kernel,
        Self::MaxDispatches,
        Self::CheckDeterminism,
        Self::ChunkSize,
        Self::Restore,
        Self::SnapshotBudget,
        Self::SnapshotPlacement,
        Self::DeviceCheck,
        Self::OutputDir,
        Self::Progress,
        Self::GpuTimeline,
    ];

    /// The environment variable.
    pub const fn var(self) -> &'static str {
        match self {
            Self::Passes => "KREPLAY_PASSES",
            Self::Kernel => "KREPLAY_KERNEL",
            Self::MaxDispatches => "KREPLAY_MAX_DISPATCHES",
            Self::CheckDeterminism => "KREPLAY_CHECK_DETERMINISM",
            Self::ChunkSize => "KREPLAY_CHUNK_SIZE",
            Self::Restore => "KREPLAY_RESTORE",
            Self::SnapshotBudget => "KREPLAY_SNAPSHOT_BUDGET",
            Self::SnapshotPlacement => "KREPLAY_SNAPSHOT_PLACEMENT",
            Self::DeviceCheck => "KREPLAY_DEVICE_CHECK",
            Self::OutputDir => "KREPLAY_OUTPUT_DIR",
            Self::Progress => crate::progress::ENV,
            Self::GpuTimeline => "KREPLAY_GPU_TIMELINE",
        }
    }

    /// The `kreplay replay` flag that sets it, if a user can type one.
    pub const fn flag(self) -> Option<&'static str> {
        match self {
            Self::Passes => Some("--passes"),
            Self::Kernel => Some("--kernel"),
            Self::MaxDispatches => Some("--max-dispatches"),
            Self::ChunkSize => Some("--chunk-size"),
            Self::Restore => Some("--restore"),
            Self::SnapshotBudget => Some("--snapshot-budget"),
            Self::SnapshotPlacement => Some("--snapshot-placement"),
            Self::DeviceCheck => Some("--device-check"),
            // Set by the CLI itself (its run directory, its progress file), or the
            // environment only.
            Self::CheckDeterminism | Self::OutputDir | Self::Progress | Self::GpuTimeline => None,
        }
    }

    /// The setting whose variable is `var`.
    pub fn of_var(var: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.var() == var)
    }
}

/// Whether `var` is a `KREPLAY_*` variable the tool knows (a [`Setting`] or [`OTHER_KNOWN`]).
pub fn is_known(var: &str) -> bool {
    Setting::of_var(var).is_some() || OTHER_KNOWN.contains(&var)
}

/// A configuration the tool refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// An unknown `KREPLAY_*` variable.
    #[error("unknown environment variable {0}")]
    Unknown(String),
    /// A value that does not parse.
    #[error("{}", bad_message(.setting, .value, .why))]
    Bad {
        /// The setting.
        setting: Setting,
        /// Its value (lossily, when not UTF-8).
        value: String,
        /// What is wrong.
        why: String,
    },
}

/// `--flag: why: "value" (VAR)`, or `VAR: why: "value"` for a setting without a flag.
fn bad_message(setting: &Setting, value: &str, why: &str) -> String {
    match setting.flag() {
        Some(flag) => format!("{flag}: {why}: {value:?} ({})", setting.var()),
        None => format!("{}: {why}: {value:?}", setting.var()),
    }
}

/// `--restore`: how a snapshot is written back between passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreMode {
    /// Only chunks that changed, until measuring shows the check costs more than it saves.
    Auto,
    /// Always only chunks that changed.
    Dirty,
    /// Every byte.
    Full,
}

/// `--snapshot-placement`: where the engine may put snapshot copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotPlacement {
    /// Device memory if the backend can allocate it, else pinned host, else pageable host.
    Auto,
    /// Device memory only.
    Device,
    /// Pinned host memory only.
    Pinned,
    /// Pageable host memory only.
    Pageable,
}

/// `--device-check`: how a device-resident snapshot finds changed chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceCheck {
    /// 128-bit chunk hashes on the device: one read of the footprint.
    Hash,
    /// Exact byte comparison with the device copy: two reads.
    Compare,
}

/// A choice among named values, spelled as on the command line.
macro_rules! choice {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The names a user types, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The name a user types.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name),+
                }
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(v: &str) -> Result<Self, String> {
                match v.trim() {
                    $($name => Ok(Self::$variant),)+
                    _ => Err(must_be(Self::NAMES)),
                }
            }
        }
    };
}

choice!(RestoreMode { Auto = "auto", Dirty = "dirty", Full = "full" });
choice!(SnapshotPlacement {
    Auto = "auto",
    Device = "device",
    Pinned = "pinned",
    Pageable = "pageable",
});
choice!(DeviceCheck { Hash = "hash", Compare = "compare" });

/// `must be a, b or c`.
fn must_be(names: &[&str]) -> String {
    match names {
        [] => "must be nothing".into(),
        [one] => format!("must be {one}"),
        [init @ .., last] => format!("must be {} or {last}", init.join(", ")),
    }
}

/// `--passes`: an integer >= 1.
pub fn parse_passes(v: &str) -> Result<u32, String> {
    match v.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("not an integer >= 1".into()),
    }
}

/// `--max-dispatches`: a count.
pub fn parse_count(v: &str) -> Result<u64, String> {
    v.trim().parse::<u64>().map_err(|_| "not a count".into())
}

/// `--kernel`: a regex (kept as typed; the tool compiles it with [`kernel_regex`]).
pub fn parse_kernel(v: &str) -> Result<String, String> {
    kernel_regex(v).map(|_| v.to_owned())
}

/// The `--kernel` regex, compiled.
pub fn kernel_regex(v: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(v)
        .map_err(|e| format!("not a valid regex: {}", e.to_string().replace('\n', " ")))
}

/// `--snapshot-budget`: a size ([`crate::size::parse`]).
pub fn parse_size(v: &str) -> Result<u64, String> {
    crate::size::parse(v).ok_or_else(|| "not a size (bytes, or with K/M/G)".into())
}

/// `--chunk-size`: a size that is a power of two from [`MIN_CHUNK`] to [`MAX_CHUNK`].
pub fn parse_chunk_size(v: &str) -> Result<u64, String> {
    match crate::size::parse(v) {
        Some(n) if n.is_power_of_two() && (MIN_CHUNK..=MAX_CHUNK).contains(&n) => Ok(n),
        _ => Err("not a power of two from 4K to 1G".into()),
    }
}

/// A switch: `0` or `1`.
pub fn parse_switch(v: &str) -> Result<bool, String> {
    match v.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("must be 0 or 1".into()),
    }
}

/// Everything `kreplay replay` tells the tool. `None`: not set, the tool's default applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaySettings {
    /// `--passes`: passes per replayed dispatch (>= 1; the tool's default is 1).
    pub passes: Option<u32>,
    /// `--kernel`: only kernels whose name matches this regex are replayed.
    pub kernel: Option<String>,
    /// `--max-dispatches`: most dispatches replayed per process.
    pub max_dispatches: Option<u64>,
    /// `KREPLAY_CHECK_DETERMINISM`: hash what each pass wrote and report differences
    /// (default on).
    pub check_determinism: Option<bool>,
    /// `--chunk-size`: chunk size of the dirty check, bytes ([`parse_chunk_size`]).
    pub chunk_size: Option<u64>,
    /// `--restore`.
    pub restore: Option<RestoreMode>,
    /// `--snapshot-budget`: largest snapshot footprint admitted, bytes.
    pub snapshot_budget: Option<u64>,
    /// `--snapshot-placement`.
    pub snapshot_placement: Option<SnapshotPlacement>,
    /// `--device-check`.
    pub device_check: Option<DeviceCheck>,
    /// Directory the tool's stream file `tool-<pid>.krs` goes to.
    pub output_dir: Option<PathBuf>,
    /// The progress counters' file ([`crate::progress`]).
    pub progress: Option<PathBuf>,
    /// `KREPLAY_GPU_TIMELINE`: record each dispatch's and copy's GPU times (set by
    /// `kreplay trace --gpu` for observe mode, and by `kreplay replay`; default off).
    pub gpu_timeline: Option<bool>,
}

impl ReplaySettings {
    /// The variables to set, in [`Setting::ALL`]'s order; settings that are `None` are left
    /// out. Sizes are written as [`crate::size::label`]s.
    pub fn encode(&self) -> Vec<(&'static str, OsString)> {
        let size = |n: u64| crate::size::label(n).into();
        let mut out = Vec::new();
        for s in Setting::ALL {
            let value: Option<OsString> = match s {
                Setting::Passes => self.passes.map(|n| n.to_string().into()),
                Setting::Kernel => self.kernel.clone().map(Into::into),
                Setting::MaxDispatches => self.max_dispatches.map(|n| n.to_string().into()),
                Setting::CheckDeterminism => self
                    .check_determinism
                    .map(|b| if b { "1" } else { "0" }.into()),
                Setting::ChunkSize => self.chunk_size.map(size),
                Setting::Restore => self.restore.map(|r| r.as_str().into()),
                Setting::SnapshotBudget => self.snapshot_budget.map(size),
                Setting::SnapshotPlacement => self.snapshot_placement.map(|p| p.as_str().into()),
                Setting::DeviceCheck => self.device_check.map(|d| d.as_str().into()),
                Setting::OutputDir => self.output_dir.clone().map(Into::into),
                Setting::Progress => self.progress.clone().map(Into::into),
                Setting::GpuTimeline => self.gpu_timeline.map(|b| if b { "1" } else { "0" }.into()),
            };
            if let Some(v) = value {
                out.push((s.var(), v));
            }
        }
        out
    }

    /// From the process environment ([`ReplaySettings::decode`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::decode(std::env::vars_os())
    }

    /// From `(name, value)` pairs. Only `KREPLAY_*` names are looked at; an unknown one, or a
    /// value that does not parse, is an error. A name that is not UTF-8 is skipped.
    pub fn decode<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        for (k, v) in vars {
            let Some(k) = k.as_ref().to_str() else {
                continue;
            };
            if !k.starts_with(PREFIX) {
                continue;
            }
            let Some(setting) = Setting::of_var(k) else {
                if OTHER_KNOWN.contains(&k) {
                    continue;
                }
                return Err(ConfigError::Unknown(k.to_owned()));
            };
            c.set(setting, v.as_ref())?;
        }
        Ok(c)
    }

    /// Sets `setting` from its variable's value.
    fn set(&mut self, setting: Setting, raw: &OsStr) -> Result<(), ConfigError> {
        let bad = |why: String| ConfigError::Bad {
            setting,
            value: raw.to_string_lossy().into_owned(),
            why,
        };
        match setting {
            Setting::OutputDir => self.output_dir = Some(raw.into()),
            Setting::Progress => self.progress = Some(raw.into()),
            _ => {
                let v = raw.to_str().ok_or_else(|| bad("not UTF-8".into()))?;
                self.set_str(setting, v).map_err(bad)?;
            }
        }
        Ok(())
    }

    /// Sets a setting whose value is text.
    fn set_str(&mut self, setting: Setting, v: &str) -> Result<(), String> {
        match setting {
            Setting::Passes => self.passes = Some(parse_passes(v)?),
            Setting::Kernel => self.kernel = Some(parse_kernel(v)?),
            Setting::MaxDispatches => self.max_dispatches = Some(parse_count(v)?),
            Setting::CheckDeterminism => self.check_determinism = Some(parse_switch(v)?),
            Setting::ChunkSize => self.chunk_size = Some(parse_chunk_size(v)?),
            Setting::Restore => self.restore = Some(v.parse()?),
            Setting::SnapshotBudget => self.snapshot_budget = Some(parse_size(v)?),
            Setting::SnapshotPlacement => self.snapshot_placement = Some(v.parse()?),
            Setting::DeviceCheck => self.device_check = Some(v.parse()?),
            Setting::OutputDir => self.output_dir = Some(v.into()),
            Setting::Progress => self.progress = Some(v.into()),
            Setting::GpuTimeline => self.gpu_timeline = Some(parse_switch(v)?),
        }
        Ok(())
    }
}
