//! One kernel launch as the application made it (`cuLaunchKernel` or `cuLaunchKernelEx`, with
//! the real entry it was meant for): what the engine replays as a CUDA dispatch.

use core::ffi::{c_uint, c_void};

use super::ffi::*;

/// One launch, with the real entry it was meant for.
pub enum Launch {
    /// `cuLaunchKernel`.
    Kernel {
        /// Real entry.
        real: LaunchKernelFn,
        /// Function (or kernel) handle.
        f: CUfunction,
        /// Grid in blocks.
        grid: [c_uint; 3],
        /// Block in threads.
        block: [c_uint; 3],
        /// Dynamic shared memory.
        shm: c_uint,
        /// Stream.
        stream: CUstream,
        /// Kernel parameters.
        params: *mut *mut c_void,
        /// Extra options.
        extra: *mut *mut c_void,
    },
    /// `cuLaunchKernelEx`.
    Ex {
        /// Real entry.
        real: LaunchKernelExFn,
        /// Launch configuration.
        cfg: *const CUlaunchConfig,
        /// Function (or kernel) handle.
        f: CUfunction,
        /// Kernel parameters.
        params: *mut *mut c_void,
        /// Extra options.
        extra: *mut *mut c_void,
    },
}

impl Launch {
    /// Submits the launch once, as the application made it.
    ///
    /// # Safety
    /// The launch's pointers are the application's, valid for the wrapped call's duration.
    pub unsafe fn submit(&self) -> CUresult {
        match *self {
            Launch::Kernel {
                real,
                f,
                grid,
                block,
                shm,
                stream,
                params,
                extra,
            } => {
                // SAFETY: caller's contract.
                unsafe {
                    real(
                        f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shm, stream,
                        params, extra,
                    )
                }
            }
            Launch::Ex {
                real,
                cfg,
                f,
                params,
                extra,
            } => {
                // SAFETY: caller's contract.
                unsafe { real(cfg, f, params, extra) }
            }
        }
    }

    /// The launched function (or kernel) handle.
    pub fn function(&self) -> CUfunction {
        match *self {
            Launch::Kernel { f, .. } | Launch::Ex { f, .. } => f,
        }
    }

    /// (grid in threads, block, stream).
    pub fn geometry(&self) -> ([u32; 3], [u32; 3], u64) {
        let (g, b, s) = match *self {
            Launch::Kernel {
                grid,
                block,
                stream,
                ..
            } => (grid, block, stream),
            Launch::Ex { cfg, .. } => {
                // SAFETY: cfg was checked non-null by the wrapper and is valid for the call.
                let c = unsafe { &*cfg };
                (
                    [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
                    [c.block_dim_x, c.block_dim_y, c.block_dim_z],
                    c.h_stream,
                )
            }
        };
        (
            [
                g[0].saturating_mul(b[0]),
                g[1].saturating_mul(b[1]),
                g[2].saturating_mul(b[2]),
            ],
            b,
            s as u64,
        )
    }

    /// The launch's (kernel parameters, extra options) pointers.
    pub fn arguments(&self) -> (*mut *mut c_void, *mut *mut c_void) {
        match *self {
            Launch::Kernel { params, extra, .. } | Launch::Ex { params, extra, .. } => {
                (params, extra)
            }
        }
    }

    /// Dynamic shared memory bytes the launch asked for.
    pub fn shared_mem(&self) -> u32 {
        match *self {
            Launch::Kernel { shm, .. } => shm,
            // SAFETY: cfg was checked non-null by the wrapper and is valid for the call.
            Launch::Ex { cfg, .. } => unsafe { (*cfg).shared_mem_bytes },
        }
    }
}
