//! What the engine is asked to replay ([`Request`]) and how a replay ended ([`Outcome`]).

use super::arena::SnapshotArena;
use super::backend::Backend;
use super::config::SnapshotPolicy;

/// How a replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every pass ran.
    Replayed {
        /// Passes run.
        passes: u32,
        /// Whether any pass differed from the first.
        nondeterministic: bool,
    },
    /// Not replayed (the caller runs the dispatch once, normally).
    Declined(String),
    /// Stopped early: a pass or the restore before one failed. Every byte of the snapshot was
    /// written back where the runtime allowed (a region it refused is named in the reason and
    /// logged as an error); the caller runs the dispatch once, normally, from that state.
    Failed(String),
}

/// One replay request.
pub struct Request<'a, B: Backend> {
    /// The agent the dispatch runs on.
    pub agent: u64,
    /// The dispatch (submitted with the engine's own completion signal).
    pub dispatch: &'a B::Dispatch,
    /// Passes (>= 1).
    pub passes: u32,
    /// Hash each pass's output.
    pub check_determinism: bool,
    /// Correlation id for the records.
    pub correlation: u64,
    /// Snapshot placement, chunking and budget.
    pub policy: SnapshotPolicy,
    /// Buffers kept between replays (`None`: allocate and free per replay).
    pub arena: Option<&'a SnapshotArena>,
    /// Puts every byte back after the last pass too, so the dispatch the caller runs next
    /// starts from the snapshot's memory: replay in a running process, where the
    /// application's own launch cannot be skipped and follows the passes.
    pub restore_after: bool,
}
