//! The shared programs loaded a second time as uprobe-multi programs, attached with one BPF
//! link per (library, program) instead of one perf event per function.
//!
//! Why: the kernel tears a perf-event uprobe down under the global trace-event mutex and waits
//! for RCU grace periods each time, so detaching N probes costs N grace periods in a row
//! (about a tenth of a second each on a busy host). A uprobe-multi link (Linux 6.6+,
//! `BPF_TRACE_UPROBE_MULTI`) unregisters all its functions and then waits once, and links
//! closed on several threads at once share their grace periods. It attaches in one system
//! call per library too.
//!
//! aya does not load uprobe-multi programs, so this module does it from the same object: it
//! relocates the programs' instructions against the maps aya created (`aya_obj`), loads them
//! with `expected_attach_type = BPF_TRACE_UPROBE_MULTI`, and creates the links with
//! `BPF_LINK_CREATE`. The kernel ABI used is in `docs/platform.md` ("uprobe-multi links").
use std::{
    collections::{HashMap, HashSet},
    ffi::CString,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
    os::unix::ffi::OsStrExt,
    path::Path,
};

use aya::{Ebpf, maps::Map};

/// `BPF_PROG_LOAD`.
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_OBJ_GET_INFO_BY_FD`.
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
/// `BPF_LINK_CREATE`.
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_PROG_TYPE_KPROBE`: uprobes are kprobe-type programs.
const BPF_PROG_TYPE_KPROBE: u32 = 2;
/// `BPF_TRACE_UPROBE_MULTI` (enum bpf_attach_type).
const BPF_TRACE_UPROBE_MULTI: u32 = 48;
/// `BPF_F_UPROBE_MULTI_RETURN`: the link's programs run at function return.
const BPF_F_UPROBE_MULTI_RETURN: u32 = 1;

/// Errors loading or attaching uprobe-multi programs.
#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    /// The embedded object could not be parsed or relocated.
    #[error("preparing {what} from the BPF object: {detail}")]
    Object {
        /// What was being prepared.
        what: String,
        /// The parser's or relocator's message.
        detail: String,
    },
    /// A system call failed.
    #[error("{call} for {what}: {source}")]
    Sys {
        /// The bpf(2) command.
        call: &'static str,
        /// What it was for.
        what: String,
        /// The kernel's answer.
        source: std::io::Error,
    },
}

impl MultiError {
    /// Whether the error says the kernel lacks uprobe-multi links (older than 6.6, or built
    /// without them), as opposed to a failure of this particular attachment.
    pub fn unsupported(&self) -> bool {
        match self {
            MultiError::Sys { source, .. } => matches!(
                source.raw_os_error(),
                Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS | libc::E2BIG)
            ),
            MultiError::Object { .. } => true,
        }
    }
}

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it, up to `expected_attach_type` (the kernel
/// takes a shorter attribute and treats the rest as zero).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}
const _: () = assert!(std::mem::size_of::<ProgLoadAttr>() == 72);

/// `union bpf_attr` as `BPF_LINK_CREATE` reads it for `BPF_TRACE_UPROBE_MULTI`.
#[repr(C)]
#[derive(Default)]
struct UprobeMultiLinkAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    path: u64,
    offsets: u64,
    ref_ctr_offsets: u64,
    cookies: u64,
    cnt: u32,
    multi_flags: u32,
    pid: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<UprobeMultiLinkAttr>() == 64);
// The kernel's layout, as aya's bindings of the UAPI header give it: the uprobe-multi member
// starts after four u32 words and holds four u64 and three u32 fields.
const _: () = assert!(
    std::mem::size_of::<aya_obj::generated::bpf_attr__bindgen_ty_14__bindgen_ty_3__bindgen_ty_7>()
        == 48
        && std::mem::offset_of!(UprobeMultiLinkAttr, path) == 16
        && std::mem::offset_of!(UprobeMultiLinkAttr, pid) == 56
);

/// `struct bpf_prog_info` up to `run_cnt`, the run-time statistics.
#[repr(C)]
struct ProgInfoPrefix {
    words: [u64; 24],
    run_time_ns: u64,
    run_cnt: u64,
}
const _: () = assert!(
    std::mem::offset_of!(ProgInfoPrefix, run_time_ns)
        == std::mem::offset_of!(aya_obj::generated::bpf_prog_info, run_time_ns)
);

/// Runs `bpf(cmd, attr, size_of(attr))`, returning the new descriptor.
fn bpf_fd<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, initialised #[repr(C)] attribute of the size passed, every
    // pointer in it points at memory that outlives the call, and the kernel writes at most
    // that many bytes back.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a non-negative return of these commands is a new descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// The descriptor of one map aya created.
fn map_fd(map: &Map) -> RawFd {
    macro_rules! fd_of {
        ($($variant:ident),* $(,)?) => {
            match map { $(Map::$variant(m) => m.fd().as_fd().as_raw_fd(),)* }
        };
    }
    use std::os::fd::AsFd;
    fd_of!(
        Array,
        ArrayOfMaps,
        BloomFilter,
        CgroupArray,
        CgroupStorage,
        CgrpStorage,
        CpuMap,
        DevMap,
        DevMapHash,
        HashMap,
        HashOfMaps,
        InodeStorage,
        LpmTrie,
        LruHashMap,
        PerCpuArray,
        PerCpuCgroupStorage,
        PerCpuHashMap,
        PerCpuLruHashMap,
        PerfEventArray,
        ProgramArray,
        Queue,
        ReusePortSockArray,
        RingBuf,
        SockHash,
        SockMap,
        SkStorage,
        Stack,
        StackTraceMap,
        Unsupported,
        XskMap,
    )
}

