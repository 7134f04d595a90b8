//! PTX text: the module-scope variable declarations, read directly and through the pointer
//! entry the driver hooks use (NUL-terminated, as the application passes PTX).
#![no_main]

use kreplay_tool::cuda::image::{FATBIN_MAGIC, FATBIN_WRAPPER_MAGIC, globals_of, ptx_globals};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ptx_globals(&String::from_utf8_lossy(data));
    let text: Vec<u8> = data
        .iter()
        .copied()
        .take_while(|&c| c != 0)
        .chain([0])
        .collect();
    // Other magics make globals_of trust the headers' lengths: only text is fed to it.
    let magic = text
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic.is_some_and(|m| !matches!(m, FATBIN_MAGIC | FATBIN_WRAPPER_MAGIC | 0x464c_457f)) {
        // SAFETY: `text` is NUL-terminated, at least 4 bytes (every image is) and not a fat
        // binary, wrapper or ELF image, so globals_of reads it as a C string and nothing past
        // its NUL.
        let _ = unsafe { globals_of(text.as_ptr()) };
    }
});
