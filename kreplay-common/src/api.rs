//! The GPU runtime entry points kreplay probes, and what each argument means.
//!
//! An [`ApiSpec`] says which library exports a function, what kind of call it is and where its
//! interesting arguments live (x86-64 SysV: indexes 0–5 are the argument registers, 6 and up
//! are the stack words after the return address). The BPF program gets the few facts it needs
//! packed into the attach cookie ([`crate::probe::Cookie`]); userspace decodes the rest.

/// Identifier of a probed API, carried in every call record.
pub type ApiId = u16;

/// The runtime library family that exports an API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Library {
    /// AMD HSA runtime, `libhsa-runtime64.so.1`.
    Hsa = 0,
    /// AMD HIP runtime, `libamdhip64.so.*`.
    Hip = 1,
    /// NVIDIA CUDA driver, `libcuda.so.1`.
    Cuda = 2,
    /// NVIDIA CUDA runtime, `libcudart.so.*`.
    CudaRt = 3,
    /// A function the user named on the command line (`kreplay probe`).
    User = 4,
    /// ROCm's annotation library, `libroctx64.so.*`.
    Roctx = 5,
}

/// What an API call does, for summaries and for the live-allocation inventory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ApiKind {
    /// Allocates device-visible memory; the result pointer is in `out` or the return value.
    Alloc = 0,
    /// Frees memory allocated by an `Alloc` call.
    Free = 1,
    /// Copies or sets memory.
    Copy = 2,
    /// Launches a kernel or a graph.
    Launch = 3,
    /// Waits for device work.
    Sync = 4,
    /// Creates or destroys a queue or stream.
    Queue = 5,
    /// Maps or unmaps virtual memory.
    Map = 6,
    /// Anything else (user-named functions).
    Other = 7,
    /// Names a kernel: a module function lookup or a host-stub registration (the name string is
    /// read at return, see [`ApiSpec::name_arg`]), or an alias of an already named handle.
    Symbol = 8,
    /// Sets the calling thread's current device (argument 0, the device ordinal).
    Device = 9,
    /// A user annotation (roctx): a range pushed, popped, started or stopped, or a mark; the
    /// message string is read at return like a kernel name ([`ApiSpec::name_arg`]).
    Annotate = 10,
}

/// Sentinel for "this API has no such argument".
pub const NO_ARG: u8 = u8::MAX;

/// Where the launch geometry of a launch API lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Geometry {
    /// No geometry.
    None,
    /// `hipLaunchKernel`-style: `dim3` grid and block by value, each split over two registers
    /// (x|y<<32 in the first, z in the second) starting at the given argument index.
    Dim3Pairs(u8),
    /// `cuLaunchKernel`-style: six scalar arguments gx, gy, gz, bx, by, bz from the given index.
    Scalars(u8),
    /// `cuLaunchKernelEx`: a `CUlaunchConfig*` in argument 0 whose first six u32 are the geometry.
    ConfigStruct,
}

/// Static description of one probed API.
#[derive(Clone, Copy, Debug)]
pub struct ApiSpec {
    /// Exported symbol name, exactly as in the library (also the trace slice name).
    pub name: &'static str,
    /// Library family exporting it.
    pub library: Library,
    /// Kind of call.
    pub kind: ApiKind,
    /// Argument index of the size in bytes, or [`NO_ARG`].
    pub size_arg: u8,
    /// Argument index of a row count the size is multiplied by (2D copies: width × height), or
    /// [`NO_ARG`].
    pub rows_arg: u8,
    /// Argument index of the pointer operated on (freed, destination of a copy), or [`NO_ARG`].
    pub ptr_arg: u8,
    /// Argument index of an out-pointer the call writes its result through, or [`NO_ARG`].
    pub out_arg: u8,
    /// Argument index of the stream or queue, or [`NO_ARG`].
    pub stream_arg: u8,
    /// Number of stack words (arguments 6, 7, ...) to capture at entry.
    pub stack_words: u8,
    /// Where the launch geometry lives, for launches.
    pub geometry: Geometry,
    /// Argument index of a NUL-terminated name string the BPF program reads at return (kernel
    /// lookups and registrations), or [`NO_ARG`].
    pub name_arg: u8,
    /// Argument index of the handle the name belongs to, or [`NO_ARG`] for "the value the
    /// out-pointer received".
    pub handle_arg: u8,
    /// Argument index of the kernel a launch runs (host stub address or function handle), or
    /// [`NO_ARG`].
    pub kernel_arg: u8,
    /// The function returns `void`: its return register is not a status.
    pub void_ret: bool,
}

