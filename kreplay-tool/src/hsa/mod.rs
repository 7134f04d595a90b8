//! HSA (ROCm) bindings: the raw ABI kreplay-tool uses when loaded through `HSA_TOOLS_LIB`,
//! the engine's HSA backend, the saved tables, the wrappers and the queue interceptor, and the
//! `HSA_TOOLS_LIB` entry points ([`tool`]) with the process-wide state they create ([`state`]),
//! and the attach mode that waits for a `kreplay -p PID` ([`attach`]); each agent the records
//! name is described once ([`devices`]).

pub mod attach;
pub mod backend;
pub mod classify;
pub mod devices;
pub mod ffi;
pub mod hooks;
pub mod install;
pub mod intercept;
pub mod state;
pub mod submissions;
pub mod tables;
pub mod timeline;
pub mod tool;
