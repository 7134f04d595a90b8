//! The BPF side seen from userspace: loading, attaching, symbol resolution and record intake.
pub mod btf;
pub mod cost;
pub mod counters;
pub mod debug_log;
pub mod elf;
pub mod follow;
pub mod intake;
pub mod loader;
pub mod multi;
pub mod order;
pub mod priority;
pub mod ring;
pub mod rings;
