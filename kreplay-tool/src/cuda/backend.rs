//! The engine's [`Backend`] on the CUDA driver: pinned host buffers (`cuMemAllocHost_v2`),
//! synchronous copies, `cuPointerGetAttributes`, module variables resolved by name
//! (`cuModuleGetGlobal_v2`/`cuLibraryGetGlobal`) and a submit that launches and waits for the
//! context (`cuCtxSynchronize`: also right for per-thread default streams), timing the kernel
//! on the GPU with events where it can ([`super::pass_timer`]).

use core::ffi::{c_uint, c_void};
use std::cell::Cell;
use std::ffi::CString;

use super::ffi::*;
use super::launch_call::Launch;
use super::pass_timer::PassTimer;
use super::state::{CudaTool, ModuleKind};
use crate::engine::backend::{Backend, BackendError, HostBuf, ModuleVar, PointerInfo};

/// Variables larger than this are skipped with a warning (as on HSA).
const MAX_VARIABLE: usize = 1 << 30;

/// The CUDA backend of one replay.
pub struct CudaBackend<'t> {
    t: &'t CudaTool,
    last_launch: Cell<Option<BackendError>>,
    timer: PassTimer,
}

/// `Ok` when `r` is `CUDA_SUCCESS`, else the error naming `call`.
pub(super) fn check(call: &'static str, r: CUresult) -> Result<(), BackendError> {
    if r == SUCCESS {
        Ok(())
    } else {
        Err(BackendError::Call { call, status: r })
    }
}

impl<'t> CudaBackend<'t> {
    /// A backend over the tool's driver and modules.
    pub fn new(t: &'t CudaTool) -> Self {
        CudaBackend {
            t,
            last_launch: Cell::new(None),
            timer: PassTimer::new(t.driver.events),
        }
    }

    /// The tool state this backend serves.
    pub fn tool(&self) -> &'t CudaTool {
        self.t
    }

    /// Waits for all work of the current context.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        // SAFETY: no arguments; the application's context is current on this thread.
        check("cuCtxSynchronize", unsafe {
            (self.t.driver.ctx_synchronize)()
        })
    }

    /// Records a launch's status; an error is returned and remembered.
    pub fn launched(&self, r: CUresult) -> Result<(), BackendError> {
        let res = check("cuLaunchKernel", r);
        if let Err(e) = &res {
            self.last_launch.set(Some(e.clone()));
        }
        res
    }

    /// The error of the last refused launch.
    pub fn last_launch_error(&self) -> Option<BackendError> {
        self.last_launch.take()
    }

    fn resolve(
        &self,
        kind: ModuleKind,
        handle: usize,
        name: &str,
    ) -> Result<(u64, usize), CUresult> {
        let Ok(c) = CString::new(name) else {
            return Err(ERROR_NOT_FOUND);
        };
        let (mut addr, mut size) = (0u64, 0usize);
        let r = match (kind, self.t.driver.library_get_global) {
            // SAFETY: valid out-pointers; handle is a loaded module of this process.
            (ModuleKind::Module, _) => unsafe {
                (self.t.driver.module_get_global)(
                    &mut addr,
                    &mut size,
                    handle as CUmodule,
                    c.as_ptr(),
                )
            },
            // SAFETY: as above, for a library handle.
            (ModuleKind::Library, Some(get)) => unsafe {
                get(&mut addr, &mut size, handle as CUlibrary, c.as_ptr())
            },
            (ModuleKind::Library, None) => ERROR_NOT_FOUND,
        };
        if r == SUCCESS {
            Ok((addr, size))
        } else {
            Err(r)
        }
    }

    /// Every writable module variable of every loaded module, resolved now. A name the
    /// driver does not find is placed from its cubin section offset when another variable of
    /// the same section resolved (the driver loads a section as one block); otherwise the
    /// enumeration fails and the snapshot is declined.
    pub fn resolve_module_variables(&self) -> Result<Vec<ModuleVar>, BackendError> {
        let modules = self
            .t
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut out = Vec::new();
        for m in &modules {
            if let Some(vars) = m.resolved.get() {
                out.extend(vars.iter().cloned());
                continue;
            }
            let first = out.len();
            let globals = m
                .globals
                .as_ref()
                .map_err(|_| BackendError::Missing("the names of a module's variables"))?;
            let call = match m.kind {
                ModuleKind::Module => "cuModuleGetGlobal_v2",
                ModuleKind::Library => "cuLibraryGetGlobal",
            };
            let mut bases: std::collections::HashMap<u16, u64> = Default::default();
            let mut missing = Vec::new();
            let mut found = Vec::new();
            for g in globals {
                match self.resolve(m.kind, m.handle, &g.name) {
                    Ok((addr, size)) => {
                        if g.section != 0 && addr != 0 {
                            bases
                                .entry(g.section)
                                .or_insert(addr.wrapping_sub(g.offset));
                        }
                        found.push((g, addr, size));
                    }
                    Err(status) => missing.push((g, status)),
                }
            }
            for (g, status) in missing {
                let placed = bases
                    .get(&g.section)
                    .filter(|_| g.section != 0 && g.size > 0)
                    .map(|base| base.wrapping_add(g.offset))
                    // The computed range must lie in memory the driver knows.
                    .filter(|&addr| {
                        self.pointer_attributes(addr).is_some_and(|i| {
                            i.base <= addr && addr + g.size <= i.base.saturating_add(i.size)
                        })
                    });
                match placed {
                    Some(addr) => {
                        tracing::debug!(
                            "kreplay: module variable {} placed at {addr:#x} from its section offset",
                            g.name
                        );
                        found.push((g, addr, g.size as usize))
                    }
                    _ => {
                        tracing::warn!(
                            "kreplay: module variable {} of module {:#x}: {call} returned {status} and no variable of its section resolved",
                            g.name,
                            m.handle
                        );
                        return Err(BackendError::Call { call, status });
                    }
                }
            }
            for (g, addr, size) in found {
                if addr == 0 || size == 0 {
                    continue;
                }
                if size > MAX_VARIABLE {
                    tracing::warn!(
                        "kreplay: module variable {} is {size} bytes (> 1 GiB): not snapshotted",
                        g.name
                    );
                    continue;
                }
                out.push(ModuleVar {
                    addr,
                    size: size as u64,
                    constant: g.constant,
                    name: g.name.clone(),
                });
            }
            let _ = m.resolved.set(out[first..].to_vec());
        }
        Ok(out)
    }

    /// Pinned host memory.
    pub fn pinned_alloc(&self, len: usize) -> Option<HostBuf> {
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let r = unsafe { (self.t.driver.mem_alloc_host)(&mut p, len.max(1)) };
        (r == SUCCESS && !p.is_null()).then_some(HostBuf {
            ptr: p as *mut u8,
            len,
        })
    }

    /// Frees pinned host memory.
    pub fn pinned_free(&self, buf: HostBuf) {
        // SAFETY: buf came from cuMemAllocHost_v2.
        let _ = unsafe { (self.t.driver.mem_free_host)(buf.ptr as *mut c_void) };
    }

    /// `cuPointerGetAttributes` for the engine's classification.
    pub fn pointer_attributes(&self, ptr: u64) -> Option<PointerInfo> {
        let mut kind: u32 = 0;
        let mut start: u64 = 0;
        let mut size: usize = 0;
        let mut ordinal: i32 = -1;
        let mut attrs: [c_uint; 4] = [
            ATTR_MEMORY_TYPE,
            ATTR_RANGE_START_ADDR,
            ATTR_RANGE_SIZE,
            ATTR_DEVICE_ORDINAL,
        ];
        let mut data: [*mut c_void; 4] = [
            &mut kind as *mut u32 as *mut c_void,
            &mut start as *mut u64 as *mut c_void,
            &mut size as *mut usize as *mut c_void,
            &mut ordinal as *mut i32 as *mut c_void,
        ];
        // SAFETY: four attributes, each with a correctly sized out-value.
        let r = unsafe {
            (self.t.driver.pointer_get_attributes)(4, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr)
        };
        (r == SUCCESS && kind != 0).then_some(PointerInfo {
            kind,
            base: start,
            size: size as u64,
            owner: ordinal.max(0) as u64,
            global_flags: None,
        })
    }
}

