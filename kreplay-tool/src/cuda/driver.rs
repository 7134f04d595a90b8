//! libcuda, loaded at run time (libloading; no build-time CUDA dependency): the real driver
//! entries kreplay itself calls, resolved through the driver's own `cuGetProcAddress_v2` so they
//! are never kreplay's wrappers, whatever the process's symbol interposition.

use core::ffi::{CStr, c_void};

use super::ffi::*;
use super::real_dlsym::real_dlsym;

/// The CUDA ABI version kreplay asks the driver for (the signatures in [`super::ffi`]).
pub const ABI_VERSION: i32 = 12_000;
/// The version that has `cuFuncGetName`/`cuKernelGetName`.
const NAMES_VERSION: i32 = 12_030;
/// The driver version that added `cuFuncGetParamInfo` and `cuKernelGetParamInfo`.
const PARAM_INFO_VERSION: i32 = 12_040;

/// Why libcuda could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// dlopen failed.
    #[error("dlopen(libcuda.so.1) failed: {0}")]
    Open(String),
    /// A required entry is missing.
    #[error("cuGetProcAddress_v2({0}) found nothing")]
    Missing(&'static str),
}

/// The real driver entries.
pub struct Driver {
    _lib: libloading::Library,
    get_proc: GetProcAddressV2Fn,
    /// `cuLaunchKernel`.
    pub launch_kernel: LaunchKernelFn,
    /// `cuLaunchKernelEx`, where the driver has it.
    pub launch_kernel_ex: Option<LaunchKernelExFn>,
    /// `cuMemAlloc_v2`.
    pub mem_alloc: MemAllocFn,
    /// `cuMemFree_v2`.
    pub mem_free: MemFreeFn,
    /// `cuMemAllocHost_v2`.
    pub mem_alloc_host: MemAllocHostFn,
    /// `cuMemFreeHost`.
    pub mem_free_host: MemFreeHostFn,
    /// `cuMemHostAlloc`, where the driver has it.
    pub mem_host_alloc: Option<MemHostAllocFn>,
    /// `cuMemHostGetDevicePointer_v2`, where the driver has it.
    pub mem_host_get_device_pointer: Option<MemHostGetDevicePointerFn>,
    /// `cuStreamQuery`, where the driver has it.
    pub stream_query: Option<StreamQueryFn>,
    /// The entries that capture kreplay's own launches into a graph, where the driver has
    /// them all.
    pub graphs: Option<GraphEntries>,
    /// The event entries that time a replay pass on the GPU, where the driver has them all.
    pub events: Option<EventEntries>,
    /// `cuMemcpyDtoH_v2`.
    pub memcpy_dtoh: MemcpyDtoHFn,
    /// `cuMemcpyHtoD_v2`.
    pub memcpy_htod: MemcpyHtoDFn,
    /// `cuMemcpyDtoD_v2`.
    pub memcpy_dtod: MemcpyDtoDFn,
    /// `cuMemGetInfo_v2`.
    pub mem_get_info: MemGetInfoFn,
    /// `cuPointerGetAttributes`.
    pub pointer_get_attributes: PointerGetAttributesFn,
    /// `cuCtxSynchronize`.
    pub ctx_synchronize: CtxSynchronizeFn,
    /// `cuCtxGetDevice`.
    pub ctx_get_device: CtxGetDeviceFn,
    /// `cuCtxGetCurrent`.
    pub ctx_get_current: CtxGetCurrentFn,
    /// `cuModuleLoadData` (kreplay's own kernels).
    pub module_load_data: ModuleLoadDataFn,
    /// `cuModuleGetFunction`.
    pub module_get_function: ModuleGetFunctionFn,
    /// `cuStreamIsCapturing`.
    pub stream_is_capturing: StreamIsCapturingFn,
    /// `cuModuleGetGlobal_v2`.
    pub module_get_global: ModuleGetGlobalFn,
    /// `cuLibraryGetGlobal`, where the driver has it.
    pub library_get_global: Option<LibraryGetGlobalFn>,
    /// `cuFuncGetName`, where the driver has it.
    pub func_get_name: Option<GetNameFn>,
    /// `cuKernelGetName`, where the driver has it.
    pub kernel_get_name: Option<GetNameFn>,
    /// `cuFuncGetParamInfo` (CUDA 12.4+).
    pub func_get_param_info: Option<ParamInfoFn>,
    /// `cuKernelGetParamInfo` (CUDA 12.4+).
    pub kernel_get_param_info: Option<ParamInfoFn>,
    /// `cuCtxSetCurrent`.
    pub ctx_set_current: Option<CtxSetCurrentFn>,
}

