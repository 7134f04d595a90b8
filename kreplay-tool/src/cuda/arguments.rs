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
/// why they cannot be known. The application's memory is read with `process_vm_readv` on this
/// process: a parameter size or pointer that is wrong declines the launch instead of faulting.
pub fn reachable(t: &CudaTool, l: &Launch) -> Result<Vec<(u64, u64)>, String> {
    let (params, extra) = l.arguments();
    let mut words = Vec::new();
    if !params.is_null() {
        let layout = param_layout(t, l.function())?;
        if layout.iter().sum::<usize>() > MAX_PARAM_BYTES {
            return Err(format!(
                "the driver's parameter layout ({} parameters) is larger than a kernel's parameter space",
                layout.len()
            ));
        }
        let pointers = read_own(params as u64, layout.len() * 8)
            .ok_or("the launch's parameter array could not be read")?;
        for (i, size) in layout.into_iter().enumerate() {
            let value = word_at(&pointers, i * 8);
            if value == 0 {
                return Err(format!("parameter {i} has no value"));
            }
            let bytes = read_own(value, size)
                .ok_or_else(|| format!("parameter {i} ({size} bytes) could not be read"))?;
            push_words(&bytes, &mut words);
        }
    } else if !extra.is_null() {
        let (buf, size) = packed_buffer(extra as u64)?;
        let bytes = read_own(buf, size.min(MAX_PARAM_BYTES))
            .ok_or("the launch's parameter buffer could not be read")?;
        push_words(&bytes, &mut words);
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

/// The packed parameter buffer (address, size) from a launch's `extra` options (at `extra`:
/// `CU_LAUNCH_PARAM_END`-terminated (option, value) pairs).
fn packed_buffer(extra: u64) -> Result<(u64, usize), String> {
    let unreadable = || "the launch's extra options could not be read".to_string();
    let (mut buf, mut size) = (0u64, None);
    for pair in 0..32u64 {
        let at = extra + pair * 16;
        let opt = read_own(at, 8).ok_or_else(unreadable)?;
        let opt = word_at(&opt, 0) as usize;
        if opt == LAUNCH_PARAM_END {
            break;
        }
        let value = word_at(&read_own(at + 8, 8).ok_or_else(unreadable)?, 0);
        match opt {
            LAUNCH_PARAM_BUFFER_POINTER => buf = value,
            LAUNCH_PARAM_BUFFER_SIZE if value != 0 => {
                size = Some(word_at(&read_own(value, 8).ok_or_else(unreadable)?, 0) as usize)
            }
            _ => {}
        }
    }
    match (buf, size) {
        (b, Some(n)) if b != 0 => Ok((b, n)),
        _ => Err("the launch's extra options hold no parameter buffer and size".into()),
    }
}

/// The little-endian word at `off` of `bytes` (which holds at least `off + 8` bytes).
fn word_at(bytes: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[off..off + 8]);
    u64::from_le_bytes(w)
}

/// Appends the 8-byte words of `bytes` (a trailing part shorter than a word holds no pointer).
fn push_words(bytes: &[u8], out: &mut Vec<u64>) {
    out.extend(bytes.chunks_exact(8).map(|c| word_at(c, 0)));
}

/// `len` bytes of this process's memory at `addr`, or `None` where any of them is not mapped
/// readable (`process_vm_readv` on this process fails with EFAULT instead of faulting).
fn read_own(addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Some(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: len,
    };
    // SAFETY: `local` is `len` writable bytes of `buf`; the remote range is only read, by the
    // kernel, which reports an unmapped address as an error.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_reads_back_and_unmapped_addresses_are_refused_without_a_fault() {
        let v: Vec<u64> = vec![0x1122_3344_5566_7788, 42];
        let bytes = read_own(v.as_ptr() as u64, 16).unwrap();
        let mut words = Vec::new();
        push_words(&bytes, &mut words);
        assert_eq!(words, v);
        // The first page is never mapped; a range running off the end of a buffer into it
        // is refused whole.
        assert_eq!(read_own(0x10, 8), None);
        assert_eq!(read_own(u64::MAX - 7, 8), None);
    }

    #[test]
    fn the_packed_buffer_and_its_size_come_from_the_extra_options() {
        let params = [7u8; 24];
        let size: usize = params.len();
        let extra: [u64; 5] = [
            LAUNCH_PARAM_BUFFER_POINTER as u64,
            params.as_ptr() as u64,
            LAUNCH_PARAM_BUFFER_SIZE as u64,
            &size as *const usize as u64,
            LAUNCH_PARAM_END as u64,
        ];
        assert_eq!(
            packed_buffer(extra.as_ptr() as u64),
            Ok((params.as_ptr() as u64, 24))
        );
        // A size pointer that points nowhere declines instead of faulting.
        let bad: [u64; 5] = [
            LAUNCH_PARAM_BUFFER_POINTER as u64,
            params.as_ptr() as u64,
            LAUNCH_PARAM_BUFFER_SIZE as u64,
            0x18,
            LAUNCH_PARAM_END as u64,
        ];
        assert_eq!(
            packed_buffer(bad.as_ptr() as u64),
            Err("the launch's extra options could not be read".into())
        );
    }
}