const fn spec(name: &'static str, library: Library, kind: ApiKind) -> ApiSpec {
    ApiSpec {
        name,
        library,
        kind,
        size_arg: NO_ARG,
        rows_arg: NO_ARG,
        ptr_arg: NO_ARG,
        out_arg: NO_ARG,
        stream_arg: NO_ARG,
        stack_words: 0,
        geometry: Geometry::None,
        name_arg: NO_ARG,
        handle_arg: NO_ARG,
        kernel_arg: NO_ARG,
        void_ret: false,
    }
}

impl ApiSpec {
    /// The bytes a call allocates or moves, given a reader of its arguments: the size
    /// argument, times the row count for 2D copies; `None` when the API has no size.
    pub fn bytes(&self, arg: impl Fn(u8) -> u64) -> Option<u64> {
        if self.size_arg == NO_ARG {
            return None;
        }
        let size = arg(self.size_arg);
        Some(if self.rows_arg == NO_ARG {
            size
        } else {
            size.saturating_mul(arg(self.rows_arg))
        })
    }

    const fn size(mut self, i: u8) -> Self {
        self.size_arg = i;
        self
    }
    const fn rows(mut self, i: u8) -> Self {
        self.rows_arg = i;
        self
    }
    const fn ptr(mut self, i: u8) -> Self {
        self.ptr_arg = i;
        self
    }
    const fn out(mut self, i: u8) -> Self {
        self.out_arg = i;
        self
    }
    const fn stream(mut self, i: u8) -> Self {
        self.stream_arg = i;
        self
    }
    const fn stack(mut self, words: u8) -> Self {
        self.stack_words = words;
        self
    }
    const fn geometry(mut self, g: Geometry) -> Self {
        self.geometry = g;
        self
    }
    const fn name(mut self, i: u8) -> Self {
        self.name_arg = i;
        self
    }
    const fn handle(mut self, i: u8) -> Self {
        self.handle_arg = i;
        self
    }
    const fn kernel(mut self, i: u8) -> Self {
        self.kernel_arg = i;
        self
    }
    const fn void(mut self) -> Self {
        self.void_ret = true;
        self
    }
}

use ApiKind::*;
use Library::*;