/// The real graph entries kreplay uses to replay its own pair of restore kernels as one graph.
pub struct GraphEntries {
    /// `cuStreamCreate`.
    pub stream_create: StreamCreateFn,
    /// `cuStreamDestroy_v2`.
    pub stream_destroy: StreamDestroyFn,
    /// `cuStreamBeginCapture_v2`.
    pub begin_capture: StreamBeginCaptureFn,
    /// `cuStreamEndCapture`.
    pub end_capture: StreamEndCaptureFn,
    /// `cuGraphInstantiateWithFlags`.
    pub instantiate: GraphInstantiateFn,
    /// `cuGraphLaunch` (the driver's, never kreplay's wrapper).
    pub launch: GraphLaunchFn,
    /// `cuGraphUpload`.
    pub upload: GraphUploadFn,
    /// `cuGraphExecDestroy`.
    pub exec_destroy: GraphExecDestroyFn,
    /// `cuGraphDestroy`.
    pub destroy: GraphDestroyFn,
}

/// The driver's events, as kreplay times a replay pass with them.
#[derive(Clone, Copy)]
pub struct EventEntries {
    /// `cuEventCreate`.
    pub create: EventCreateFn,
    /// `cuEventRecord`.
    pub record: EventRecordFn,
    /// `cuEventElapsedTime`.
    pub elapsed: EventElapsedTimeFn,
    /// `cuEventDestroy_v2`.
    pub destroy: EventDestroyFn,
}

/// Opens libcuda.so.1 (kept open by the returned library) and finds its `cuGetProcAddress_v2`,
/// through which every other entry kreplay calls is resolved.
pub fn open() -> Result<(libloading::Library, GetProcAddressV2Fn), DriverError> {
    // SAFETY: loading the NVIDIA driver library runs its initializers, as the application's
    // own use of CUDA already did (kreplay only gets here from an intercepted CUDA call, or
    // from CUPTI's records of one).
    let lib = unsafe { libloading::os::unix::Library::open(Some("libcuda.so.1"), libc::RTLD_NOW) }
        .map_err(|e| DriverError::Open(e.to_string()))?;
    let handle = lib.into_raw();
    // SAFETY: handle is live; real_dlsym bypasses kreplay's own dlsym wrapper.
    let gp = unsafe { real_dlsym(handle, c"cuGetProcAddress_v2") };
    // SAFETY: handle came from dlopen above; rewrapped so it is closed on drop.
    let lib: libloading::Library =
        unsafe { libloading::os::unix::Library::from_raw(handle) }.into();
    if gp.is_null() {
        return Err(DriverError::Missing("cuGetProcAddress_v2"));
    }
    // SAFETY: the driver's cuGetProcAddress_v2 has this signature (cuda.h).
    Ok((lib, unsafe {
        core::mem::transmute::<*mut c_void, GetProcAddressV2Fn>(gp)
    }))
}

/// The driver's entry `name` for ABI `version` (null when it has none).
pub fn find(get_proc: GetProcAddressV2Fn, name: &CStr, version: i32) -> *mut c_void {
    let mut p: *mut c_void = core::ptr::null_mut();
    let mut status = 0;
    // SAFETY: valid out-pointers; name is NUL-terminated.
    let r = unsafe {
        get_proc(
            name.as_ptr(),
            &mut p,
            version,
            PROC_ADDRESS_DEFAULT,
            &mut status,
        )
    };
    if r == SUCCESS {
        p
    } else {
        core::ptr::null_mut()
    }
}

