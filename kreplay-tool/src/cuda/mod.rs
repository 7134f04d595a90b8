//! kreplay-tool on the CUDA driver: the interposition that sees the application's driver calls
//! ([`interpose`]), what each wrapped call does ([`hooks`], [`launch`]), the real driver loaded at
//! run time ([`driver`]), module-variable names read from images ([`image`], [`elf`]), and the
//! engine's backend ([`backend`], with its device-side abilities in [`chunks`] and
//! [`one_pass`] over the kernels [`device_ops`] loads and launches; each pass timed on the GPU
//! by [`pass_timer`]). Replay in a process kreplay joined while it ran goes through CUPTI's
//! launch callbacks instead of interposition ([`attached`], with what a launch reaches from
//! [`arguments`]). The engine (tracker, snapshot/restore, replay loop) is the same one HSA
//! uses.

pub mod arguments;
pub mod attached;
pub mod backend;
pub mod buffer_ops;
pub mod chunks;
pub mod device_ops;
pub mod devices;
pub mod driver;
pub mod elf;
#[cfg(target_arch = "x86_64")]
pub mod exports;
pub mod ffi;
pub mod graph;
pub mod hooks;
pub mod image;
#[cfg(target_arch = "x86_64")]
pub mod interpose;
pub mod kernel_buffers;
pub mod launch;
pub mod launch_call;
pub mod one_pass;
pub mod pass_timer;
#[cfg(target_arch = "x86_64")]
pub mod real_dlsym;
pub mod room;
pub mod state;
