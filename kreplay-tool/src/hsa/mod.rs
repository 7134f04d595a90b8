//! HSA (ROCm) bindings: the raw ABI kreplay-tool uses when loaded through `HSA_TOOLS_LIB`.

pub mod ffi;
