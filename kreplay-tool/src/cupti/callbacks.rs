//! CUPTI's callback API on the driver's kernel launch calls (`cuLaunchKernel`, `cuLaunchKernelEx`
//! and their per-thread-stream variants): the place where replay in a running CUDA process
//! (`crate::cuda::attached`) sees each launch before the driver submits it. CUPTI takes one
//! subscriber per process; another tool holding it (an active torch.profiler, Nsight) makes
//! [`subscribe`] fail with CUPTI's reason.

use core::ffi::{c_char, c_void};
use std::sync::Mutex;

use super::api::{CallbackEntries, CallbackFn, CuptiError};

/// `CUPTI_CB_DOMAIN_DRIVER_API`.
pub const DOMAIN_DRIVER_API: u32 = 1;
/// `CUPTI_API_ENTER`: the callback runs before the call does its work.
pub const SITE_ENTER: u32 = 0;
/// `CUPTI_API_EXIT`: the callback runs after it.
pub const SITE_EXIT: u32 = 1;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel`.
pub const CBID_LAUNCH_KERNEL: u32 = 307;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz`.
pub const CBID_LAUNCH_KERNEL_PTSZ: u32 = 442;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx`.
pub const CBID_LAUNCH_KERNEL_EX: u32 = 652;
/// `CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz`.
pub const CBID_LAUNCH_KERNEL_EX_PTSZ: u32 = 653;
/// The launch calls kreplay subscribes to.
pub const LAUNCH_CBIDS: [u32; 4] = [
    CBID_LAUNCH_KERNEL,
    CBID_LAUNCH_KERNEL_PTSZ,
    CBID_LAUNCH_KERNEL_EX,
    CBID_LAUNCH_KERNEL_EX_PTSZ,
];

/// `CUpti_CallbackData`: what a driver- or runtime-API callback is given.
#[repr(C)]
pub struct CallbackData {
    /// [`SITE_ENTER`] or [`SITE_EXIT`].
    pub callback_site: u32,
    /// The call's name.
    pub function_name: *const c_char,
    /// The call's parameters (`cuLaunchKernel_params` and so on, cupti_driver_cbid.h).
    pub function_params: *const c_void,
    /// The call's return value (valid at exit).
    pub function_return_value: *mut c_void,
    /// The kernel's symbol name (runtime launches only).
    pub symbol_name: *const c_char,
    /// The context of the call.
    pub context: *mut c_void,
    /// Its unique id.
    pub context_uid: u32,
    /// Per-call storage kept from entry to exit.
    pub correlation_data: *mut u64,
    /// The call's correlation id.
    pub correlation_id: u32,
}

/// The live subscription (the subscriber handle, as an address).
static SUBSCRIBER: Mutex<Option<usize>> = Mutex::new(None);

/// Subscribes `f` to the driver's launch calls ([`LAUNCH_CBIDS`]). Returns at once when
/// subscribed already.
pub fn subscribe(f: CallbackFn) -> Result<(), CuptiError> {
    let mut sub = SUBSCRIBER.lock().unwrap_or_else(|p| p.into_inner());
    if sub.is_some() {
        return Ok(());
    }
    let c = super::loaded()?;
    let e = entries(c)?;
    let mut handle: *mut c_void = core::ptr::null_mut();
    // SAFETY: a valid out-pointer and an `extern "C"` callback that never unwinds.
    c.check("cuptiSubscribe", unsafe {
        (e.subscribe)(&mut handle, f, core::ptr::null_mut())
    })?;
    for cbid in LAUNCH_CBIDS {
        // SAFETY: the handle cuptiSubscribe just gave.
        let r = unsafe { (e.enable)(1, handle, DOMAIN_DRIVER_API, cbid) };
        if let Err(err) = c.check("cuptiEnableCallback", r) {
            // SAFETY: as above.
            unsafe { (e.unsubscribe)(handle) };
            return Err(err);
        }
    }
    *sub = Some(handle as usize);
    Ok(())
}

/// Ends the subscription: no callback starts after this returns (one already running
/// finishes). Does nothing when not subscribed.
pub fn unsubscribe() {
    let mut sub = SUBSCRIBER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(handle) = sub.take() else { return };
    let Ok(c) = super::loaded() else { return };
    let Ok(e) = entries(c) else { return };
    // SAFETY: the handle cuptiSubscribe gave.
    if let Err(err) = c.check("cuptiUnsubscribe", unsafe {
        (e.unsubscribe)(handle as *mut c_void)
    }) {
        tracing::warn!("kreplay: {err}");
    }
}

/// Launch callbacks seen by [`prime`]'s subscription.
static PRIMED_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

unsafe extern "C" fn count_call(_: *mut c_void, _: u32, _: u32, _: *const c_void) {
    PRIMED_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Subscribes to the launch callbacks until one has run (or `wait` is up), then unsubscribes;
/// once per process, before CUPTI's activity records are first enabled in it
/// ([`crate::attach`] says why). A failure (another subscriber) is left to the session.
pub fn prime(wait: std::time::Duration) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if subscribe(count_call).is_err() {
            return;
        }
        let t = std::time::Instant::now();
        while PRIMED_CALLS.load(std::sync::atomic::Ordering::Relaxed) == 0 && t.elapsed() < wait {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        unsubscribe();
    });
}

fn entries(c: &super::api::Cupti) -> Result<CallbackEntries, CuptiError> {
    c.callbacks.ok_or_else(|| CuptiError::Symbol {
        path: c.path.display().to_string(),
        symbol: "cuptiSubscribe",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_data_has_cupti_s_layout() {
        // cupti_callbacks.h on x86_64: enum, 5 pointers, u32 (padded), pointer, u32.
        assert_eq!(core::mem::offset_of!(CallbackData, function_name), 8);
        assert_eq!(core::mem::offset_of!(CallbackData, function_params), 16);
        assert_eq!(core::mem::offset_of!(CallbackData, context), 40);
        assert_eq!(core::mem::offset_of!(CallbackData, context_uid), 48);
        assert_eq!(core::mem::offset_of!(CallbackData, correlation_data), 56);
        assert_eq!(core::mem::offset_of!(CallbackData, correlation_id), 64);
        assert_eq!(core::mem::size_of::<CallbackData>(), 72);
    }
}
