//! The runtimes' names for their status codes, so messages say `HSA_STATUS_ERROR (0x1000)` or
//! `CUDA_ERROR_OUT_OF_MEMORY (2)` rather than a bare number. Which table applies follows from
//! the failing call's name (`hsa_*` or `cu*`). HSA values are `hsa_status_t` from `hsa.h` and
//! `hsa_ext_amd.h`; CUDA values are `CUresult` from `cuda.h`.

/// `hsa_status_t` values and their names.
const HSA: &[(u32, &str)] = &[
    (0x0, "HSA_STATUS_SUCCESS"),
    (0x1, "HSA_STATUS_INFO_BREAK"),
    (40, "HSA_STATUS_ERROR_INVALID_MEMORY_POOL"),
    (41, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"),
    (42, "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION"),
    (43, "HSA_STATUS_ERROR_MEMORY_FAULT"),
    (44, "HSA_STATUS_CU_MASK_REDUCED"),
    (0x1000, "HSA_STATUS_ERROR"),
    (0x1001, "HSA_STATUS_ERROR_INVALID_ARGUMENT"),
    (0x1002, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION"),
    (0x1003, "HSA_STATUS_ERROR_INVALID_ALLOCATION"),
    (0x1004, "HSA_STATUS_ERROR_INVALID_AGENT"),
    (0x1005, "HSA_STATUS_ERROR_INVALID_REGION"),
    (0x1006, "HSA_STATUS_ERROR_INVALID_SIGNAL"),
    (0x1007, "HSA_STATUS_ERROR_INVALID_QUEUE"),
    (0x1008, "HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
    (0x1009, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT"),
    (0x100A, "HSA_STATUS_ERROR_RESOURCE_FREE"),
    (0x100B, "HSA_STATUS_ERROR_NOT_INITIALIZED"),
    (0x100C, "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW"),
    (0x100D, "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS"),
    (0x100E, "HSA_STATUS_ERROR_INVALID_INDEX"),
    (0x100F, "HSA_STATUS_ERROR_INVALID_ISA"),
    (0x1010, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT"),
    (0x1011, "HSA_STATUS_ERROR_INVALID_EXECUTABLE"),
    (0x1012, "HSA_STATUS_ERROR_FROZEN_EXECUTABLE"),
    (0x1013, "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME"),
    (0x1014, "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED"),
    (0x1015, "HSA_STATUS_ERROR_VARIABLE_UNDEFINED"),
    (0x1016, "HSA_STATUS_ERROR_EXCEPTION"),
    (0x1017, "HSA_STATUS_ERROR_INVALID_ISA_NAME"),
    (0x1018, "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL"),
    (0x1019, "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL"),
    (0x1020, "HSA_STATUS_ERROR_INVALID_FILE"),
    (0x1021, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER"),
    (0x1022, "HSA_STATUS_ERROR_INVALID_CACHE"),
    (0x1023, "HSA_STATUS_ERROR_INVALID_WAVEFRONT"),
    (0x1024, "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP"),
    (0x1025, "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE"),
    (0x1026, "HSA_STATUS_ERROR_FATAL"),
];

/// `CUresult` values kreplay's calls can return, and their names.
const CUDA: &[(u32, &str)] = &[
    (0, "CUDA_SUCCESS"),
    (1, "CUDA_ERROR_INVALID_VALUE"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    (3, "CUDA_ERROR_NOT_INITIALIZED"),
    (4, "CUDA_ERROR_DEINITIALIZED"),
    (100, "CUDA_ERROR_NO_DEVICE"),
    (101, "CUDA_ERROR_INVALID_DEVICE"),
    (200, "CUDA_ERROR_INVALID_IMAGE"),
    (201, "CUDA_ERROR_INVALID_CONTEXT"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
    (218, "CUDA_ERROR_INVALID_PTX"),
    (300, "CUDA_ERROR_INVALID_SOURCE"),
    (400, "CUDA_ERROR_INVALID_HANDLE"),
    (401, "CUDA_ERROR_ILLEGAL_STATE"),
    (500, "CUDA_ERROR_NOT_FOUND"),
    (600, "CUDA_ERROR_NOT_READY"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
    (800, "CUDA_ERROR_NOT_PERMITTED"),
    (801, "CUDA_ERROR_NOT_SUPPORTED"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
    (999, "CUDA_ERROR_UNKNOWN"),
];

/// The runtime's name of `status` as returned by `call`, when known.
pub fn name(call: &str, status: u32) -> Option<&'static str> {
    let table = if call.starts_with("hsa_") {
        HSA
    } else if call.starts_with("cu") {
        CUDA
    } else {
        return None;
    };
    table.iter().find(|(v, _)| *v == status).map(|(_, n)| *n)
}

/// `NAME (value)` for a known status (hex for HSA, decimal for CUDA, as their headers write
/// them), else the value alone in hex.
pub fn describe(call: &str, status: u32) -> String {
    match name(call, status) {
        Some(n) if call.starts_with("hsa_") => format!("{n} ({status:#x})"),
        Some(n) => format!("{n} ({status})"),
        None => format!("status {status:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_named_by_the_runtime_of_the_call() {
        assert_eq!(
            describe("hsa_memory_copy", 0x1000),
            "HSA_STATUS_ERROR (0x1000)"
        );
        assert_eq!(
            describe("hsa_amd_memory_pool_allocate", 0x1008),
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008)"
        );
        assert_eq!(describe("cuMemcpyDtoH_v2", 999), "CUDA_ERROR_UNKNOWN (999)");
        assert_eq!(describe("cuMemAlloc_v2", 2), "CUDA_ERROR_OUT_OF_MEMORY (2)");
        // Unknown codes, and calls of neither runtime, keep the number.
        assert_eq!(describe("cuLaunchKernel", 12345), "status 0x3039");
        assert_eq!(describe("dlopen", 1), "status 0x1");
    }

    #[test]
    fn no_status_is_named_twice() {
        for t in [HSA, CUDA] {
            let mut v: Vec<u32> = t.iter().map(|e| e.0).collect();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), t.len());
        }
    }
}