/// The named programs, loaded as uprobe-multi programs.
pub struct MultiPrograms {
    fds: HashMap<&'static str, OwnedFd>,
}

impl MultiPrograms {
    /// Loads `names` from `object` as uprobe-multi programs, their map references bound to the
    /// maps `bpf` (loaded by aya from the same object) created. Call it before any map is taken
    /// out of `bpf`.
    pub fn load(
        object: &[u8],
        bpf: &Ebpf,
        names: &[&'static str],
    ) -> Result<MultiPrograms, MultiError> {
        let object_error = |what: &str, detail: String| MultiError::Object {
            what: what.to_string(),
            detail,
        };
        let mut obj = aya_obj::Object::parse(object)
            .map_err(|e| object_error("the programs", e.to_string()))?;
        let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
        let defs: Vec<(String, aya_obj::Map)> = obj
            .maps
            .iter()
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        let bound: Vec<(&str, RawFd, &aya_obj::Map)> = defs
            .iter()
            .filter_map(|(n, m)| bpf.map(n).map(|live| (n.as_str(), map_fd(live), m)))
            .collect();
        obj.relocate_maps(bound.into_iter(), &text_sections)
            .map_err(|e| object_error("map references", e.to_string()))?;
        obj.relocate_calls(&text_sections)
            .map_err(|e| object_error("calls", e.to_string()))?;
        let mut fds = HashMap::new();
        for &name in names {
            let prog = obj
                .programs
                .get(name)
                .ok_or_else(|| object_error(name, "no such program".into()))?;
            let function = obj
                .functions
                .get(&prog.function_key())
                .ok_or_else(|| object_error(name, "no code".into()))?;
            let mut attr = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_KPROBE,
                insn_cnt: function.instructions.len() as u32,
                insns: function.instructions.as_ptr() as u64,
                license: prog.license.as_ptr() as u64,
                expected_attach_type: BPF_TRACE_UPROBE_MULTI,
                ..ProgLoadAttr::default()
            };
            for (dst, src) in attr.prog_name.iter_mut().zip(name.bytes().take(15)) {
                *dst = src;
            }
            let fd = bpf_fd(BPF_PROG_LOAD, &mut attr).map_err(|source| MultiError::Sys {
                call: "BPF_PROG_LOAD",
                what: name.to_string(),
                source,
            })?;
            fds.insert(name, fd);
        }
        Ok(MultiPrograms { fds })
    }

    /// Attaches program `name` to every `(offset, cookie)` of `library` in one link: at entry,
    /// or at return when `ret`; for the process `pid` only (0: every process).
    pub fn attach(
        &self,
        name: &'static str,
        library: &Path,
        points: &[(u64, u64)],
        pid: u32,
        ret: bool,
    ) -> Result<OwnedFd, MultiError> {
        let what = || {
            format!(
                "{name} on {} ({} functions)",
                library.display(),
                points.len()
            )
        };
        let prog = self.fds.get(name).ok_or_else(|| MultiError::Object {
            what: what(),
            detail: "program not loaded".into(),
        })?;
        let path =
            CString::new(library.as_os_str().as_bytes()).map_err(|e| MultiError::Object {
                what: what(),
                detail: e.to_string(),
            })?;
        let offsets: Vec<u64> = points.iter().map(|p| p.0).collect();
        let cookies: Vec<u64> = points.iter().map(|p| p.1).collect();
        let mut attr = UprobeMultiLinkAttr {
            prog_fd: prog.as_raw_fd() as u32,
            attach_type: BPF_TRACE_UPROBE_MULTI,
            path: path.as_ptr() as u64,
            offsets: offsets.as_ptr() as u64,
            cookies: cookies.as_ptr() as u64,
            cnt: points.len() as u32,
            multi_flags: if ret { BPF_F_UPROBE_MULTI_RETURN } else { 0 },
            pid,
            ..UprobeMultiLinkAttr::default()
        };
        bpf_fd(BPF_LINK_CREATE, &mut attr).map_err(|source| MultiError::Sys {
            call: "BPF_LINK_CREATE",
            what: what(),
            source,
        })
    }

    /// The kernel's run-time statistics of program `name`: (total ns, runs), while
    /// BPF_ENABLE_STATS is on.
    pub fn runs(&self, name: &str) -> Option<(u64, u64)> {
        let fd = self.fds.get(name)?;
        let mut info = ProgInfoPrefix {
            words: [0; 24],
            run_time_ns: 0,
            run_cnt: 0,
        };
        #[repr(C)]
        struct InfoAttr {
            bpf_fd: u32,
            info_len: u32,
            info: u64,
        }
        let mut attr = InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: std::mem::size_of::<ProgInfoPrefix>() as u32,
            info: &mut info as *mut ProgInfoPrefix as u64,
        };
        // SAFETY: `attr` is a live #[repr(C)] attribute of the size passed, pointing at `info`,
        // which has `info_len` writable bytes; the command creates no descriptor.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_OBJ_GET_INFO_BY_FD,
                &mut attr as *mut InfoAttr as *mut libc::c_void,
                std::mem::size_of::<InfoAttr>() as libc::c_uint,
            )
        };
        (ret == 0).then_some((info.run_time_ns, info.run_cnt))
    }
}

/// Closes `links` on one thread each, so that the grace periods their teardown waits for
/// overlap instead of adding up; returns once all are closed.
pub fn close_together(links: Vec<OwnedFd>) {
    let mut handles = Vec::with_capacity(links.len());
    for fd in links {
        // When no thread can be started the closure, and the link with it, is dropped here:
        // that link closes in turn.
        if let Ok(h) = std::thread::Builder::new()
            .name("kreplay-detach".into())
            .spawn(move || drop(fd))
        {
            handles.push(h);
        }
    }
    for h in handles {
        let _ = h.join();
    }
}
