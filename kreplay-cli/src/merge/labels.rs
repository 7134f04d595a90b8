//! The names a trace's tracks carry for a runtime layer and for a process.

use kreplay_common::api::Library;

use super::FastMap;

/// The name a runtime layer's counter carries.
pub fn layer_name(layer: Library) -> &'static str {
    match layer {
        Library::Hsa => "HSA",
        Library::Hip => "HIP",
        Library::Cuda => "CUDA driver",
        Library::CudaRt => "CUDA runtime",
        Library::User => "user",
        Library::Roctx => "roctx",
    }
}

/// The name a process's tracks carry: its command from the stream, else `pid N`.
pub(crate) fn process_label(names: &FastMap<u32, String>, pid: u32) -> String {
    names
        .get(&pid)
        .cloned()
        .unwrap_or_else(|| format!("pid {pid}"))
}
