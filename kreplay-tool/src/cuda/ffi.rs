//! The slice of the CUDA driver ABI kreplay-tool uses: handle types, status codes, pointer
//! attributes, launch configuration and the function-pointer types of every entry it calls
//! or wraps. Signatures follow `cuda.h` (CUDA 12/13); nothing here links against libcuda.

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `CUresult`.
pub type CUresult = c_uint;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;
/// `CUfunction` (also accepts a `CUkernel` handle in launches, CUDA 12+).
pub type CUfunction = *mut c_void;
/// `CUstream`.
pub type CUstream = *mut c_void;
/// `CUmodule`.
pub type CUmodule = *mut c_void;
/// `CUlibrary`.
pub type CUlibrary = *mut c_void;
/// `CUgraphExec`.
pub type CUgraphExec = *mut c_void;
/// `CUgraph`.
pub type CUgraph = *mut c_void;
/// `CUcontext`.
pub type CUcontext = *mut c_void;
/// `CUmemoryPool`.
pub type CUmemoryPool = *mut c_void;

/// `CUDA_SUCCESS`.
pub const SUCCESS: CUresult = 0;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const ERROR_OUT_OF_MEMORY: CUresult = 2;
/// `CUDA_ERROR_NOT_INITIALIZED`.
pub const ERROR_NOT_INITIALIZED: CUresult = 3;
/// `CUDA_ERROR_NOT_FOUND`.
pub const ERROR_NOT_FOUND: CUresult = 500;
/// `CUDA_ERROR_NOT_READY` (`cuStreamQuery`: work still pending).
pub const ERROR_NOT_READY: CUresult = 600;
/// `CU_MEMHOSTALLOC_DEVICEMAP`: pinned host memory mapped into the device's address space.
pub const MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
/// `CU_STREAM_NON_BLOCKING`: a stream that does not synchronize with the legacy default stream.
pub const STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`: a capture that forbids no other thread's calls.
pub const STREAM_CAPTURE_MODE_RELAXED: c_uint = 2;

/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (value: `CUmemorytype`, u32).
pub const ATTR_MEMORY_TYPE: c_uint = 2;
/// `CU_POINTER_ATTRIBUTE_IS_MANAGED` (value: u32 bool).
pub const ATTR_IS_MANAGED: c_uint = 8;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (value: int).
pub const ATTR_DEVICE_ORDINAL: c_uint = 9;
/// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR` (value: CUdeviceptr).
pub const ATTR_RANGE_START_ADDR: c_uint = 11;
/// `CU_POINTER_ATTRIBUTE_RANGE_SIZE` (value: size_t).
pub const ATTR_RANGE_SIZE: c_uint = 12;
/// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
pub const STREAM_PER_THREAD: usize = 0x2;
/// `CU_LAUNCH_PARAM_END` (in a launch's `extra`).
pub const LAUNCH_PARAM_END: usize = 0x0;
/// `CU_LAUNCH_PARAM_BUFFER_POINTER` (in a launch's `extra`: the packed parameter buffer).
pub const LAUNCH_PARAM_BUFFER_POINTER: usize = 0x1;
/// `CU_LAUNCH_PARAM_BUFFER_SIZE` (in a launch's `extra`: a pointer to its size).
pub const LAUNCH_PARAM_BUFFER_SIZE: usize = 0x2;
/// `CU_MEMORYTYPE_HOST` (page-locked host memory the driver knows).
pub const MEMORYTYPE_HOST: u32 = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const MEMORYTYPE_DEVICE: u32 = 2;

/// `CU_GET_PROC_ADDRESS_DEFAULT`.
pub const PROC_ADDRESS_DEFAULT: u64 = 0;

/// `CUlaunchConfig` of `cuLaunchKernelEx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUlaunchConfig {
    /// Grid width in blocks.
    pub grid_dim_x: c_uint,
    /// Grid height in blocks.
    pub grid_dim_y: c_uint,
    /// Grid depth in blocks.
    pub grid_dim_z: c_uint,
    /// Block width in threads.
    pub block_dim_x: c_uint,
    /// Block height in threads.
    pub block_dim_y: c_uint,
    /// Block depth in threads.
    pub block_dim_z: c_uint,
    /// Dynamic shared memory bytes.
    pub shared_mem_bytes: c_uint,
    /// Stream.
    pub h_stream: CUstream,
    /// Launch attributes (`CUlaunchAttribute*`).
    pub attrs: *mut c_void,
    /// Number of attributes.
    pub num_attrs: c_uint,
}

