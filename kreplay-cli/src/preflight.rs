//! Checks that this host can run kreplay's probes, each failure one clear sentence.
//!
//! kreplay needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), a kernel with the uprobe PMU and
//! BTF. The checks read /proc and /sys directly so their messages can say exactly what is
//! missing instead of surfacing an errno from deep inside the loader.
use std::{fs, path::Path};

/// CAP_SYS_ADMIN's bit in the capability sets.
const CAP_SYS_ADMIN: u32 = 21;
/// CAP_PERFMON's bit.
const CAP_PERFMON: u32 = 38;
/// CAP_BPF's bit.
const CAP_BPF: u32 = 39;

/// Why this host cannot run probes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreflightError {
    /// Missing privileges.
    #[error(
        "kreplay needs CAP_BPF and CAP_PERFMON (or root) to load probes; this process lacks {0} \
         — run it with sudo"
    )]
    Privileges(String),
    /// No uprobe PMU.
    #[error(
        "this kernel has no uprobe support ({0} is missing): kreplay needs CONFIG_UPROBE_EVENTS"
    )]
    NoUprobes(String),
    /// No kernel BTF.
    #[error("this kernel exposes no BTF ({0} is missing): kreplay needs CONFIG_DEBUG_INFO_BTF")]
    NoBtf(String),
}

/// Paths the checks read; tests point them at fixtures.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// `/proc/self/status`.
    pub status: String,
    /// `/sys/bus/event_source/devices/uprobe/type`.
    pub uprobe_pmu: String,
    /// `/sys/kernel/btf/vmlinux`.
    pub btf: String,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths {
            status: "/proc/self/status".into(),
            uprobe_pmu: "/sys/bus/event_source/devices/uprobe/type".into(),
            btf: "/sys/kernel/btf/vmlinux".into(),
        }
    }
}

/// Parses the `CapEff:` line of a /proc status file.
fn effective_caps(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

/// Runs every check; the first failure is returned.
pub fn check(paths: &HostPaths) -> Result<(), PreflightError> {
    let status = fs::read_to_string(&paths.status).unwrap_or_default();
    let caps = effective_caps(&status);
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    if !has(CAP_SYS_ADMIN) {
        let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
            .into_iter()
            .filter(|&(bit, _)| !has(bit))
            .map(|(_, name)| name)
            .collect();
        if !missing.is_empty() {
            return Err(PreflightError::Privileges(missing.join(" and ")));
        }
    }
    if !Path::new(&paths.uprobe_pmu).exists() {
        return Err(PreflightError::NoUprobes(paths.uprobe_pmu.clone()));
    }
    if !Path::new(&paths.btf).exists() {
        return Err(PreflightError::NoBtf(paths.btf.clone()));
    }
    Ok(())
}

/// Raises RLIMIT_MEMLOCK where allowed. Failure is expected on kernels that charge BPF memory
/// to the memory cgroup (5.11+) inside containers without CAP_SYS_RESOURCE, so it is logged
/// and ignored (docs/platform.md, "Kernel").
pub fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid, fully initialized rlimit struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    if rc != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "setrlimit(RLIMIT_MEMLOCK) failed; continuing (BPF memory is charged to the memory cgroup)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(caps: &str, uprobe: bool, btf: bool) -> (HostPaths, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "kreplay-preflight-{}-{caps}-{uprobe}-{btf}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("status"), format!("Name:\tx\nCapEff:\t{caps}\n")).unwrap();
        let paths = HostPaths {
            status: dir.join("status").display().to_string(),
            uprobe_pmu: dir.join("uprobe").display().to_string(),
            btf: dir.join("btf").display().to_string(),
        };
        if uprobe {
            fs::write(&paths.uprobe_pmu, "8\n").unwrap();
        }
        if btf {
            fs::write(&paths.btf, "").unwrap();
        }
        (paths, dir)
    }

    #[test]
    fn names_each_missing_capability() {
        let (p, d) = fixture("0000000000000000", true, true);
        assert_eq!(
            check(&p),
            Err(PreflightError::Privileges("CAP_BPF and CAP_PERFMON".into()))
        );
        fs::remove_dir_all(d).unwrap();
        // CAP_PERFMON (bit 38) alone: CAP_BPF is still missing.
        let (p, d) = fixture("0000004000000000", true, true);
        assert_eq!(check(&p), Err(PreflightError::Privileges("CAP_BPF".into())));
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn sys_admin_or_bpf_plus_perfmon_pass() {
        let (p, d) = fixture("0000000000200000", true, true);
        assert_eq!(check(&p), Ok(()));
        fs::remove_dir_all(d).unwrap();
        let (p, d) = fixture("000000c000000000", true, true);
        assert_eq!(check(&p), Ok(()));
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn missing_uprobes_then_btf_are_reported() {
        let (p, d) = fixture("000001ffffffffff", false, true);
        assert_eq!(
            check(&p),
            Err(PreflightError::NoUprobes(p.uprobe_pmu.clone()))
        );
        fs::remove_dir_all(d).unwrap();
        let (p, d) = fixture("000001ffffffffff", true, false);
        let err = check(&p).unwrap_err();
        assert_eq!(err, PreflightError::NoBtf(p.btf.clone()));
        assert!(err.to_string().contains("CONFIG_DEBUG_INFO_BTF"));
        fs::remove_dir_all(d).unwrap();
    }
}
