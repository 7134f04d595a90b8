//! The subcommands of `kreplay`, one file each.
pub mod probe;
pub mod trace;
