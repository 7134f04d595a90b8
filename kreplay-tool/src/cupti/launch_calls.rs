//! Kernel launch calls recorded from CUPTI's API records instead of by the probes
//! (`kreplay trace --gpu --cupti-launches`, `KREPLAY_CUPTI_LAUNCHES=1`): the uprobes on the
//! launch entries cost a PyTorch launch two uprobe pairs, where CUPTI's API record is already
//! being made for the GPU timeline's join.
//!
//! A launch's API record becomes an `ApiCall` of kreplay's launch API of the same name
//! (`cuLaunchKernel`, `cudaLaunchKernel`, ...; CUPTI's callback names, looked up once per
//! callback id, with their `_vNNNN`/`_ptsz`/`_ptds` suffixes taken off), on the calling thread,
//! with CUPTI's start, end and return value. CUPTI gives no arguments: they are filled from the
//! first kernel record of the call when it comes (grid and block in blocks, where the probe
//! would have read them; the kernel as a handle with its name, as CUPTI gives it (mangled; the
//! merge demangles), in a `KernelName` record; the
//! stream as CUPTI's stream id, the number the GPU track shows, not the `CUstream` handle), and
//! the call is written just before that kernel's `Dispatch`. A call whose kernel never comes
//! (a failed launch, a graph with no kernel) is written without arguments after
//! [`super::activity::MAX_WAIT_NS`]. When CUPTI cannot be used, [`ask_for_probes`] has the
//! `kreplay trace` that started the process probe its launch entries instead.

use std::collections::{HashMap, VecDeque};

use kreplay_common::api::{self, ApiId, ApiKind, Geometry, Library, NO_ARG};
use kreplay_common::stream::{ApiCall, Dispatch, KernelName, Record};

/// One API record as CUPTI gave it (`CUpti_ActivityAPI`'s fields kreplay reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiRecord {
    /// A driver call, not a runtime one.
    pub driver: bool,
    /// Its callback id in its domain.
    pub cbid: u32,
    /// Correlation id.
    pub correlation: u32,
    /// System thread id.
    pub tid: u32,
    /// Start (trace clock).
    pub start: u64,
    /// End.
    pub end: u64,
    /// What it returned.
    pub ret: u32,
}

/// The tag of the kernel handles this module makes up: no user-space address has it, so they
/// never meet a probe's host stub or `CUfunction`.
pub const HANDLE_TAG: u64 = 0xc000_0000_0000_0000;

/// CUPTI's name of a callback id: `(driver domain?, cbid) -> name`.
pub type NameOf = Box<dyn FnMut(bool, u32) -> Option<String> + Send>;

/// One launch call waiting for its kernel record.
struct Waiting {
    call: ApiCall,
    came: u64,
}

/// The launch calls of one process, from its API records to `ApiCall` records.
pub struct LaunchCalls {
    pid: u32,
    name_of: NameOf,
    /// kreplay's launch API of each (driver?, cbid) seen; `None`: not a launch.
    apis: HashMap<(bool, u32), Option<ApiId>>,
    /// Calls by correlation id, and their arrival order for the timeout.
    waiting: HashMap<u32, Waiting>,
    order: VecDeque<u32>,
    /// The handle given to each kernel name.
    handles: HashMap<String, u64>,
}

/// kreplay's launch API named `cupti_name` (`cudaLaunchKernel_ptsz_v7000` → `cudaLaunchKernel`),
/// if it is one of the CUDA launches the probes would record.
pub fn launch_api(cupti_name: &str) -> Option<ApiId> {
    let mut n = cupti_name;
    loop {
        let before = n.len();
        for suffix in ["_ptsz", "_ptds"] {
            n = n.strip_suffix(suffix).unwrap_or(n);
        }
        if let Some((head, v)) = n.rsplit_once("_v")
            && !v.is_empty()
            && v.bytes().all(|b| b.is_ascii_digit())
        {
            n = head;
        }
        if n.len() == before {
            break;
        }
    }
    let id = api::id_of(n)?;
    let s = api::spec_of(id)?;
    (s.kind == ApiKind::Launch && matches!(s.library, Library::Cuda | Library::CudaRt))
        .then_some(id)
}

/// Whether this process's launch calls are to be written from CUPTI
/// ([`kreplay_common::replay_config::CUPTI_LAUNCHES`] is `1`).
pub fn wanted() -> bool {
    std::env::var_os(kreplay_common::replay_config::CUPTI_LAUNCHES).is_some_and(|v| v == "1")
}