impl Backend for CudaBackend<'_> {
    type Dispatch = Launch;

    fn host_alloc(&self, len: usize) -> Option<HostBuf> {
        self.pinned_alloc(len)
    }

    fn host_free(&self, buf: HostBuf) {
        self.pinned_free(buf)
    }

    fn copy_d2h(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), BackendError> {
        // SAFETY: dst holds len bytes (engine's contract); src is tracked device memory.
        check("cuMemcpyDtoH_v2", unsafe {
            (self.t.driver.memcpy_dtoh)(dst as *mut c_void, src, len)
        })
    }

    fn copy_h2d(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        // SAFETY: src holds len bytes (engine's contract); dst is tracked device memory.
        check("cuMemcpyHtoD_v2", unsafe {
            (self.t.driver.memcpy_htod)(dst, src as *const c_void, len)
        })
    }

    fn module_variables(&self, _agent: u64) -> Result<Vec<ModuleVar>, BackendError> {
        self.resolve_module_variables()
    }

    fn submit_wait(&self, d: &Launch) -> Result<(), BackendError> {
        // SAFETY: the engine submits only the launch the wrapper handed it, during that call.
        let r = unsafe { d.submit() };
        self.launched(r)?;
        self.synchronize()
    }

    fn submit_wait_timed(&self, d: &Launch) -> Result<Option<u64>, BackendError> {
        let (_, _, stream) = d.geometry();
        let timed = self.timer.start(stream);
        // SAFETY: as in submit_wait.
        let r = unsafe { d.submit() };
        self.launched(r)?;
        let timed = timed && self.timer.stop(stream);
        self.synchronize()?;
        Ok(if timed { self.timer.elapsed_ns() } else { None })
    }

    fn device_alloc(&self, len: usize) -> Option<u64> {
        self.device_alloc_copy(len)
    }

    fn device_free(&self, ptr: u64) {
        self.device_free_piece(ptr)
    }

    fn device_alloc_each(&self, lens: &[usize]) -> Option<Vec<u64>> {
        self.device_alloc_pieces(lens)
    }

    fn copy_d2d(&self, dst: u64, src: u64, len: usize) -> Result<(), BackendError> {
        self.dtod(dst, src, len)
    }

    fn copy_d2d_runs(&self, runs: &[(u64, u64, usize)]) -> Result<bool, BackendError> {
        self.copy_runs_on_device(runs)
    }

    fn copy_pinned_runs(&self, runs: &[(u64, *const u8, usize)]) -> Result<bool, BackendError> {
        // Memory from cuMemAllocHost is mapped into the device's unified address space at
        // the same address, so the run-copy kernel reads it directly (over the host link).
        let ranges: Vec<(u64, u64, usize)> = runs
            .iter()
            .map(|&(dst, src, len)| (dst, src as u64, len))
            .collect();
        self.copy_runs_on_device(&ranges)
    }
}
