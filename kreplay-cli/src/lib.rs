//! kreplay-cli: the loader, stream merger and Perfetto writer behind the `kreplay` command.
pub mod attach;
pub mod audit;
pub mod duration;
pub mod function_probe;
pub mod inject;
pub mod launch;
pub mod merge;
pub mod output;
pub mod perfetto;
pub mod preflight;
pub mod probes;
pub mod quick_exit;
pub mod replay;
pub mod trace;
pub mod trace_file;
