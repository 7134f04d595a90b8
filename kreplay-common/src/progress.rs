//! The progress counters `kreplay replay` shares with the injected tool: a file of
//! [`LEN`] bytes (dispatches replayed, passes, nanoseconds inside kreplay, as little-endian
//! u64s) that the CLI creates and names in [`ENV`], and that the tool maps shared and adds to.

/// The variable naming the counters' file.
pub const ENV: &str = "KREPLAY_PROGRESS";
/// Bytes of the file: three 8-byte counters.
pub const LEN: usize = 24;
