//! The engine's [`Backend`] on HSA, calling the saved original entries ([`Next`]): copies
//! through `hsa_memory_copy`, host buffers from the CPU agent's fine-grained (pinned) pool,
//! classification through `hsa_amd_pointer_info`, module variables through the AMD loader's
//! `iterate_executables` + `hsa_executable_iterate_agent_symbols`, and one dispatch at a time
//! submitted through the interceptor's writer with kreplay's own completion signal, whose
//! profiling record (on a queue the GPU timeline profiles) gives the GPU's time of a pass.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::ffi::{
    hsa_agent_t, hsa_amd_memory_pool_t, hsa_amd_pointer_info_t,
    hsa_amd_queue_intercept_packet_writer, hsa_executable_symbol_t, hsa_executable_t,
    hsa_kernel_dispatch_packet_t, hsa_signal_t, hsa_status_t, hsa_ven_amd_loader_1_03_pfn_t, info,
    pool_flags, signal_condition, status, symbol_info,
};
use super::tables::Next;
use crate::amd_next;
use crate::engine::backend::{Backend, BackendError, HostBuf, ModuleVar, PointerInfo};

/// Longest a replay pass may take before it counts as failed.
pub const PASS_LIMIT: Duration = Duration::from_secs(120);

/// One dispatch as the interceptor saw it, and the writer to submit it with.
pub struct HsaDispatch {
    /// The application's packet.
    pub packet: hsa_kernel_dispatch_packet_t,
    /// The interceptor's writer (valid only inside the handler that received it).
    pub writer: hsa_amd_queue_intercept_packet_writer,
    /// The agent whose queue it is.
    pub agent: u64,
    /// The GPU timeline's clock when its queue profiles dispatches: a pass is then timed by
    /// the GPU's start and end of it.
    pub timeline: Option<super::timeline::Timeline>,
}

/// HSA implementation of the engine's backend.
pub struct HsaBackend {
    next: Next,
    system_pool: OnceLock<Option<hsa_amd_memory_pool_t>>,
    loader: OnceLock<Option<hsa_ven_amd_loader_1_03_pfn_t>>,
    gpu: Mutex<HashMap<u64, bool>>,
    signals: Mutex<Vec<hsa_signal_t>>,
}

// SAFETY: Next holds runtime function pointers callable from any thread; the rest is locked.
unsafe impl Sync for HsaBackend {}
// SAFETY: as above.
unsafe impl Send for HsaBackend {}

fn call(name: &'static str, st: hsa_status_t) -> Result<(), BackendError> {
    if st == status::SUCCESS || st == status::INFO_BREAK {
        Ok(())
    } else {
        Err(BackendError::Call {
            call: name,
            status: st,
        })
    }
}

impl HsaBackend {
    /// A backend over the saved original entries.
    pub fn new(next: Next) -> Self {
        Self {
            next,
            system_pool: OnceLock::new(),
            loader: OnceLock::new(),
            gpu: Mutex::new(HashMap::new()),
            signals: Mutex::new(Vec::new()),
        }
    }

    /// The saved original entries.
    pub fn next(&self) -> &Next {
        &self.next
    }

    /// A signal of value 1 from kreplay's pool (created when the pool is empty).
    pub fn take_signal(&self) -> Option<hsa_signal_t> {
        let reuse = self.signals.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let sig = match reuse {
            Some(s) => s,
            None => {
                let create = self.next.core.hsa_signal_create_fn?;
                let mut s = hsa_signal_t { handle: 0 };
                // SAFETY: create writes one signal handle into the valid local.
                let st = unsafe { create(1, 0, core::ptr::null(), &mut s) };
                if st != status::SUCCESS {
                    return None;
                }
                s
            }
        };
        let store = self.next.core.hsa_signal_store_screlease_fn?;
        // SAFETY: sig is a live signal owned by kreplay.
        unsafe { store(sig, 1) };
        Some(sig)
    }

