//! The subcommands of `kreplay`, one file each.
pub mod audit;
pub mod durations;
pub mod merge;
pub mod probe;
pub mod replay;
pub mod replay_progress;
pub mod replay_summary;
pub mod replay_table;
pub mod trace;
