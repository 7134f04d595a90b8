//! Names of CUDA driver function handles, for launches that reach only the driver after a late
//! attach (cuBLAS, cuDNN, Triton call `cuLaunchKernel`/`cuLaunchKernelEx` themselves, with a
//! `CUfunction` made before kreplay was there).
//!
//! A `CUfunction` (and a `CUkernel`, which `cuLaunchKernel` also takes) is a pointer into the
//! driver's heap; the driver keeps the kernel's name at the handle's second word, a pointer to
//! the mangled name (`tests/gpu/cufunc_layout.py` shows it: the word `cuFuncGetName` returns,
//! for both kinds of handle, on driver 580.159.04). The layout is the driver's own, so a name
//! read this way is kept only when it looks like a symbol; anything else leaves the launch
//! unnamed. The memory is read with `process_vm_readv`, which fails cleanly for an address the
//! process does not map or a process that has exited.

/// Offset of the name pointer in a driver function or kernel object.
pub const NAME_POINTER_OFFSET: u64 = 8;
/// Longest name read.
pub const MAX_NAME: usize = 4096;

/// `len` bytes of process `pid`'s memory at `addr`, or fewer when the read stops at an unmapped
/// page; `None` when nothing could be read.
fn read_mem(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` describes `buf`, which lives across the call and has `len` writable
    // bytes; the remote address is only read by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

/// Whether `name` looks like a kernel's symbol: 1 to [`MAX_NAME`] bytes, a letter, `_` or `$`
/// first, then letters, digits and `_ $ .` (mangled C++ names, PTX and Triton names).
pub fn plausible(name: &[u8]) -> bool {
    let first_ok = |b: u8| b.is_ascii_alphabetic() || b == b'_' || b == b'$';
    let rest_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.');
    !name.is_empty()
        && name.len() < MAX_NAME
        && first_ok(name[0])
        && name[1..].iter().all(|&b| rest_ok(b))
}

/// The name of driver handle `handle` in process `pid`, when its name pointer leads to a
/// plausible symbol.
pub fn function_name(pid: u32, handle: u64) -> Option<String> {
    let found = read_name(pid, handle);
    if found.is_none() && tracing::enabled!(tracing::Level::DEBUG) {
        // What the object held instead, for whoever looks at a driver that lays it out
        // differently.
        let words: Vec<String> = read_mem(pid, handle, 32)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|w| format!("{:#x}", u64::from_le_bytes(w.try_into().expect("8 bytes"))))
            .collect();
        tracing::debug!(pid, handle = %format!("{handle:#x}"), ?words, "driver handle without a readable name");
    }
    found
}

fn read_name(pid: u32, handle: u64) -> Option<String> {
    let word = read_mem(pid, handle.checked_add(NAME_POINTER_OFFSET)?, 8)?;
    let ptr = u64::from_le_bytes(word.get(..8)?.try_into().ok()?);
    if ptr < 0x1000 {
        return None;
    }
    // The string may end close to the end of its mapping: read in page-bounded pieces.
    let mut name = Vec::new();
    let mut at = ptr;
    while name.len() < MAX_NAME {
        let to_page_end = 4096 - (at % 4096) as usize;
        let chunk = read_mem(pid, at, to_page_end.min(MAX_NAME - name.len()))?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            name.extend_from_slice(&chunk[..end]);
            return plausible(&name)
                .then(|| String::from_utf8(name).ok())
                .flatten();
        }
        name.extend_from_slice(&chunk);
        at += chunk.len() as u64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_pass_and_anything_else_does_not() {
        for ok in [
            &b"_Z6kernelPf"[..],
            b"triton_poi_fused_add_0",
            b"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64",
            b"$__internal_0_$__cuda_sm3x_div_rn_noftz_f32_slowpath",
            b"ampere_sgemm_128x64_nn.kd",
        ] {
            assert!(plausible(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b""[..],
            b"9lives",
            b"has space",
            b"\x01\x02\x03",
            b"caf\xc3\xa9",
            &[b'a'; MAX_NAME][..],
        ] {
            assert!(!plausible(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A driver-like object in this process: a word, then a pointer to the name.
    #[repr(C)]
    struct Object {
        first: u64,
        name: *const u8,
    }

    #[test]
    fn a_name_behind_the_second_word_is_read_and_checked() {
        let me = std::process::id();
        let name = b"_Z14kreplay_probe1Pf\0";
        let obj = Object {
            first: 7,
            name: name.as_ptr(),
        };
        let handle = &obj as *const Object as u64;
        assert_eq!(
            function_name(me, handle).as_deref(),
            Some("_Z14kreplay_probe1Pf")
        );
        let garbage = b"not a symbol\0";
        let bad = Object {
            first: 7,
            name: garbage.as_ptr(),
        };
        assert_eq!(function_name(me, &bad as *const Object as u64), None);
        let null = Object {
            first: obj.first,
            name: std::ptr::null(),
        };
        assert_eq!(function_name(me, &null as *const Object as u64), None);
        // An address nobody maps.
        assert_eq!(function_name(me, 0x10), None);
    }

    #[test]
    fn a_name_that_ends_on_the_next_page_is_read_whole() {
        // A name laid across a page boundary of one allocation.
        let mut page = vec![0u8; 3 * 4096];
        let base = page.as_ptr() as usize;
        let start = (4096 - base % 4096) + 4096 - 5;
        let text = b"_Z3fooPfS_S_\0";
        page[start..start + text.len()].copy_from_slice(text);
        let obj = Object {
            first: 0,
            name: page[start..].as_ptr(),
        };
        assert_eq!(
            function_name(std::process::id(), &obj as *const Object as u64).as_deref(),
            Some("_Z3fooPfS_S_")
        );
    }
}
