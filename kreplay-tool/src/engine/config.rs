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

/// Every `KREPLAY_*` variable the tool (or the CLI around it) knows.
pub const KNOWN: &[&str] = &[
    ENV_PASSES,
    ENV_KERNEL,
    ENV_MAX_DISPATCHES,
    ENV_CHECK_DETERMINISM,
    crate::record::ENV_OUTPUT_DIR,
    crate::record::ENV_PER_THREAD,
    crate::record::ENV_PER_THREAD_CAP,
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
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            passes: 1,
            kernel: None,
            max_dispatches: None,
            check_determinism: true,
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
        assert_eq!(
            cfg(&[("KREPLAY_PASES", "2")]).unwrap_err(),
            ConfigError::Unknown("KREPLAY_PASES".into())
        );
    }
}