    /// Returns a signal to the pool.
    pub fn give_signal(&self, sig: hsa_signal_t) {
        self.signals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sig);
    }

    /// Decrements the application's completion signal by one, as the packet processor would.
    pub fn complete_app_signal(&self, sig: hsa_signal_t) {
        if sig.handle == 0 {
            return;
        }
        if let Some(sub) = self.next.core.hsa_signal_subtract_screlease_fn {
            // SAFETY: the application's signal is live until it observes the completion.
            unsafe { sub(sig, 1) };
        }
    }

    /// Waits (bounded by [`PASS_LIMIT`]) for `sig` to drop below 1.
    pub fn wait_signal(&self, sig: hsa_signal_t) -> Result<(), BackendError> {
        let wait = self
            .next
            .core
            .hsa_signal_wait_scacquire_fn
            .ok_or(BackendError::Missing("hsa_signal_wait_scacquire"))?;
        let deadline = Instant::now() + PASS_LIMIT;
        loop {
            // SAFETY: sig is a live kreplay signal.
            let v = unsafe {
                wait(
                    sig,
                    signal_condition::LT,
                    1,
                    100_000_000,
                    signal_condition::WAIT_STATE_BLOCKED,
                )
            };
            if v < 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Call {
                    call: "hsa_signal_wait_scacquire (timed out)",
                    status: status::ERROR,
                });
            }
        }
    }

    fn loader(&self) -> Option<&hsa_ven_amd_loader_1_03_pfn_t> {
        self.loader
            .get_or_init(|| {
                let get = self.next.core.hsa_system_get_major_extension_table_fn?;
                // SAFETY: the loader table is plain function pointers; all-zero is all None/null.
                let mut t: hsa_ven_amd_loader_1_03_pfn_t = unsafe { core::mem::zeroed() };
                // SAFETY: the runtime fills at most size_of bytes of t.
                let st = unsafe {
                    get(
                        info::EXTENSION_AMD_LOADER,
                        1,
                        core::mem::size_of_val(&t),
                        &mut t as *mut _ as *mut c_void,
                    )
                };
                (st == status::SUCCESS).then_some(t)
            })
            .as_ref()
    }

    fn find_system_pool(&self) -> Option<hsa_amd_memory_pool_t> {
        let iterate = self.next.core.hsa_iterate_agents_fn?;
        let pools = amd_next!(self.next, hsa_amd_agent_iterate_memory_pools_fn)?;
        let pool_info = amd_next!(self.next, hsa_amd_memory_pool_get_info_fn)?;
        let get_info = self.next.core.hsa_agent_get_info_fn?;
        struct Ctx {
            get_info: unsafe extern "C" fn(hsa_agent_t, u32, *mut c_void) -> hsa_status_t,
            pools: unsafe extern "C" fn(
                hsa_agent_t,
                Option<unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t>,
                *mut c_void,
            ) -> hsa_status_t,
            pool_info:
                unsafe extern "C" fn(hsa_amd_memory_pool_t, u32, *mut c_void) -> hsa_status_t,
            found: Option<hsa_amd_memory_pool_t>,
        }
        unsafe extern "C" fn on_pool(
            pool: hsa_amd_memory_pool_t,
            data: *mut c_void,
        ) -> hsa_status_t {
            // SAFETY: data is the &mut Ctx passed below, alive for the iteration.
            let ctx = unsafe { &mut *(data as *mut Ctx) };
            let mut flags = 0u32;
            let mut allowed = false;
            // SAFETY: the attributes write a u32 and a bool into the valid locals.
            unsafe {
                (ctx.pool_info)(
                    pool,
                    info::POOL_GLOBAL_FLAGS,
                    &mut flags as *mut u32 as *mut c_void,
                );
                (ctx.pool_info)(
                    pool,
                    info::POOL_ALLOC_ALLOWED,
                    &mut allowed as *mut bool as *mut c_void,
                );
            }
            if allowed
                && flags & pool_flags::FINE_GRAINED != 0
                && flags & pool_flags::KERNARG_INIT == 0
            {
                ctx.found = Some(pool);
                return status::INFO_BREAK;
            }
            status::SUCCESS
        }
        unsafe extern "C" fn on_agent(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t {
            // SAFETY: data is the &mut Ctx passed below, alive for the iteration.
            let ctx = unsafe { &mut *(data as *mut Ctx) };
            let mut dev = u32::MAX;
            // SAFETY: AGENT_DEVICE writes a u32 into the valid local.
            unsafe {
                (ctx.get_info)(
                    agent,
                    info::AGENT_DEVICE,
                    &mut dev as *mut u32 as *mut c_void,
                )
            };
            if dev == info::DEVICE_TYPE_CPU {
                // SAFETY: on_pool matches the callback type; data stays valid.
                unsafe { (ctx.pools)(agent, Some(on_pool), data) };
                if ctx.found.is_some() {
                    return status::INFO_BREAK;
                }
            }
            status::SUCCESS
        }
        let mut ctx = Ctx {
            get_info,
            pools,
            pool_info,
            found: None,
        };
        // SAFETY: on_agent matches the callback type; ctx outlives the call.
        unsafe { iterate(Some(on_agent), &mut ctx as *mut Ctx as *mut c_void) };
        ctx.found
    }

    /// The pool's global flags (for classifying allocations the pointer info does not flag).
    pub fn pool_global_flags(&self, pool: hsa_amd_memory_pool_t) -> Option<u32> {
        let get = amd_next!(self.next, hsa_amd_memory_pool_get_info_fn)?;
        let mut flags = 0u32;
        // SAFETY: POOL_GLOBAL_FLAGS writes a u32 into the valid local.
        let st = unsafe {
            get(
                pool,
                info::POOL_GLOBAL_FLAGS,
                &mut flags as *mut u32 as *mut c_void,
            )
        };
        (st == status::SUCCESS).then_some(flags)
    }

    /// The name of the kernel whose KERNEL_OBJECT is `object`, from the loaded executables.
    pub fn kernel_name(&self, agent: u64, object: u64) -> Option<String> {
        let mut found = None;
        self.each_symbol(agent, &mut |sym, get| {
            let mut kind = u32::MAX;
            let mut ko = 0u64;
            // SAFETY: TYPE writes a u32, KERNEL_OBJECT a u64, into valid locals.
            unsafe {
                get(sym, symbol_info::TYPE, &mut kind as *mut u32 as *mut c_void);
                if kind != symbol_info::KIND_KERNEL {
                    return true;
                }
                get(
                    sym,
                    symbol_info::KERNEL_OBJECT,
                    &mut ko as *mut u64 as *mut c_void,
                );
            }
            if ko == object {
                found = symbol_name(sym, get);
                return false;
            }
            true
        })
        .ok()?;
        found.map(|n| n.strip_suffix(".kd").map(str::to_owned).unwrap_or(n))
    }

    /// Calls `f` for each symbol of each executable loaded for `agent` until it returns false.
    fn each_symbol(
        &self,
        agent: u64,
        f: &mut dyn FnMut(hsa_executable_symbol_t, SymInfo) -> bool,
    ) -> Result<(), BackendError> {
        let loader = self
            .loader()
            .ok_or(BackendError::Missing("AMD loader extension"))?;
        let iter_exec = loader
            .hsa_ven_amd_loader_iterate_executables
            .ok_or(BackendError::Missing("iterate_executables"))?;
        let iter_sym = self
            .next
            .core
            .hsa_executable_iterate_agent_symbols_fn
            .ok_or(BackendError::Missing(
                "hsa_executable_iterate_agent_symbols",
            ))?;
        let get = self
            .next
            .core
            .hsa_executable_symbol_get_info_fn
            .ok_or(BackendError::Missing("hsa_executable_symbol_get_info"))?;
        let mut execs: Vec<hsa_executable_t> = Vec::new();
        unsafe extern "C" fn on_exec(e: hsa_executable_t, data: *mut c_void) -> hsa_status_t {
            // SAFETY: data is the &mut Vec passed below.
            unsafe { (*(data as *mut Vec<hsa_executable_t>)).push(e) };
            status::SUCCESS
        }
        // SAFETY: on_exec matches the callback type; execs outlives the call.
        call("iterate_executables", unsafe {
            iter_exec(Some(on_exec), &mut execs as *mut _ as *mut c_void)
        })?;
        struct Ctx<'a> {
            f: &'a mut dyn FnMut(hsa_executable_symbol_t, SymInfo) -> bool,
            get: SymInfo,
            stop: bool,
            /// A panic of `f`, held while the runtime's frames are on the stack.
            panic: Option<Box<dyn std::any::Any + Send>>,
        }
        unsafe extern "C" fn on_sym(
            _e: hsa_executable_t,
            _a: hsa_agent_t,
            s: hsa_executable_symbol_t,
            data: *mut c_void,
        ) -> hsa_status_t {
            // SAFETY: data is the &mut Ctx passed below.
            let ctx = unsafe { &mut *(data as *mut Ctx<'_>) };
            // A panic must not unwind through the runtime's C frames: it stops the iteration
            // and is resumed once the runtime has returned.
            let (f, get) = (&mut ctx.f, ctx.get);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(s, get))) {
                Ok(true) => status::SUCCESS,
                Ok(false) => {
                    ctx.stop = true;
                    status::INFO_BREAK
                }
                Err(p) => {
                    ctx.stop = true;
                    ctx.panic = Some(p);
                    status::INFO_BREAK
                }
            }
        }
        let mut ctx = Ctx {
            f,
            get,
            stop: false,
            panic: None,
        };
        for e in execs {
            // SAFETY: on_sym matches the callback type; ctx outlives the call.
            let st = unsafe {
                iter_sym(
                    e,
                    hsa_agent_t { handle: agent },
                    Some(on_sym),
                    &mut ctx as *mut Ctx<'_> as *mut c_void,
                )
            };
            if let Some(p) = ctx.panic.take() {
                std::panic::resume_unwind(p);
            }
            call("hsa_executable_iterate_agent_symbols", st)?;
            if ctx.stop {
                break;
            }
        }
        Ok(())
    }
}

