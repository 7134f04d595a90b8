//! The CLI's scan of a mapped file's CUDA registration code (any file a traced process maps).
#![no_main]

use kreplay_cli::trace::registrations::registered_kernels;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(found) = registered_kernels(data) {
        let _ = found.len();
    }
});
