//! Recorder settings and their environment variables.

use kreplay_common::replay_config::{self as contract, Setting};

/// Selects the path: `0` the shared-mutex baseline, `1` (default) per-thread buffers.
pub const ENV_PER_THREAD: &str = contract::PER_THREAD_BUFFER;
/// Most undrained records per thread buffer (rows and correlations each), default 16384.
pub const ENV_PER_THREAD_CAP: &str = contract::PER_THREAD_CAP;
/// Directory the tool's stream file `tool-<pid>.krs` goes to (set by `kreplay replay`).
pub const ENV_OUTPUT_DIR: &str = Setting::OutputDir.var();

/// How a [`super::Recorder`] buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecorderConfig {
    /// Per-thread buffers (true) or one shared Vec behind one mutex (false).
    pub per_thread: bool,
    /// Most undrained entries per thread log (rounded up to whole 256-entry blocks).
    pub per_thread_cap: usize,
    /// Most merged-but-unwritten rows (and, separately, correlations) in the shared list.
    pub shared_cap: usize,
    /// Pending entries (per thread, or in the shared list) at which a flush is requested.
    pub flush_threshold: usize,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        Self {
            per_thread: true,
            per_thread_cap: 16 * 1024,
            shared_cap: 4 * 1024 * 1024,
            flush_threshold: 8 * 1024,
        }
    }
}

impl RecorderConfig {
    /// The defaults, overridden by [`ENV_PER_THREAD`] and [`ENV_PER_THREAD_CAP`]; a value that
    /// does not parse is logged and ignored.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`RecorderConfig::from_env`], reading variables through `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let mut c = Self::default();
        if let Some(v) = get(ENV_PER_THREAD) {
            match v.trim() {
                "0" | "false" => c.per_thread = false,
                "1" | "true" => c.per_thread = true,
                other => tracing::warn!("{ENV_PER_THREAD}={other:?} is not 0 or 1; using 1"),
            }
        }
        if let Some(v) = get(ENV_PER_THREAD_CAP) {
            match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => c.per_thread_cap = n,
                _ => tracing::warn!("{ENV_PER_THREAD_CAP}={v:?} is not a positive count; ignored"),
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> RecorderConfig {
        RecorderConfig::from_lookup(|k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_flag_selects_the_path_and_defaults_to_per_thread() {
        assert!(with(&[]).per_thread);
        assert!(!with(&[(ENV_PER_THREAD, "0")]).per_thread);
        assert!(with(&[(ENV_PER_THREAD, "1")]).per_thread);
        assert!(with(&[(ENV_PER_THREAD, "maybe")]).per_thread);
        assert_eq!(with(&[(ENV_PER_THREAD_CAP, "4096")]).per_thread_cap, 4096);
        assert_eq!(
            with(&[(ENV_PER_THREAD_CAP, "-1")]).per_thread_cap,
            16 * 1024
        );
    }
}