type SymInfo = unsafe extern "C" fn(hsa_executable_symbol_t, u32, *mut c_void) -> hsa_status_t;

fn symbol_name(sym: hsa_executable_symbol_t, get: SymInfo) -> Option<String> {
    let mut len = 0u32;
    // SAFETY: NAME_LENGTH writes a u32 into the valid local.
    if unsafe {
        get(
            sym,
            symbol_info::NAME_LENGTH,
            &mut len as *mut u32 as *mut c_void,
        )
    } != status::SUCCESS
    {
        return None;
    }
    let mut buf = vec![0u8; len as usize + 1];
    // SAFETY: NAME writes len bytes into buf of len + 1 bytes.
    if unsafe { get(sym, symbol_info::NAME, buf.as_mut_ptr() as *mut c_void) } != status::SUCCESS {
        return None;
    }
    buf.truncate(len as usize);
    Some(
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_owned(),
    )
}

impl Backend for HsaBackend {
    type Dispatch = HsaDispatch;

    fn host_alloc(&self, len: usize) -> Option<HostBuf> {
        let pool = (*self.system_pool.get_or_init(|| self.find_system_pool()))?;
        let alloc = amd_next!(self.next, hsa_amd_memory_pool_allocate_fn)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: the original allocate (not kreplay's wrapper) writes one pointer into p.
        let st = unsafe { alloc(pool, len.max(1), 0, &mut p) };
        (st == status::SUCCESS && !p.is_null()).then_some(HostBuf {
            ptr: p as *mut u8,
            len,
        })
    }

    fn host_free(&self, buf: HostBuf) {
        if let Some(free) = amd_next!(self.next, hsa_amd_memory_pool_free_fn) {
            // SAFETY: buf came from the original pool allocate in host_alloc.
            unsafe { free(buf.ptr as *mut c_void) };
        }
    }

    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        let copy = self
            .next
            .core
            .hsa_memory_copy_fn
            .ok_or(BackendError::Missing("hsa_memory_copy"))?;
        // SAFETY: dst holds len bytes (caller); src is a live device region of len bytes.
        call("hsa_memory_copy (device to host)", unsafe {
            copy(dst as *mut c_void, src as *const c_void, len)
        })
    }

    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        let copy = self
            .next
            .core
            .hsa_memory_copy_fn
            .ok_or(BackendError::Missing("hsa_memory_copy"))?;
        // SAFETY: src holds len bytes (caller); dst is a live device region of len bytes.
        call("hsa_memory_copy (host to device)", unsafe {
            copy(dst as *mut c_void, src as *const c_void, len)
        })
    }

    fn module_variables(&self, agent: u64) -> Result<Vec<ModuleVar>, BackendError> {
        let mut vars = Vec::new();
        self.each_symbol(agent, &mut |sym, get| {
            let mut kind = u32::MAX;
            let (mut addr, mut size, mut constant) = (0u64, 0u32, false);
            // SAFETY: each attribute writes its documented type into the matching local.
            unsafe {
                get(sym, symbol_info::TYPE, &mut kind as *mut u32 as *mut c_void);
                if kind != symbol_info::KIND_VARIABLE {
                    return true;
                }
                get(
                    sym,
                    symbol_info::VARIABLE_ADDRESS,
                    &mut addr as *mut u64 as *mut c_void,
                );
                get(
                    sym,
                    symbol_info::VARIABLE_SIZE,
                    &mut size as *mut u32 as *mut c_void,
                );
                get(
                    sym,
                    symbol_info::VARIABLE_IS_CONST,
                    &mut constant as *mut bool as *mut c_void,
                );
            }
            let name = symbol_name(sym, get).unwrap_or_default();
            vars.push(ModuleVar {
                addr,
                size: u64::from(size),
                constant,
                name,
            });
            true
        })?;
        Ok(vars)
    }

    fn submit_wait(&self, d: &HsaDispatch) -> Result<(), BackendError> {
        self.submit_timed(d, None).map(|_| ())
    }

    fn submit_wait_timed(&self, d: &HsaDispatch) -> Result<Option<u64>, BackendError> {
        self.submit_timed(d, d.timeline.as_ref())
    }
}