/// Asks the `kreplay trace` that started this process to probe its launch calls after all
/// (CUPTI cannot be used): creates the request file in the output directory and waits, at most
/// `patience`, for the CLI's answer. Returns whether it came; the files are removed either
/// way (the CLI removes an answer that comes later).
pub fn ask_for_probes(patience: std::time::Duration) -> bool {
    use kreplay_common::replay_config::{ACK_SUFFIX, LAUNCH_PROBES_REQUEST, Setting};
    let Some(dir) = std::env::var_os(Setting::OutputDir.var()) else {
        return false;
    };
    let dir = std::path::PathBuf::from(dir);
    let name = format!("{LAUNCH_PROBES_REQUEST}{}", crate::record::current_pid());
    let (request, ack) = (dir.join(&name), dir.join(format!("{name}{ACK_SUFFIX}")));
    if std::fs::write(&request, b"").is_err() {
        return false;
    }
    let deadline = std::time::Instant::now() + patience;
    let answered = loop {
        if ack.exists() {
            break true;
        }
        if std::time::Instant::now() >= deadline {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let _ = std::fs::remove_file(&request);
    let _ = std::fs::remove_file(&ack);
    answered
}

impl LaunchCalls {
    /// Launch calls of process `pid`, naming callback ids with `name_of`.
    pub fn new(pid: u32, name_of: NameOf) -> Self {
        Self {
            pid,
            name_of,
            apis: HashMap::new(),
            waiting: HashMap::new(),
            order: VecDeque::new(),
            handles: HashMap::new(),
        }
    }

    /// Takes one API record (arrived at `now`): kept when it is a launch.
    pub fn api(&mut self, a: ApiRecord, now: u64) {
        let ApiRecord {
            driver,
            cbid,
            correlation,
            tid,
            start,
            end,
            ret,
        } = a;
        let name_of = &mut self.name_of;
        let Some(api) = *self
            .apis
            .entry((driver, cbid))
            .or_insert_with(|| name_of(driver, cbid).and_then(|n| launch_api(&n)))
        else {
            return;
        };
        let call = ApiCall {
            pid: self.pid,
            tid,
            api,
            enter_ns: start,
            exit_ns: end.max(start),
            ret: u64::from(ret),
            args: [0; 6],
            extra: [0; 5],
            out: 0,
        };
        if self
            .waiting
            .insert(correlation, Waiting { call, came: now })
            .is_none()
        {
            self.order.push_back(correlation);
        }
    }

    /// The launch call of kernel record `d` (linked to its call), with the arguments `d`
    /// gives, and the name of a kernel not seen before, to write before `d`.
    pub fn with_kernel(&mut self, d: &Dispatch, out: &mut Vec<Record>) {
        let Some(Waiting { mut call, .. }) = self.waiting.remove(&(d.correlation as u32)) else {
            return;
        };
        let handle = match self.handles.get(&d.kernel) {
            Some(&h) => h,
            None => {
                let h = HANDLE_TAG | (self.handles.len() as u64 + 1);
                self.handles.insert(d.kernel.clone(), h);
                out.push(
                    KernelName {
                        pid: self.pid,
                        ts_ns: call.enter_ns,
                        handle: h,
                        name: d.kernel.clone(),
                    }
                    .into(),
                );
                h
            }
        };
        fill(&mut call, d, handle);
        out.push(call.into());
    }

    /// The calls still waiting that came at least `max_wait` before `now` (all of them with
    /// `u64::MAX`), without arguments.
    pub fn expired(&mut self, now: u64, max_wait: u64, out: &mut Vec<Record>) {
        while let Some(&c) = self.order.front() {
            match self.waiting.get(&c) {
                Some(w) if now.saturating_sub(w.came) < max_wait && now != u64::MAX => break,
                Some(_) => {
                    let w = self.waiting.remove(&c).expect("present");
                    out.push(w.call.into());
                }
                None => {}
            }
            self.order.pop_front();
        }
    }
}

/// Writes `d`'s geometry, kernel `handle` and stream id into `call`'s argument words where the
/// probes put them for its API (the merge reads them by the API's spec).
fn fill(call: &mut ApiCall, d: &Dispatch, handle: u64) {
    let Some(spec) = api::spec_of(call.api) else {
        return;
    };
    let mut set = |i: u8, v: u64| {
        let i = usize::from(i);
        if i < 6 {
            call.args[i] = v;
        } else if let Some(w) = call.extra.get_mut(i - 6) {
            *w = v;
        }
    };
    let b = d.workgroup.map(u64::from);
    let g = [0, 1, 2].map(|i| u64::from(d.grid[i] / d.workgroup[i].max(1)));
    match spec.geometry {
        Geometry::None => {}
        Geometry::Dim3Pairs(i) => {
            set(i, g[0] | g[1] << 32);
            set(i + 1, g[2]);
            set(i + 2, b[0] | b[1] << 32);
            set(i + 3, b[2]);
        }
        Geometry::Scalars(i) => {
            for (k, v) in g.iter().chain(&b).enumerate() {
                set(i + k as u8, *v);
            }
        }
        Geometry::ConfigStruct => {
            set(6, g[0] | g[1] << 32);
            set(7, g[2] | b[0] << 32);
            set(8, b[1] | b[2] << 32);
        }
    }
    if spec.kernel_arg != NO_ARG {
        set(spec.kernel_arg, handle);
    }
    if spec.stream_arg != NO_ARG {
        set(spec.stream_arg, d.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cupti_names_map_to_the_launch_apis_the_probes_record_and_nothing_else() {
        let id = |n| api::id_of(n).unwrap();
        assert_eq!(launch_api("cuLaunchKernel"), Some(id("cuLaunchKernel")));
        assert_eq!(
            launch_api("cuLaunchKernel_ptsz"),
            Some(id("cuLaunchKernel"))
        );
        assert_eq!(
            launch_api("cudaLaunchKernel_v7000"),
            Some(id("cudaLaunchKernel"))
        );
        assert_eq!(
            launch_api("cudaLaunchKernel_ptsz_v7000"),
            Some(id("cudaLaunchKernel"))
        );
        assert_eq!(
            launch_api("cudaLaunchKernelExC_v11060"),
            Some(id("cudaLaunchKernelExC"))
        );
        assert_eq!(
            launch_api("cudaGraphLaunch_ptsz_v10000"),
            Some(id("cudaGraphLaunch"))
        );
        assert_eq!(launch_api("cuLaunchKernelEx"), Some(id("cuLaunchKernelEx")));
        // Known to kreplay but not launches; unknown to kreplay.
        assert_eq!(launch_api("cudaMemcpy_v3020"), None);
        assert_eq!(launch_api("cuMemcpyHtoD_v2"), None);
        assert_eq!(launch_api("cuCtxGetCurrent"), None);
        assert_eq!(launch_api("hipLaunchKernel"), None);
        assert_eq!(launch_api(""), None);
    }
}
