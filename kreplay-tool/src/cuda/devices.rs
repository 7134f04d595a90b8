//! CUDA devices as the tool describes them to the merge (`GpuDevice`): the device ordinal the
//! work records carry (CUPTI's `deviceId`, `cuCtxGetDevice`'s device) and the driver's name for
//! it (`cuDeviceGet`, `cuDeviceGetName`), resolved once through the driver's own
//! `cuGetProcAddress_v2`. A driver that cannot name a device leaves the name empty: the
//! device's tracks are then named by its ordinal alone.

use core::ffi::c_char;
use std::sync::OnceLock;

use kreplay_common::stream::{GpuDevice, UNKNOWN_ORDINAL, gpu_runtime};

use super::driver::{ABI_VERSION, DriverError, find, open};
use super::ffi::{DeviceGetFn, DeviceGetNameFn, SUCCESS};

/// Bytes of the buffer `cuDeviceGetName` writes into.
const NAME_BYTES: usize = 256;

/// The driver entries that name a device.
pub struct DeviceNames {
    _lib: libloading::Library,
    get: DeviceGetFn,
    get_name: DeviceGetNameFn,
}

impl DeviceNames {
    /// Opens the driver and resolves `cuDeviceGet` and `cuDeviceGetName`.
    pub fn load() -> Result<Self, DriverError> {
        let (lib, get_proc) = open()?;
        let get = find(get_proc, c"cuDeviceGet", ABI_VERSION);
        let get_name = find(get_proc, c"cuDeviceGetName", ABI_VERSION);
        if get.is_null() {
            return Err(DriverError::Missing("cuDeviceGet"));
        }
        if get_name.is_null() {
            return Err(DriverError::Missing("cuDeviceGetName"));
        }
        // SAFETY: the driver's entries of these names have these signatures (cuda.h).
        let (get, get_name) = unsafe {
            (
                core::mem::transmute::<*mut core::ffi::c_void, DeviceGetFn>(get),
                core::mem::transmute::<*mut core::ffi::c_void, DeviceGetNameFn>(get_name),
            )
        };
        Ok(Self {
            _lib: lib,
            get,
            get_name,
        })
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
fn names() -> Option<&'static DeviceNames> {
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

/// The description of CUDA device `ordinal` of this process, whose work records hold queues
/// as `queues` (a `queue_ids` code).
pub fn describe(ordinal: u64, queues: u8) -> GpuDevice {
    let ordinal32 = u32::try_from(ordinal)
        .ok()
        .filter(|&o| o != UNKNOWN_ORDINAL);
    GpuDevice {
        pid: crate::record::current_pid(),
        device: ordinal,
        runtime: gpu_runtime::CUDA,
        queues,
        ordinal: ordinal32.unwrap_or(UNKNOWN_ORDINAL),
        name: ordinal32
            .and_then(|o| names().and_then(|n| n.name(o)))
            .unwrap_or_default(),
    }
}

/// Records the description of CUDA device `ordinal` unless this process described it already.
pub fn announce(ordinal: u64, queues: u8) {
    crate::record::describe_device_once(ordinal, || describe(ordinal, queues));
}
