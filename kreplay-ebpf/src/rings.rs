//! The ring buffers call records go to: one per CPU, so that probed threads on different CPUs
//! never take the same ring's lock or write the same cache lines. There are 16 rings in the
//! object (`kreplay_common::probe::RING_SHARDS`); the loader sets how many are in use
//! ([`RING_COUNT`], at most one per online CPU) and shrinks the rest to one page. CPUs beyond
//! the count share rings by modulo.
use aya_ebpf::{Global, helpers::generated::bpf_get_smp_processor_id, macros::map, maps::RingBuf};

macro_rules! rings {
    ($($name:ident),*) => {
        $(
            /// One CPU's (or several CPUs') ring; its size is set by userspace at load time.
            #[map]
            static $name: RingBuf = RingBuf::with_byte_size(1 << 22, 0);
        )*
    };
}

rings!(
    EVENTS0, EVENTS1, EVENTS2, EVENTS3, EVENTS4, EVENTS5, EVENTS6, EVENTS7, EVENTS8, EVENTS9,
    EVENTS10, EVENTS11, EVENTS12, EVENTS13, EVENTS14, EVENTS15
);

/// Rings in use (1 to 16), set by the loader.
#[unsafe(no_mangle)]
static RING_COUNT: Global<u32> = Global::new(1);

/// This CPU's ring.
#[inline(always)]
pub fn ring() -> &'static RingBuf {
    // SAFETY: plain helper call.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let n = RING_COUNT.load();
    let i = if n == 0 { 0 } else { cpu % n };
    match i {
        0 => &EVENTS0,
        1 => &EVENTS1,
        2 => &EVENTS2,
        3 => &EVENTS3,
        4 => &EVENTS4,
        5 => &EVENTS5,
        6 => &EVENTS6,
        7 => &EVENTS7,
        8 => &EVENTS8,
        9 => &EVENTS9,
        10 => &EVENTS10,
        11 => &EVENTS11,
        12 => &EVENTS12,
        13 => &EVENTS13,
        14 => &EVENTS14,
        _ => &EVENTS15,
    }
}
