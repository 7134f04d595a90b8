//! The CUPTI entries kreplay calls, loaded at run time with `libloading` from the CUPTI the
//! process uses: one already mapped, else the one beside a mapped CUDA runtime (PyTorch's
//! `nvidia` wheel ships `libcupti.so.N` next to `libcudart.so.N`), else the CUDA toolkit's, else
//! whatever `libcupti.so` the loader finds.

use core::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};

/// `CUptiResult`: 0 is success.
pub type CuptiResult = u32;
/// `CUpti_BuffersCallbackRequestFunc`.
pub type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`.
pub type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `CUpti_TimestampCallbackFunc`.
pub type TimestampFn = unsafe extern "C" fn() -> u64;
/// `CUpti_CallbackFunc`: (userdata, domain, callback id, `const CUpti_CallbackData *`).
pub type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// `CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM`: records carry the kernel's thread id (`gettid`).
pub const THREAD_ID_SYSTEM: u32 = 1;
/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`: flush incomplete buffers too.
pub const FLUSH_FORCED: u32 = 1;

/// The loaded library and its entries.
pub struct Cupti {
    /// Where it was loaded from.
    pub path: PathBuf,
    _lib: libloading::Library,
    /// `cuptiActivityRegisterCallbacks`.
    pub register_callbacks: unsafe extern "C" fn(RequestFn, CompleteFn) -> CuptiResult,
    /// `cuptiActivityEnable`.
    pub enable: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiActivityDisable`.
    pub disable: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiActivityGetNextRecord`.
    pub next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    /// `cuptiActivityFlushAll`.
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiSetThreadIdType`.
    pub set_thread_id_type: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiGetTimestamp`.
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    /// `cuptiActivityRegisterTimestampCallback` (CUPTI 12.x and later).
    pub register_timestamp: Option<unsafe extern "C" fn(TimestampFn) -> CuptiResult>,
    /// `cuptiGetResultString`.
    pub result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    /// `cuptiActivityGetNumDroppedRecords`.
    pub dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    /// `cuptiSubscribe`, `cuptiEnableCallback` and `cuptiUnsubscribe`: the callback API
    /// (`None` where the library lacks one of them).
    pub callbacks: Option<CallbackEntries>,
    /// `cuptiActivityEnableDriverApi(cbid, enable)`: one driver call's API records on or off
    /// (CUPTI 12.5 and later).
    pub enable_driver_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    /// `cuptiActivityEnableRuntimeApi(cbid, enable)`: one runtime call's, likewise.
    pub enable_runtime_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    /// `cuptiGetCallbackName(domain, cbid, const char **name)`.
    pub callback_name: Option<CallbackNameFn>,
}

/// `cuptiGetCallbackName`'s type.
pub type CallbackNameFn = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult;

/// `CUPTI_CB_DOMAIN_DRIVER_API`.
pub const DOMAIN_DRIVER: u32 = 1;
/// `CUPTI_CB_DOMAIN_RUNTIME_API`.
pub const DOMAIN_RUNTIME: u32 = 2;

/// The callback API's entries (cupti_callbacks.h).
#[derive(Clone, Copy)]
pub struct CallbackEntries {
    /// `cuptiSubscribe(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *userdata)`.
    pub subscribe: unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> CuptiResult,
    /// `cuptiEnableCallback(enable, subscriber, domain, callback id)`.
    pub enable: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> CuptiResult,
    /// `cuptiUnsubscribe(subscriber)`.
    pub unsubscribe: unsafe extern "C" fn(*mut c_void) -> CuptiResult,
}

/// Why no CUPTI could be used.
#[derive(Debug, thiserror::Error)]
pub enum CuptiError {
    /// No library found.
    #[error(
        "no libcupti found (looked beside the CUDA runtime, in the CUDA toolkit and the loader's path)"
    )]
    Missing,
    /// A library lacks an entry.
    #[error("{path} has no {symbol} (too old?)")]
    Symbol {
        /// The library.
        path: String,
        /// The entry.
        symbol: &'static str,
    },
    /// A call failed.
    #[error("{call} failed: {reason}")]
    Call {
        /// The call.
        call: &'static str,
        /// CUPTI's reason.
        reason: String,
    },
}

