//! HSA agents as the tool describes them to the merge (`GpuDevice`): the agent handle the work
//! records carry, and a readable name from `hsa_agent_get_info`: the product name
//! (`HSA_AMD_AGENT_INFO_PRODUCT_NAME`) and the `gfx` target (`HSA_AGENT_INFO_NAME`), as
//! `AMD Instinct MI300X (gfx942)`. Queues are handles (the queue's address); the ordinal is
//! left unknown: the merge names an HSA device by its handle.

use core::ffi::c_void;

use kreplay_common::stream::{GpuDevice, UNKNOWN_ORDINAL, gpu_runtime, queue_ids};

use super::ffi::{hsa_agent_t, info, status};
use super::tables::Next;

/// Bytes of the agent's name attributes (`char[64]`).
const NAME_BYTES: usize = 64;

/// Attribute `attr` of `agent`, a `char[64]` string; empty when the runtime has none.
fn text(next: &Next, agent: u64, attr: u32) -> String {
    let Some(get) = next.core.hsa_agent_get_info_fn else {
        return String::new();
    };
    let mut buf = [0u8; NAME_BYTES];
    // SAFETY: both name attributes write at most 64 bytes into the buffer.
    let st = unsafe {
        get(
            hsa_agent_t { handle: agent },
            attr,
            buf.as_mut_ptr() as *mut c_void,
        )
    };
    if st != status::SUCCESS {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
    String::from_utf8_lossy(&buf[..end]).trim().to_owned()
}

/// The description of `agent`: `PRODUCT (gfxNNN)`, or whichever of the two the runtime gives.
pub fn describe(next: &Next, agent: u64) -> GpuDevice {
    let product = text(next, agent, info::AGENT_PRODUCT_NAME);
    let target = text(next, agent, info::AGENT_NAME);
    let name = match (product.is_empty(), target.is_empty()) {
        (false, false) if product != target => format!("{product} ({target})"),
        (false, _) => product,
        (true, _) => target,
    };
    GpuDevice {
        pid: crate::record::current_pid(),
        device: agent,
        runtime: gpu_runtime::HSA,
        queues: queue_ids::HANDLE,
        ordinal: UNKNOWN_ORDINAL,
        name,
    }
}

/// Records the description of `agent` unless this process described it already.
pub fn announce(next: &Next, agent: u64) {
    crate::record::describe_device_once(agent, || describe(next, agent));
}
