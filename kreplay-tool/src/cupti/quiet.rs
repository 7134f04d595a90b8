//! The runtime and driver calls whose API records kreplay turns off: calls that launch no GPU
//! work, so no GPU record is tied to them, yet that CUDA libraries make around every launch
//! (PyTorch asks for the current device and the last error per operator; cudart asks the
//! driver for the current context and the kernel's attributes per launch). Each record costs
//! the calling thread CUPTI's time; the timeline needs the API records of launches, copies and
//! memsets only. CUPTI 12.5 and later filter per call (`cuptiActivityEnableDriverApi`,
//! `cuptiActivityEnableRuntimeApi`); an older CUPTI records them all.

use super::api::Cupti;

/// Driver calls (`CUpti_driver_api_trace_cbid`): `cuCtxGetCurrent` 304, `cuPointerGetAttribute`
/// 310, `cuDevicePrimaryCtxGetState` 392, `cuPointerGetAttributes` 450, `cuKernelGetAttribute`
/// 686.
pub const DRIVER: [u32; 5] = [304, 310, 392, 450, 686];
/// Runtime calls (`CUpti_runtime_api_trace_cbid`): `cudaGetLastError` 10,
/// `cudaPeekAtLastError` 11, `cudaGetDevice` 17, `cudaStreamIsCapturing` 317.
pub const RUNTIME: [u32; 4] = [10, 11, 17, 317];

/// Turns the records of [`DRIVER`] and [`RUNTIME`] calls off (after their kinds were enabled).
/// Returns how many CUPTI accepted; a CUPTI without the entries accepts none.
pub fn silence(c: &Cupti) -> usize {
    set_all(c, 0)
}

/// Turns them on again (when a session stops: CUPTI's settings are the process's, and another
/// tool may use CUPTI after kreplay).
pub fn restore(c: &Cupti) {
    set_all(c, 1);
}

fn set_all(c: &Cupti, enable: u8) -> usize {
    let mut n = 0;
    for (entry, cbids) in [
        (c.enable_driver_api, &DRIVER[..]),
        (c.enable_runtime_api, &RUNTIME[..]),
    ] {
        let Some(f) = entry else { continue };
        for &cbid in cbids {
            // SAFETY: a plain CUPTI call with a callback id of its domain.
            if unsafe { f(cbid, enable) } == 0 {
                n += 1;
            }
        }
    }
    n
}
