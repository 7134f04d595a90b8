//! The subcommands of `kreplay`, one file each.
pub mod audit;
pub mod probe;
pub mod trace;
