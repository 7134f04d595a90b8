//! The device memory a launch can reach through its arguments, for replay in a running process
//! (`crate::cuda::attached`), where the allocations made before kreplay arrived were never
//! seen: each parameter's bytes (sizes from `cuFuncGetParamInfo`/`cuKernelGetParamInfo`, or
//! the packed buffer of `CU_LAUNCH_PARAM_BUFFER_POINTER`) are read as 8-byte words, and every
//! word the driver knows as device memory gives its whole allocation (`cuPointerGetAttributes`:
//! range start and size). Memory reached only through pointers stored in device memory is not
//! found this way (docs/attach.md says so).

use core::ffi::c_void;

use super::ffi::*;
use super::launch_call::Launch;
use super::state::CudaTool;

/// Parameters read at most (a kernel's parameter space is 32 KiB at most).
const MAX_PARAMS: usize = 4096;
/// Bytes of one launch's parameters read at most.
const MAX_PARAM_BYTES: usize = 32 << 10;
/// `CUDA_ERROR_INVALID_VALUE`: the index is past the last parameter.
const ERROR_INVALID_VALUE: CUresult = 1;

/// The allocations (base, size) that the launch's arguments point into, in address order, or
/// why they cannot be known.
///
/// # Safety
/// `l` is the application's launch, its parameter pointers valid for the call.
pub unsafe fn reachable(t: &CudaTool, l: &Launch) -> Result<Vec<(u64, u64)>, String> {
    let (params, extra) = l.arguments();
    let mut words = Vec::new();
    if !params.is_null() {
        let layout = param_layout(t, l.function())?;
        for (i, size) in layout.into_iter().enumerate() {
            // SAFETY: `params` holds one pointer per parameter, each to `size` readable bytes
            // (the launch's own contract with the driver).
            let value = unsafe { *params.add(i) } as *const u8;
            if value.is_null() {
                return Err(format!("parameter {i} has no value"));
            }
            // SAFETY: as above.
            unsafe { push_words(value, size, &mut words) };
        }
    } else if !extra.is_null() {
        // SAFETY: the launch's `extra` is a CU_LAUNCH_PARAM_END-terminated option list.
        let (buf, size) = unsafe { packed_buffer(extra) }?;
        // SAFETY: the packed buffer holds `size` readable bytes.
        unsafe { push_words(buf, size.min(MAX_PARAM_BYTES), &mut words) };
    }
    let mut found: Vec<(u64, u64)> = Vec::new();
    for w in words {
        if w < 0x1_0000 || found.iter().any(|&(b, n)| w >= b && w < b + n) {
            continue;
        }
        if let Some(range) = device_range(t, w)? {
            found.push(range);
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// Each parameter's size, from the driver.
fn param_layout(t: &CudaTool, f: CUfunction) -> Result<Vec<usize>, String> {
    let getters = [t.driver.func_get_param_info, t.driver.kernel_get_param_info];
    if getters.iter().all(Option::is_none) {
        return Err(
            "the driver has no cuFuncGetParamInfo (CUDA 12.4 or later): the kernel's arguments cannot be read"
                .into(),
        );
    }
    // A handle of the other kind (CUfunction or CUkernel) fails at index 0; a kernel without
    // parameters fails there too, with CUDA_ERROR_INVALID_VALUE, from every getter.
    let mut outcomes = Vec::new();
    for get in getters.into_iter().flatten() {
        let mut sizes = Vec::new();
        let last = loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: valid out-pointers; `f` is the application's handle.
            let r = unsafe { get(f, sizes.len(), &mut offset, &mut size) };
            if r != SUCCESS || sizes.len() >= MAX_PARAMS {
                break r;
            }
            sizes.push(size);
        };
        if last == ERROR_INVALID_VALUE && !sizes.is_empty() {
            return Ok(sizes);
        }
        if !sizes.is_empty() {
            return Err(format!(
                "the driver gave no complete parameter layout for the kernel (error {last} after {} parameters)",
                sizes.len()
            ));
        }
        // Nothing from this getter: the handle may be of the other kind.
        outcomes.push(last);
    }
    // Every getter said the kernel has no parameters, or none knew the handle.
    if outcomes.iter().all(|&r| r == ERROR_INVALID_VALUE) {
        return Ok(Vec::new());
    }
    Err(format!(
        "the driver gave no parameter layout for the kernel (errors {outcomes:?})"
    ))
}

/// The packed parameter buffer and its size from a launch's `extra` options.
///
/// # Safety
/// `extra` is a `CU_LAUNCH_PARAM_END`-terminated list of (option, value) pointers.
unsafe fn packed_buffer(extra: *mut *mut c_void) -> Result<(*const u8, usize), String> {
    let (mut buf, mut size) = (core::ptr::null::<u8>(), None);
    let mut i = 0;
    loop {
        // SAFETY: the caller's contract: options come in pairs until the end marker.
        let opt = unsafe { *extra.add(i) } as usize;
        if opt == LAUNCH_PARAM_END || i > 64 {
            break;
        }
        // SAFETY: as above.
        let value = unsafe { *extra.add(i + 1) };
        match opt {
            LAUNCH_PARAM_BUFFER_POINTER => buf = value as *const u8,
            LAUNCH_PARAM_BUFFER_SIZE if !value.is_null() => {
                // SAFETY: the option's value points to a size_t.
                size = Some(unsafe { *(value as *const usize) })
            }
            _ => {}
        }
        i += 2;
    }
    match (buf.is_null(), size) {
        (false, Some(n)) => Ok((buf, n)),
        _ => Err("the launch's extra options hold no parameter buffer and size".into()),
    }
}

/// Appends the 8-byte words of `len` bytes at `p` (a trailing part shorter than a word holds
/// no pointer).
///
/// # Safety
/// `p` points to `len` readable bytes.
unsafe fn push_words(p: *const u8, len: usize, out: &mut Vec<u64>) {
    for off in (0..len.saturating_sub(7)).step_by(8) {
        // SAFETY: `off + 8 <= len`; parameter values need not be 8-aligned in host memory.
        out.push(unsafe { (p.add(off) as *const u64).read_unaligned() });
    }
}

/// The device allocation holding address `w`, if the driver knows it as device memory.
fn device_range(t: &CudaTool, w: u64) -> Result<Option<(u64, u64)>, String> {
    let (mut kind, mut managed, mut start, mut size) = (0u32, 0u32, 0u64, 0usize);
    let mut attrs = [
        ATTR_MEMORY_TYPE,
        ATTR_IS_MANAGED,
        ATTR_RANGE_START_ADDR,
        ATTR_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 4] = [
        (&mut kind as *mut u32).cast(),
        (&mut managed as *mut u32).cast(),
        (&mut start as *mut u64).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: four attributes, each with an out-pointer of its value's type; the call does not
    // fail on addresses the driver does not know (their values stay zero).
    let r = unsafe {
        (t.driver.pointer_get_attributes)(
            attrs.len() as u32,
            attrs.as_mut_ptr(),
            data.as_mut_ptr(),
            w,
        )
    };
    if r == SUCCESS && kind == MEMORYTYPE_HOST && size > 0 {
        return Err(format!(
            "an argument points into page-locked host memory ({size} bytes at {start:#x}), which kreplay does not snapshot"
        ));
    }
    if r != SUCCESS || kind != MEMORYTYPE_DEVICE || size == 0 {
        return Ok(None);
    }
    if managed != 0 {
        return Err(format!(
            "an argument points into managed memory ({size} bytes at {start:#x}), which kreplay does not snapshot"
        ));
    }
    Ok(Some((start, size as u64)))
}
