//! `kreplay replay`'s machinery: what it runs ([`plan`]), the files of its run directory
//! ([`files`]), the progress line ([`progress`]), the per-kernel summary read from the tool's
//! streams ([`summary`], [`durations`]) and its tables ([`table`]), and what the run says as it
//! ends ([`ending`]); with `-p PID`, the session with a running process ([`attach`]).
pub mod attach;
pub mod durations;
pub mod ending;
pub mod files;
pub mod plan;
pub mod progress;
pub mod summary;
pub mod table;
