//! `/proc/PID/maps` texts: the CLI's mapping list (kernel-name lookup) and its mapped paths
//! (runtime-library discovery).
#![no_main]

use kreplay_cli::trace::{discover::mapped_paths, kernels::parse_maps};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_maps(&text);
    let _ = mapped_paths(&text);
});