/// `cuLaunchKernel` (and its `_ptsz` variant).
pub type LaunchKernelFn = unsafe extern "C" fn(
    CUfunction,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    CUstream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CUresult;
/// `cuLaunchKernelEx` (and `_ptsz`).
pub type LaunchKernelExFn = unsafe extern "C" fn(
    *const CUlaunchConfig,
    CUfunction,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CUresult;
/// `cuMemAlloc_v2`.
pub type MemAllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
/// `cuMemFree_v2`.
pub type MemFreeFn = unsafe extern "C" fn(CUdeviceptr) -> CUresult;
/// `cuMemAllocAsync` (and `_ptsz`).
pub type MemAllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
/// `cuMemAllocFromPoolAsync` (and `_ptsz`).
pub type MemAllocFromPoolAsyncFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult;
/// `cuMemFreeAsync` (and `_ptsz`).
pub type MemFreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;
/// `cuMemAllocManaged`.
pub type MemAllocManagedFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CUresult;
/// `cuMemcpyDtoH_v2`.
pub type MemcpyDtoHFn = unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> CUresult;
/// `cuMemcpyHtoD_v2`.
pub type MemcpyHtoDFn = unsafe extern "C" fn(CUdeviceptr, *const c_void, usize) -> CUresult;
/// `cuMemcpyDtoD_v2`.
pub type MemcpyDtoDFn = unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize) -> CUresult;
/// `cuMemAllocHost_v2`.
pub type MemAllocHostFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult;
/// `cuMemFreeHost`.
pub type MemFreeHostFn = unsafe extern "C" fn(*mut c_void) -> CUresult;
/// `cuMemHostAlloc`.
pub type MemHostAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult;
/// `cuMemHostGetDevicePointer_v2`.
pub type MemHostGetDevicePointerFn =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult;
/// `cuStreamQuery`.
pub type StreamQueryFn = unsafe extern "C" fn(CUstream) -> CUresult;
/// `CUevent`.
pub type CUevent = *mut c_void;
/// `cuEventCreate` (event, `CUevent_flags`).
pub type EventCreateFn = unsafe extern "C" fn(*mut CUevent, c_uint) -> CUresult;
/// `cuEventRecord`.
pub type EventRecordFn = unsafe extern "C" fn(CUevent, CUstream) -> CUresult;
/// `cuEventElapsedTime` (milliseconds between two completed events).
pub type EventElapsedTimeFn = unsafe extern "C" fn(*mut f32, CUevent, CUevent) -> CUresult;
/// `cuEventDestroy_v2`.
pub type EventDestroyFn = unsafe extern "C" fn(CUevent) -> CUresult;
/// `cuStreamCreate`.
pub type StreamCreateFn = unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult;
/// `cuStreamDestroy_v2`.
pub type StreamDestroyFn = unsafe extern "C" fn(CUstream) -> CUresult;
/// `cuStreamBeginCapture_v2` (stream, `CUstreamCaptureMode`).
pub type StreamBeginCaptureFn = unsafe extern "C" fn(CUstream, c_uint) -> CUresult;
/// `cuStreamEndCapture`.
pub type StreamEndCaptureFn = unsafe extern "C" fn(CUstream, *mut CUgraph) -> CUresult;
/// `cuGraphInstantiateWithFlags`.
pub type GraphInstantiateFn = unsafe extern "C" fn(*mut CUgraphExec, CUgraph, u64) -> CUresult;
/// `cuGraphUpload`.
pub type GraphUploadFn = unsafe extern "C" fn(CUgraphExec, CUstream) -> CUresult;
/// `cuGraphExecDestroy`.
pub type GraphExecDestroyFn = unsafe extern "C" fn(CUgraphExec) -> CUresult;
/// `cuGraphDestroy`.
pub type GraphDestroyFn = unsafe extern "C" fn(CUgraph) -> CUresult;
/// `cuMemGetInfo_v2`.
pub type MemGetInfoFn = unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult;
/// `cuPointerGetAttributes`.
pub type PointerGetAttributesFn =
    unsafe extern "C" fn(c_uint, *mut c_uint, *mut *mut c_void, CUdeviceptr) -> CUresult;
/// `cuStreamSynchronize`.
pub type StreamSynchronizeFn = unsafe extern "C" fn(CUstream) -> CUresult;
/// `cuCtxSynchronize`.
pub type CtxSynchronizeFn = unsafe extern "C" fn() -> CUresult;
/// `cuCtxGetDevice`.
pub type CtxGetDeviceFn = unsafe extern "C" fn(*mut c_int) -> CUresult;
/// `cuDeviceGetCount`.
pub type DeviceGetCountFn = unsafe extern "C" fn(*mut c_int) -> CUresult;
/// `cuDeviceGet`.
pub type DeviceGetFn = unsafe extern "C" fn(*mut c_int, c_int) -> CUresult;
/// `cuDeviceGetName`.
pub type DeviceGetNameFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CUresult;
/// `cuModuleGetGlobal_v2`.
pub type ModuleGetGlobalFn =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUmodule, *const c_char) -> CUresult;
/// `cuLibraryGetGlobal`.
pub type LibraryGetGlobalFn =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUlibrary, *const c_char) -> CUresult;
/// `cuFuncGetName` / `cuKernelGetName`.
pub type GetNameFn = unsafe extern "C" fn(*mut *const c_char, *mut c_void) -> CUresult;
/// `cuFuncGetParamInfo` / `cuKernelGetParamInfo` (CUDA 12.4+): a parameter's offset and size.
pub type ParamInfoFn = unsafe extern "C" fn(*mut c_void, usize, *mut usize, *mut usize) -> CUresult;
/// `cuCtxSetCurrent`.
pub type CtxSetCurrentFn = unsafe extern "C" fn(CUcontext) -> CUresult;
/// `cuModuleLoadData` (and `cuModuleLoadFatBinary`, which has the same signature).
pub type ModuleLoadDataFn = unsafe extern "C" fn(*mut CUmodule, *const c_void) -> CUresult;
/// `cuModuleLoadDataEx`.
pub type ModuleLoadDataExFn = unsafe extern "C" fn(
    *mut CUmodule,
    *const c_void,
    c_uint,
    *mut c_int,
    *mut *mut c_void,
) -> CUresult;
/// `cuLibraryLoadData`.
pub type LibraryLoadDataFn = unsafe extern "C" fn(
    *mut CUlibrary,
    *const c_void,
    *mut c_int,
    *mut *mut c_void,
    c_uint,
    *mut c_int,
    *mut *mut c_void,
    c_uint,
) -> CUresult;
/// `cuModuleUnload`.
pub type ModuleUnloadFn = unsafe extern "C" fn(CUmodule) -> CUresult;
/// `cuLibraryUnload`.
pub type LibraryUnloadFn = unsafe extern "C" fn(CUlibrary) -> CUresult;
/// `cuGraphLaunch` (and `_ptsz`).
pub type GraphLaunchFn = unsafe extern "C" fn(CUgraphExec, CUstream) -> CUresult;
/// `cuGetProcAddress_v2`.
pub type GetProcAddressV2Fn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
/// `cuGetProcAddress` (CUDA 11.3 – 12.x signature).
pub type GetProcAddressFn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
/// `cuStreamIsCapturing` (status 0: not capturing).
pub type StreamIsCapturingFn = unsafe extern "C" fn(CUstream, *mut c_uint) -> CUresult;
/// `cuCtxGetCurrent`.
pub type CtxGetCurrentFn = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
/// `cuModuleGetFunction`.
pub type ModuleGetFunctionFn =
    unsafe extern "C" fn(*mut CUfunction, CUmodule, *const c_char) -> CUresult;
/// `cuMemMap`.
pub type MemMapFn = unsafe extern "C" fn(CUdeviceptr, usize, usize, u64, u64) -> CUresult;
/// `cuMemCreate`.
pub type MemCreateFn =
    unsafe extern "C" fn(*mut u64, usize, *const core::ffi::c_void, u64) -> CUresult;
/// `cuMemUnmap`.
pub type MemUnmapFn = unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult;
/// `cuMemAllocPitch_v2`.
pub type MemAllocPitchFn =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, c_uint) -> CUresult;
