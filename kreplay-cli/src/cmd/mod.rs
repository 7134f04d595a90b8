//! The subcommands of `kreplay`, one file each.
pub mod audit;
pub mod merge;
pub mod probe;
pub mod replay;
pub mod trace;