impl Driver {
    /// Opens libcuda.so.1 and resolves the entries.
    pub fn load() -> Result<Driver, DriverError> {
        let (lib, get_proc) = open()?;
        let find = |name: &CStr, version: i32| find(get_proc, name, version);
        macro_rules! need {
            ($name:literal, $ty:ty) => {{
                let p = find($name, ABI_VERSION);
                if p.is_null() {
                    return Err(DriverError::Missing(stringify!($name)));
                }
                // SAFETY: the driver's entry for this name at ABI_VERSION has type $ty.
                unsafe { core::mem::transmute::<*mut c_void, $ty>(p) }
            }};
        }
        macro_rules! maybe {
            ($name:literal, $ver:expr, $ty:ty) => {{
                let p = find($name, $ver);
                // SAFETY: as in need!; null stays None.
                (!p.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, $ty>(p) })
            }};
        }
        Ok(Driver {
            get_proc,
            launch_kernel: need!(c"cuLaunchKernel", LaunchKernelFn),
            launch_kernel_ex: maybe!(c"cuLaunchKernelEx", ABI_VERSION, LaunchKernelExFn),
            mem_alloc: need!(c"cuMemAlloc", MemAllocFn),
            mem_free: need!(c"cuMemFree", MemFreeFn),
            mem_alloc_host: need!(c"cuMemAllocHost", MemAllocHostFn),
            mem_free_host: need!(c"cuMemFreeHost", MemFreeHostFn),
            mem_host_alloc: maybe!(c"cuMemHostAlloc", ABI_VERSION, MemHostAllocFn),
            mem_host_get_device_pointer: maybe!(
                c"cuMemHostGetDevicePointer",
                ABI_VERSION,
                MemHostGetDevicePointerFn
            ),
            stream_query: maybe!(c"cuStreamQuery", ABI_VERSION, StreamQueryFn),
            graphs: (|| {
                Some(GraphEntries {
                    stream_create: maybe!(c"cuStreamCreate", ABI_VERSION, StreamCreateFn)?,
                    stream_destroy: maybe!(c"cuStreamDestroy", ABI_VERSION, StreamDestroyFn)?,
                    begin_capture: maybe!(
                        c"cuStreamBeginCapture",
                        ABI_VERSION,
                        StreamBeginCaptureFn
                    )?,
                    end_capture: maybe!(c"cuStreamEndCapture", ABI_VERSION, StreamEndCaptureFn)?,
                    instantiate: maybe!(
                        c"cuGraphInstantiateWithFlags",
                        ABI_VERSION,
                        GraphInstantiateFn
                    )?,
                    launch: maybe!(c"cuGraphLaunch", ABI_VERSION, GraphLaunchFn)?,
                    upload: maybe!(c"cuGraphUpload", ABI_VERSION, GraphUploadFn)?,
                    exec_destroy: maybe!(c"cuGraphExecDestroy", ABI_VERSION, GraphExecDestroyFn)?,
                    destroy: maybe!(c"cuGraphDestroy", ABI_VERSION, GraphDestroyFn)?,
                })
            })(),
            events: (|| {
                Some(EventEntries {
                    create: maybe!(c"cuEventCreate", ABI_VERSION, EventCreateFn)?,
                    record: maybe!(c"cuEventRecord", ABI_VERSION, EventRecordFn)?,
                    elapsed: maybe!(c"cuEventElapsedTime", ABI_VERSION, EventElapsedTimeFn)?,
                    destroy: maybe!(c"cuEventDestroy", ABI_VERSION, EventDestroyFn)?,
                })
            })(),
            memcpy_dtoh: need!(c"cuMemcpyDtoH", MemcpyDtoHFn),
            memcpy_htod: need!(c"cuMemcpyHtoD", MemcpyHtoDFn),
            memcpy_dtod: need!(c"cuMemcpyDtoD", MemcpyDtoDFn),
            mem_get_info: need!(c"cuMemGetInfo", MemGetInfoFn),
            pointer_get_attributes: need!(c"cuPointerGetAttributes", PointerGetAttributesFn),
            ctx_synchronize: need!(c"cuCtxSynchronize", CtxSynchronizeFn),
            ctx_get_device: need!(c"cuCtxGetDevice", CtxGetDeviceFn),
            ctx_get_current: need!(c"cuCtxGetCurrent", CtxGetCurrentFn),
            module_load_data: need!(c"cuModuleLoadData", ModuleLoadDataFn),
            module_get_function: need!(c"cuModuleGetFunction", ModuleGetFunctionFn),
            stream_is_capturing: need!(c"cuStreamIsCapturing", StreamIsCapturingFn),
            module_get_global: need!(c"cuModuleGetGlobal", ModuleGetGlobalFn),
            library_get_global: maybe!(c"cuLibraryGetGlobal", ABI_VERSION, LibraryGetGlobalFn),
            func_get_name: maybe!(c"cuFuncGetName", NAMES_VERSION, GetNameFn),
            kernel_get_name: maybe!(c"cuKernelGetName", NAMES_VERSION, GetNameFn),
            func_get_param_info: maybe!(c"cuFuncGetParamInfo", PARAM_INFO_VERSION, ParamInfoFn),
            kernel_get_param_info: maybe!(c"cuKernelGetParamInfo", PARAM_INFO_VERSION, ParamInfoFn),
            ctx_set_current: maybe!(c"cuCtxSetCurrent", ABI_VERSION, CtxSetCurrentFn),
            _lib: lib,
        })
    }

    /// The real entry `name` for `version` and `flags` (what the application asked for).
    pub fn proc_address(&self, name: &CStr, version: i32, flags: u64) -> *mut c_void {
        let mut p: *mut c_void = core::ptr::null_mut();
        let mut status = 0;
        // SAFETY: valid out-pointers; name is NUL-terminated.
        let r = unsafe { (self.get_proc)(name.as_ptr(), &mut p, version, flags, &mut status) };
        if r == SUCCESS {
            p
        } else {
            core::ptr::null_mut()
        }
    }

    /// Whether `stream` is being captured into a graph (a launch there only records a node).
    pub fn capturing(&self, stream: u64) -> bool {
        let mut st: core::ffi::c_uint = 0;
        // SAFETY: valid out-pointer; the driver validates the stream handle (the application's).
        let r = unsafe { (self.stream_is_capturing)(stream as CUstream, &mut st) };
        r != SUCCESS || st != 0
    }

    /// The current context's device ordinal (0 when there is none).
    pub fn current_device(&self) -> u64 {
        let mut d = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { (self.ctx_get_device)(&mut d) };
        if r == SUCCESS { d.max(0) as u64 } else { 0 }
    }
}