/// Every API kreplay knows how to probe; an [`ApiId`] is an index into this table.
pub const APIS: &[ApiSpec] = &[
    // HSA (hsa.h, hsa_ext_amd.h).
    spec("hsa_amd_memory_pool_allocate", Hsa, Alloc)
        .size(1)
        .out(3),
    spec("hsa_amd_memory_pool_free", Hsa, Free).ptr(0),
    spec("hsa_memory_allocate", Hsa, Alloc).size(1).out(2),
    spec("hsa_memory_free", Hsa, Free).ptr(0),
    spec("hsa_amd_vmem_map", Hsa, Map).ptr(0).size(1),
    spec("hsa_amd_vmem_unmap", Hsa, Map).ptr(0).size(1),
    spec("hsa_amd_memory_async_copy", Hsa, Copy).ptr(0).size(4),
    spec("hsa_memory_copy", Hsa, Copy).ptr(0).size(2),
    // hsa_queue_create's eighth argument (the hsa_queue_t** result) is the second stack word.
    spec("hsa_queue_create", Hsa, Queue).size(1).out(7).stack(2),
    spec("hsa_queue_destroy", Hsa, Queue).ptr(0),
    // HIP (hip_runtime_api.h).
    spec("hipLaunchKernel", Hip, Launch)
        .kernel(0)
        .stream(7)
        .stack(2)
        .geometry(Geometry::Dim3Pairs(1)),
    spec("hipModuleLaunchKernel", Hip, Launch)
        .kernel(0)
        .stream(8)
        .stack(5)
        .geometry(Geometry::Scalars(1)),
    spec("hipExtLaunchKernel", Hip, Launch)
        .kernel(0)
        .stream(7)
        .stack(2)
        .geometry(Geometry::Dim3Pairs(1)),
    spec("hipGraphLaunch", Hip, Launch).stream(1),
    spec("hipMalloc", Hip, Alloc).out(0).size(1),
    spec("hipMallocAsync", Hip, Alloc).out(0).size(1).stream(2),
    spec("hipHostMalloc", Hip, Alloc).out(0).size(1),
    spec("hipFree", Hip, Free).ptr(0),
    spec("hipFreeAsync", Hip, Free).ptr(0).stream(1),
    spec("hipMemcpy", Hip, Copy).ptr(0).size(2),
    spec("hipMemcpyAsync", Hip, Copy).ptr(0).size(2).stream(4),
    spec("hipMemset", Hip, Copy).ptr(0).size(2),
    spec("hipStreamSynchronize", Hip, Sync).stream(0),
    spec("hipDeviceSynchronize", Hip, Sync),
    // CUDA driver (cuda.h).
    spec("cuLaunchKernel", Cuda, Launch)
        .kernel(0)
        .stream(8)
        .stack(5)
        .geometry(Geometry::Scalars(1)),
    spec("cuLaunchKernelEx", Cuda, Launch)
        .kernel(1)
        .geometry(Geometry::ConfigStruct),
    spec("cuGraphLaunch", Cuda, Launch).stream(1),
    spec("cuMemAlloc_v2", Cuda, Alloc).out(0).size(1),
    spec("cuMemFree_v2", Cuda, Free).ptr(0),
    spec("cuMemAllocAsync", Cuda, Alloc)
        .out(0)
        .size(1)
        .stream(2),
    spec("cuMemFreeAsync", Cuda, Free).ptr(0).stream(1),
    spec("cuMemcpy", Cuda, Copy).ptr(0).size(2),
    spec("cuMemcpyAsync", Cuda, Copy).ptr(0).size(2).stream(3),
    spec("cuMemcpyHtoD_v2", Cuda, Copy).ptr(0).size(2),
    spec("cuMemcpyDtoH_v2", Cuda, Copy).ptr(0).size(2),
    spec("cuMemcpyDtoD_v2", Cuda, Copy).ptr(0).size(2),
    spec("cuMemcpyHtoDAsync_v2", Cuda, Copy)
        .ptr(0)
        .size(2)
        .stream(3),
    spec("cuMemcpyDtoHAsync_v2", Cuda, Copy)
        .ptr(0)
        .size(2)
        .stream(3),
    spec("cuMemcpyDtoDAsync_v2", Cuda, Copy)
        .ptr(0)
        .size(2)
        .stream(3),
    spec("cuMemsetD8_v2", Cuda, Copy).ptr(0).size(2),
    spec("cuStreamSynchronize", Cuda, Sync).stream(0),
    spec("cuCtxSynchronize", Cuda, Sync),
    // Where kernel names come from. `__hipRegisterFunction(modules, hostFunction,
    // deviceFunction, deviceName, ...)` (hip_runtime_api.h's registration entry, called by a
    // HIP module's constructor) names the host stub `hipLaunchKernel` gets.
    spec("__hipRegisterFunction", Hip, Symbol)
        .name(3)
        .handle(1)
        .void(),
    // hipModuleGetFunction(hipFunction_t* out, hipModule_t, const char* name).
    spec("hipModuleGetFunction", Hip, Symbol).out(0).name(2),
    spec("hipSetDevice", Hip, Device),
    // cuModuleGetFunction(CUfunction* out, CUmodule, const char* name).
    spec("cuModuleGetFunction", Cuda, Symbol).out(0).name(2),
    // cuLibraryGetKernel(CUkernel* out, CUlibrary, const char* name): a CUkernel may be
    // launched as a CUfunction directly (CUDA 12).
    spec("cuLibraryGetKernel", Cuda, Symbol).out(0).name(2),
    // cuKernelGetFunction(CUfunction* out, CUkernel): the function gets the kernel's name.
    spec("cuKernelGetFunction", Cuda, Symbol).out(0).ptr(1),
    // CUDA runtime (cuda_runtime_api.h). cudaError_t is 0 on success, as CUresult is. A
    // `dim3` (three u32, 12 bytes) passed by value is two INTEGER eightbytes in the SysV ABI:
    // x|y<<32 in one register, z in the next, as hipLaunchKernel's. cudaLaunchKernel(func,
    // gridDim, blockDim, args, sharedMem, stream): func rdi, grid rsi/rdx, block rcx/r8, args
    // r9, sharedMem and stream the first two stack words.
    spec("cudaLaunchKernel", CudaRt, Launch)
        .kernel(0)
        .stream(7)
        .stack(2)
        .geometry(Geometry::Dim3Pairs(1)),
    // cudaLaunchKernelExC(const cudaLaunchConfig_t*, func, args): the config starts with
    // gridDim and blockDim, six u32 as CUlaunchConfig does.
    spec("cudaLaunchKernelExC", CudaRt, Launch)
        .kernel(1)
        .geometry(Geometry::ConfigStruct),
    spec("cudaLaunchCooperativeKernel", CudaRt, Launch)
        .kernel(0)
        .stream(7)
        .stack(2)
        .geometry(Geometry::Dim3Pairs(1)),
    spec("cudaGraphLaunch", CudaRt, Launch).stream(1),
    spec("cudaMalloc", CudaRt, Alloc).out(0).size(1),
    spec("cudaFree", CudaRt, Free).ptr(0),
    spec("cudaMallocAsync", CudaRt, Alloc)
        .out(0)
        .size(1)
        .stream(2),
    spec("cudaFreeAsync", CudaRt, Free).ptr(0).stream(1),
    spec("cudaMallocHost", CudaRt, Alloc).out(0).size(1),
    spec("cudaHostAlloc", CudaRt, Alloc).out(0).size(1),
    spec("cudaFreeHost", CudaRt, Free).ptr(0),
    spec("cudaMallocManaged", CudaRt, Alloc).out(0).size(1),
    // cudaMemcpy(dst, src, count, kind): the cudaMemcpyKind stays in the recorded arguments.
    spec("cudaMemcpy", CudaRt, Copy).ptr(0).size(2),
    spec("cudaMemcpyAsync", CudaRt, Copy)
        .ptr(0)
        .size(2)
        .stream(4),
    // cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind): width × height bytes; kind
    // is the first stack word.
    spec("cudaMemcpy2D", CudaRt, Copy)
        .ptr(0)
        .size(4)
        .rows(5)
        .stack(1),
    spec("cudaMemcpy2DAsync", CudaRt, Copy)
        .ptr(0)
        .size(4)
        .rows(5)
        .stream(7)
        .stack(2),
    // cudaMemcpyPeer(dst, dstDevice, src, srcDevice, count).
    spec("cudaMemcpyPeer", CudaRt, Copy).ptr(0).size(4),
    spec("cudaMemcpyPeerAsync", CudaRt, Copy)
        .ptr(0)
        .size(4)
        .stream(5),
    // cudaMemset(devPtr, value, count).
    spec("cudaMemset", CudaRt, Copy).ptr(0).size(2),
    spec("cudaMemsetAsync", CudaRt, Copy)
        .ptr(0)
        .size(2)
        .stream(3),
    spec("cudaStreamSynchronize", CudaRt, Sync).stream(0),
    spec("cudaEventSynchronize", CudaRt, Sync),
    spec("cudaDeviceSynchronize", CudaRt, Sync),
    spec("cudaSetDevice", CudaRt, Device),
    // roctx (roctx.h): annotations, not runtime calls. The message (argument 0) is read at
    // return; its pointer is the name record's handle. `void`: the pushes return a nesting
    // level, not a status, and the name is read whatever it is.
    spec("roctxRangePushA", Roctx, Annotate)
        .name(0)
        .handle(0)
        .void(),
    spec("roctxRangePop", Roctx, Annotate),
    spec("roctxMarkA", Roctx, Annotate).name(0).handle(0).void(),
    spec("roctxRangeStartA", Roctx, Annotate)
        .name(0)
        .handle(0)
        .void(),
    spec("roctxRangeStop", Roctx, Annotate),
    // A function named by the user (`kreplay probe`): arguments recorded raw.
    spec("user_function", User, Other),
];

