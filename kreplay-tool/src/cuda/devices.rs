//! CUDA devices as the tool describes them to the merge (`GpuDevice`): the device ordinal the
//! work records carry (CUPTI's `deviceId`, `cuCtxGetDevice`'s device) and the driver's name for
//! it (`cuDeviceGetCount`, `cuDeviceGet`, `cuDeviceGetName`, resolved through the driver's own
//! `cuGetProcAddress_v2`). A driver that cannot name a device leaves the name empty: the
//! device's tracks are then named by its ordinal alone.
//!
//! Under CUPTI the names are read on a thread of their own ([`read_names_in_background`]),
//! started with the activity records, never inside a CUPTI callback: the driver is still inside
//! `cuInit` when the tool starts there, and NVIDIA supports no driver calls from CUPTI's
//! callbacks (the driver-API records kreplay enables would trace them). That thread asks until
//! the driver answers, then keeps every device's name for [`describe_from_names`], which the
//! buffer-completion callback calls when a record first names a device. `kreplay replay`'s
//! launch wrapper is no CUPTI callback: [`describe`] asks the driver at once.

use core::ffi::c_char;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kreplay_common::stream::{GpuDevice, UNKNOWN_ORDINAL, gpu_runtime};

use super::driver::{ABI_VERSION, DriverError, find, open};
use super::ffi::{DeviceGetCountFn, DeviceGetFn, DeviceGetNameFn, SUCCESS};

/// Bytes of the buffer `cuDeviceGetName` writes into.
const NAME_BYTES: usize = 256;
/// How long the names thread asks a driver that does not answer yet (still in `cuInit`).
const ASK_FOR: Duration = Duration::from_secs(30);
/// Between two of its questions.
const ASK_EVERY: Duration = Duration::from_millis(10);
/// How long a CUPTI buffer waits for the names before describing its device without one.
const WAIT_FOR_NAMES: Duration = Duration::from_secs(1);

/// The driver entries that name a device.
pub struct DeviceNames {
    _lib: libloading::Library,
    count: DeviceGetCountFn,
    get: DeviceGetFn,
    get_name: DeviceGetNameFn,
}

impl DeviceNames {
    /// Opens the driver and resolves `cuDeviceGetCount`, `cuDeviceGet` and `cuDeviceGetName`.
    pub fn load() -> Result<Self, DriverError> {
        let (lib, get_proc) = open()?;
        let entry = |name: &'static core::ffi::CStr, shown: &'static str| {
            let p = find(get_proc, name, ABI_VERSION);
            if p.is_null() {
                Err(DriverError::Missing(shown))
            } else {
                Ok(p)
            }
        };
        let count = entry(c"cuDeviceGetCount", "cuDeviceGetCount")?;
        let get = entry(c"cuDeviceGet", "cuDeviceGet")?;
        let get_name = entry(c"cuDeviceGetName", "cuDeviceGetName")?;
        // SAFETY: the driver's entries of these names have these signatures (cuda.h).
        unsafe {
            Ok(Self {
                _lib: lib,
                count: core::mem::transmute::<*mut core::ffi::c_void, DeviceGetCountFn>(count),
                get: core::mem::transmute::<*mut core::ffi::c_void, DeviceGetFn>(get),
                get_name: core::mem::transmute::<*mut core::ffi::c_void, DeviceGetNameFn>(get_name),
            })
        }
    }

    /// How many devices the driver has; `None` while it cannot say (not initialized yet).
    pub fn count(&self) -> Option<u32> {
        let mut n = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { (self.count)(&mut n) };
        (r == SUCCESS).then(|| n.max(0) as u32)
    }

    /// The driver's name of device `ordinal`; `None` when it has none for it.
    pub fn name(&self, ordinal: u32) -> Option<String> {
        let ordinal = i32::try_from(ordinal).ok()?;
        let mut dev = 0;
        // SAFETY: valid out-pointer; the driver checks the ordinal.
        if unsafe { (self.get)(&mut dev, ordinal) } != SUCCESS {
            return None;
        }
        let mut buf = [0 as c_char; NAME_BYTES];
        // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `buf`.
        if unsafe { (self.get_name)(buf.as_mut_ptr(), NAME_BYTES as i32, dev) } != SUCCESS {
            return None;
        }
        // Terminated within the buffer whatever the driver wrote.
        buf[NAME_BYTES - 1] = 0;
        // SAFETY: NUL-terminated above, within `buf`.
        let name = unsafe { core::ffi::CStr::from_ptr(buf.as_ptr()) };
        let name = name.to_string_lossy().trim().to_owned();
        (!name.is_empty()).then_some(name)
    }
}

