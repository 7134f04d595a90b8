//! Fat binaries as the application hands them to the driver (entries possibly zstd-compressed).
#![no_main]

use kreplay_tool::cuda::image::fatbin_globals;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fatbin_globals(data);
});