impl HsaBackend {
    /// Submits `d` with one of kreplay's signals and waits for it; with `timeline`, the GPU's
    /// time of it (ns) from the signal's profiling record (`None` when the runtime has none).
    fn submit_timed(
        &self,
        d: &HsaDispatch,
        timeline: Option<&super::timeline::Timeline>,
    ) -> Result<Option<u64>, BackendError> {
        let writer = d.writer.ok_or(BackendError::Missing("intercept writer"))?;
        let sig = self
            .take_signal()
            .ok_or(BackendError::Missing("hsa_signal_create"))?;
        let mut pkt = d.packet;
        pkt.completion_signal = sig;
        // SAFETY: the writer is the one handed to the running handler (we are inside it) and
        // pkt is one valid 64-byte packet.
        unsafe {
            writer(
                &pkt as *const hsa_kernel_dispatch_packet_t as *const c_void,
                1,
            )
        };
        self.wait_signal(sig)?;
        let gpu_ns = timeline
            .and_then(|tl| tl.dispatch_times(&self.next, d.agent, sig))
            .map(|(start, end)| end.saturating_sub(start))
            .filter(|&ns| ns > 0);
        self.give_signal(sig);
        Ok(gpu_ns)
    }
}

impl super::classify::PointerQuery for HsaBackend {
    fn pointer_info(&self, ptr: u64) -> Option<PointerInfo> {
        let query = amd_next!(self.next, hsa_amd_pointer_info_fn)?;
        // SAFETY: the info struct is plain data; zero is a valid starting value.
        let mut inf: hsa_amd_pointer_info_t = unsafe { core::mem::zeroed() };
        inf.size = core::mem::size_of::<hsa_amd_pointer_info_t>() as u32;
        // SAFETY: the runtime fills at most inf.size bytes; no accessible-agents list is asked for.
        let st = unsafe {
            query(
                ptr as *const c_void,
                &mut inf,
                None,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        };
        if st != status::SUCCESS {
            return None;
        }
        let flags_end = core::mem::offset_of!(hsa_amd_pointer_info_t, global_flags) + 4;
        Some(PointerInfo {
            kind: inf.type_,
            base: inf.agentBaseAddress as u64,
            size: inf.sizeInBytes as u64,
            owner: inf.agentOwner.handle,
            global_flags: (inf.size as usize >= flags_end).then_some(inf.global_flags),
        })
    }

    fn agent_is_gpu(&self, agent: u64) -> bool {
        let mut cache = self.gpu.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = cache.get(&agent) {
            return *g;
        }
        let Some(get) = self.next.core.hsa_agent_get_info_fn else {
            return false;
        };
        let mut dev = u32::MAX;
        // SAFETY: AGENT_DEVICE writes a u32 into the valid local.
        let st = unsafe {
            get(
                hsa_agent_t { handle: agent },
                info::AGENT_DEVICE,
                &mut dev as *mut u32 as *mut c_void,
            )
        };
        let gpu = st == status::SUCCESS && dev == info::DEVICE_TYPE_GPU;
        cache.insert(agent, gpu);
        gpu
    }
}

/// HSA has no device-side chunk kernels: the engine hashes and compares through the host.
impl crate::engine::backend::DeviceChunks for HsaBackend {}

/// No one-pass restore on HSA.
impl crate::engine::backend::OnePassRestore for HsaBackend {}