/// The [`ApiId`] of the user-named function of `kreplay probe`.
pub const USER_FUNCTION: ApiId = (APIS.len() - 1) as ApiId;

/// Looks up the spec of an API id, if it is known.
pub fn spec_of(id: ApiId) -> Option<&'static ApiSpec> {
    APIS.get(id as usize)
}

/// Looks up an API id by its exported symbol name.
pub fn id_of(name: &str) -> Option<ApiId> {
    APIS.iter()
        .position(|s| s.name.as_bytes() == name.as_bytes())
        .map(|i| i as ApiId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, s) in APIS.iter().enumerate() {
            assert_eq!(id_of(s.name), Some(i as ApiId), "{}", s.name);
        }
        assert_eq!(spec_of(USER_FUNCTION).unwrap().name, "user_function");
        assert!(spec_of(APIS.len() as ApiId).is_none());
    }

    #[test]
    fn out_and_stream_args_beyond_registers_are_captured() {
        for s in APIS {
            for idx in [s.out_arg, s.stream_arg, s.size_arg, s.ptr_arg] {
                if idx != NO_ARG && idx >= 6 {
                    assert!(
                        (idx - 6) < s.stack_words,
                        "{}: argument {idx} is on the stack but only {} words are captured",
                        s.name,
                        s.stack_words
                    );
                }
            }
        }
        let q = spec_of(id_of("hsa_queue_create").unwrap()).unwrap();
        assert_eq!((q.out_arg, q.stack_words), (7, 2));
        let l = spec_of(id_of("cuLaunchKernel").unwrap()).unwrap();
        assert_eq!((l.stream_arg, l.stack_words), (8, 5));
    }

    #[test]
    fn runtime_launches_and_2d_copies_read_their_arguments() {
        let l = spec_of(id_of("cudaLaunchKernel").unwrap()).unwrap();
        assert_eq!(
            (l.library, l.kernel_arg, l.stream_arg, l.geometry),
            (Library::CudaRt, 0, 7, Geometry::Dim3Pairs(1))
        );
        let ex = spec_of(id_of("cudaLaunchKernelExC").unwrap()).unwrap();
        assert_eq!((ex.kernel_arg, ex.geometry), (1, Geometry::ConfigStruct));
        // cudaMemcpy2D(dst, dpitch, src, spitch, width = 32, height = 4, kind).
        let c = spec_of(id_of("cudaMemcpy2D").unwrap()).unwrap();
        let args = [0x1000, 64, 0x2000, 64, 32, 4, 0];
        assert_eq!(c.bytes(|i| args[i as usize]), Some(128));
        let m = spec_of(id_of("cudaMemcpy").unwrap()).unwrap();
        assert_eq!(m.bytes(|i| [0, 0, 4096, 1][i as usize]), Some(4096));
        let sync = spec_of(id_of("cudaDeviceSynchronize").unwrap()).unwrap();
        assert_eq!(sync.bytes(|_| 7), None);
    }
}