/// The name `get` (`cuptiGetCallbackName`) gives callback `cbid` of the driver (`driver`) or
/// runtime API domain.
pub fn name_of(get: Option<CallbackNameFn>, driver: bool, cbid: u32) -> Option<String> {
    let f = get?;
    let domain = if driver {
        DOMAIN_DRIVER
    } else {
        DOMAIN_RUNTIME
    };
    let mut s: *const c_char = core::ptr::null();
    // SAFETY: CUPTI writes a pointer to a static string of its own.
    if unsafe { f(domain, cbid, &mut s) } != 0 || s.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated static string.
    Some(
        unsafe { core::ffi::CStr::from_ptr(s) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Libraries mapped in this process whose file name starts with `prefix`.
fn mapped(prefix: &str) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(PathBuf::from)
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    v.dedup();
    v
}

/// `libcupti.so*` files of `dir`, newest version first.
fn in_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libcupti.so"))
        })
        .collect();
    v.sort();
    v.reverse();
    v
}

/// Where to look, in order.
fn candidates() -> Vec<PathBuf> {
    let mut v = mapped("libcupti.so");
    for rt in mapped("libcudart.so") {
        if let Some(d) = rt.parent() {
            v.extend(in_dir(d));
        }
    }
    for d in [
        "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/lib64",
    ] {
        v.extend(in_dir(Path::new(d)));
    }
    v.extend(["libcupti.so", "libcupti.so.13", "libcupti.so.12"].map(PathBuf::from));
    v
}

impl Cupti {
    /// Loads the first usable CUPTI of [`candidates`].
    pub fn load() -> Result<Self, CuptiError> {
        let mut last = CuptiError::Missing;
        for path in candidates() {
            // SAFETY: loading CUPTI runs its initializers, as any CUDA tool's loading does.
            let Ok(lib) = (unsafe { libloading::Library::new(&path) }) else {
                continue;
            };
            match Self::bind(path, lib) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn bind(path: PathBuf, lib: libloading::Library) -> Result<Self, CuptiError> {
        let shown = path.display().to_string();
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is CUPTI's entry of that name, with the signature of the
                // field it goes into (cupti_activity.h, cupti_result.h).
                *unsafe { lib.get($name.as_bytes()) }.map_err(|_| CuptiError::Symbol {
                    path: shown.clone(),
                    symbol: $name,
                })?
            };
        }
        Ok(Self {
            register_callbacks: sym!("cuptiActivityRegisterCallbacks"),
            enable: sym!("cuptiActivityEnable"),
            disable: sym!("cuptiActivityDisable"),
            next_record: sym!("cuptiActivityGetNextRecord"),
            flush_all: sym!("cuptiActivityFlushAll"),
            set_thread_id_type: sym!("cuptiSetThreadIdType"),
            get_timestamp: sym!("cuptiGetTimestamp"),
            // SAFETY: as above; absent from CUPTI before 12.x.
            register_timestamp: unsafe { lib.get(b"cuptiActivityRegisterTimestampCallback") }
                .ok()
                .map(|s| *s),
            result_string: sym!("cuptiGetResultString"),
            dropped: sym!("cuptiActivityGetNumDroppedRecords"),
            callbacks: (|| {
                // SAFETY: CUPTI's entries of these names, with the signatures of the fields
                // they go into (cupti_callbacks.h).
                unsafe {
                    Some(CallbackEntries {
                        subscribe: *lib.get(b"cuptiSubscribe").ok()?,
                        enable: *lib.get(b"cuptiEnableCallback").ok()?,
                        unsubscribe: *lib.get(b"cuptiUnsubscribe").ok()?,
                    })
                }
            })(),
            // SAFETY: CUPTI's entries of these names, with the signatures of the fields they go
            // into (cupti_activity.h); both are absent from CUPTI before 12.5.
            enable_driver_api: unsafe { lib.get(b"cuptiActivityEnableDriverApi") }
                .ok()
                .map(|s| *s),
            // SAFETY: as above.
            enable_runtime_api: unsafe { lib.get(b"cuptiActivityEnableRuntimeApi") }
                .ok()
                .map(|s| *s),
            // SAFETY: CUPTI's entry of this name, with the field's signature (cupti_callbacks.h).
            callback_name: unsafe { lib.get(b"cuptiGetCallbackName") }.ok().map(|s| *s),
            path,
            _lib: lib,
        })
    }

    /// `Ok` for success, else the call's error with CUPTI's reason.
    pub fn check(&self, call: &'static str, r: CuptiResult) -> Result<(), CuptiError> {
        if r == 0 {
            return Ok(());
        }
        let mut s: *const c_char = core::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string.
        let reason = if unsafe { (self.result_string)(r, &mut s) } == 0 && !s.is_null() {
            // SAFETY: a NUL-terminated static string.
            unsafe { core::ffi::CStr::from_ptr(s) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("CUPTI error {r}")
        };
        Err(CuptiError::Call { call, reason })
    }
}