/// The process's device-naming entries, loaded at the first use (`None`, said once at debug
/// level, when the driver lacks them).
fn entries() -> Option<&'static DeviceNames> {
    static NAMES: OnceLock<Option<DeviceNames>> = OnceLock::new();
    NAMES
        .get_or_init(|| match DeviceNames::load() {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::debug!("kreplay: CUDA devices stay unnamed: {e}");
                None
            }
        })
        .as_ref()
}

/// Every device's name by ordinal, once the names thread has read them (empty strings for the
/// devices the driver did not name; an empty list when it never answered).
struct Read {
    names: Mutex<Option<Vec<String>>>,
    done: Condvar,
}

static READ: Read = Read {
    names: Mutex::new(None),
    done: Condvar::new(),
};

/// Starts the thread that reads every device's name once the driver answers (once per
/// process; later calls do nothing). A thread that cannot start leaves the devices unnamed.
pub fn read_names_in_background() {
    static STARTED: OnceLock<()> = OnceLock::new();
    if STARTED.set(()).is_err() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("kreplay-devices".into())
        .spawn(|| {
            let names = crate::fault::guard(read_names).unwrap_or_default();
            *READ.names.lock().unwrap_or_else(|p| p.into_inner()) = Some(names);
            READ.done.notify_all();
        });
    if let Err(e) = spawned {
        tracing::debug!("kreplay: no thread to name the CUDA devices ({e}): they stay unnamed");
        *READ.names.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
    }
}

/// Asks the driver for its devices until it answers (at most [`ASK_FOR`]), then names each.
fn read_names() -> Vec<String> {
    let Some(d) = entries() else {
        return Vec::new();
    };
    let until = Instant::now() + ASK_FOR;
    loop {
        if let Some(n) = d.count() {
            return (0..n).map(|o| d.name(o).unwrap_or_default()).collect();
        }
        if Instant::now() >= until {
            tracing::debug!("kreplay: the CUDA driver never said how many devices it has");
            return Vec::new();
        }
        std::thread::sleep(ASK_EVERY);
    }
}

/// The name the names thread read for `ordinal`, waiting at most [`WAIT_FOR_NAMES`] for it to
/// finish (a thread never started counts as finished, with no names).
fn read_name(ordinal: u32) -> Option<String> {
    let guard = READ.names.lock().unwrap_or_else(|p| p.into_inner());
    let (guard, _) = READ
        .done
        .wait_timeout_while(guard, WAIT_FOR_NAMES, |n| n.is_none())
        .unwrap_or_else(|p| p.into_inner());
    let name = guard.as_ref()?.get(ordinal as usize)?;
    (!name.is_empty()).then(|| name.clone())
}

/// Device `ordinal` of this process as a `GpuDevice` whose work records hold queues as `queues`
/// (a `queue_ids` code), named by `name_of`.
fn device(ordinal: u64, queues: u8, name_of: impl FnOnce(u32) -> Option<String>) -> GpuDevice {
    let known = u32::try_from(ordinal)
        .ok()
        .filter(|&o| o != UNKNOWN_ORDINAL);
    GpuDevice {
        pid: crate::record::current_pid(),
        device: ordinal,
        runtime: gpu_runtime::CUDA,
        queues,
        ordinal: known.unwrap_or(UNKNOWN_ORDINAL),
        name: known.and_then(name_of).unwrap_or_default(),
    }
}

/// The description of CUDA device `ordinal`, its name asked of the driver now (not from inside
/// a CUPTI callback).
pub fn describe(ordinal: u64, queues: u8) -> GpuDevice {
    device(ordinal, queues, |o| entries().and_then(|d| d.name(o)))
}

/// The description of CUDA device `ordinal`, its name from the names thread
/// ([`read_names_in_background`]): what CUPTI's callbacks use.
pub fn describe_from_names(ordinal: u64, queues: u8) -> GpuDevice {
    device(ordinal, queues, read_name)
}

/// Records the description of CUDA device `ordinal` (named by the driver now) unless this
/// process described it already.
pub fn announce(ordinal: u64, queues: u8) {
    crate::record::describe_device_once(ordinal, || describe(ordinal, queues));
}

/// Records the description of CUDA device `ordinal` (named by the names thread) unless this
/// process described it already.
pub fn announce_from_names(ordinal: u64, queues: u8) {
    crate::record::describe_device_once(ordinal, || describe_from_names(ordinal, queues));
}
