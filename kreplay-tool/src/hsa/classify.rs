//! Which HSA allocations replay tracks: coarse-grained device memory only. Kernarg, host and
//! fine-grained memory are excluded, and so is anything allocated with the EXECUTABLE flag
//! (HIP's kernarg pools, profilers' buffers) — filtered from the allocate flags before the
//! pointer-info query is even made.

use super::ffi::alloc_flags::EXECUTABLE as ALLOC_EXECUTABLE;
use super::ffi::pointer_type::{HSA as POINTER_TYPE_HSA, UNKNOWN as POINTER_TYPE_UNKNOWN};
use super::ffi::pool_flags::{
    COARSE_GRAINED, EXTENDED_SCOPE_FINE_GRAINED as EXTENDED_FINE_GRAINED, FINE_GRAINED,
    KERNARG_INIT,
};
use crate::engine::backend::PointerInfo;

/// What classification asks the runtime (`hsa_amd_pointer_info`, the agent's device type).
pub trait PointerQuery {
    /// Classifies `ptr`; `None` when the runtime does not know it.
    fn pointer_info(&self, ptr: u64) -> Option<PointerInfo>;
    /// Whether `agent` is a GPU.
    fn agent_is_gpu(&self, agent: u64) -> bool;
}

/// Why an allocation is not tracked (or that it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Coarse-grained device memory of a GPU: tracked, owned by `agent`.
    Tracked {
        /// Base address.
        base: u64,
        /// Size in bytes.
        size: u64,
        /// Owning agent.
        agent: u64,
    },
    /// Allocated with the EXECUTABLE flag.
    Executable,
    /// Kernarg memory.
    Kernarg,
    /// Fine-grained memory.
    FineGrained,
    /// Host memory (owned by a CPU agent, or locked host memory).
    Host,
    /// The runtime does not know the pointer, or does not say its pool's flags.
    Unknown,
}

/// Classifies an allocation of `flags` at `ptr`; `pool_flags` are the pool's (or region's)
/// global flags when the wrapper knows them, used when pointer info does not report them.
pub fn classify<B: PointerQuery>(
    backend: &B,
    ptr: u64,
    alloc_flags: u32,
    pool_flags: Option<u32>,
) -> Class {
    if alloc_flags & ALLOC_EXECUTABLE != 0 {
        return Class::Executable;
    }
    match backend.pointer_info(ptr) {
        Some(info) => classify_info(&info, pool_flags, backend.agent_is_gpu(info.owner)),
        None => Class::Unknown,
    }
}

/// The decision for one pointer-info answer (`owner_is_gpu`: the owner agent is a GPU).
pub fn classify_info(info: &PointerInfo, pool_flags: Option<u32>, owner_is_gpu: bool) -> Class {
    if info.kind != POINTER_TYPE_HSA {
        return if info.kind == POINTER_TYPE_UNKNOWN {
            Class::Unknown
        } else {
            Class::Host
        };
    }
    let Some(flags) = info.global_flags.or(pool_flags) else {
        return Class::Unknown;
    };
    if flags & KERNARG_INIT != 0 {
        return Class::Kernarg;
    }
    if flags & (FINE_GRAINED | EXTENDED_FINE_GRAINED) != 0 {
        return Class::FineGrained;
    }
    if !owner_is_gpu {
        return Class::Host;
    }
    if flags & COARSE_GRAINED == 0 || info.size == 0 {
        return Class::Unknown;
    }
    Class::Tracked {
        base: info.base,
        size: info.size,
        agent: info.owner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::FakeBackend;

    impl PointerQuery for FakeBackend {
        fn pointer_info(&self, ptr: u64) -> Option<PointerInfo> {
            FakeBackend::pointer_info(self, ptr)
        }
        fn agent_is_gpu(&self, agent: u64) -> bool {
            FakeBackend::agent_is_gpu(self, agent)
        }
    }

    #[test]
    fn only_coarse_grained_gpu_memory_is_tracked() {
        let fake = FakeBackend::new();
        let gpu = fake.add_alloc(0x10000, 4096, 7, Some(COARSE_GRAINED));
        let kernarg = fake.add_alloc(0x20000, 4096, 1, Some(KERNARG_INIT | FINE_GRAINED));
        let fine = fake.add_alloc(0x30000, 4096, 1, Some(FINE_GRAINED));
        let host_coarse = fake.add_alloc(0x40000, 4096, 1, Some(COARSE_GRAINED));
        assert_eq!(
            classify(&fake, gpu + 16, 0, None),
            Class::Tracked {
                base: 0x10000,
                size: 4096,
                agent: 7
            }
        );
        assert_eq!(classify(&fake, kernarg, 0, None), Class::Kernarg);
        assert_eq!(classify(&fake, fine, 0, None), Class::FineGrained);
        assert_eq!(classify(&fake, host_coarse, 0, None), Class::Host);
        assert_eq!(classify(&fake, 0x90000, 0, None), Class::Unknown);
    }

    #[test]
    fn the_executable_flag_is_filtered_before_the_pointer_query() {
        let fake = FakeBackend::new();
        let gpu = fake.add_alloc(0x10000, 4096, 7, Some(COARSE_GRAINED));
        assert_eq!(
            classify(&fake, gpu, ALLOC_EXECUTABLE, None),
            Class::Executable
        );
        assert_eq!(
            fake.pointer_queries(),
            0,
            "no pointer-info query for EXECUTABLE"
        );
        classify(&fake, gpu, 0, None);
        assert_eq!(fake.pointer_queries(), 1);
    }

    #[test]
    fn pool_flags_stand_in_when_pointer_info_has_none() {
        let fake = FakeBackend::new();
        let gpu = fake.add_alloc(0x10000, 8192, 7, None);
        assert_eq!(classify(&fake, gpu, 0, None), Class::Unknown);
        assert_eq!(
            classify(&fake, gpu, 0, Some(COARSE_GRAINED)),
            Class::Tracked {
                base: 0x10000,
                size: 8192,
                agent: 7
            }
        );
        let locked = PointerInfo {
            kind: 2,
            base: 0x1000,
            size: 64,
            owner: 1,
            global_flags: None,
        };
        assert_eq!(
            classify_info(&locked, Some(COARSE_GRAINED), false),
            Class::Host
        );
    }
}
