//! Rendering the application's annotations (roctx, NVTX: `Annotation` records).
//!
//! - Pushed ranges are slices on the calling thread's track, opened at the push and closed at
//!   the pop, so the runtime calls made inside nest in them. They go on the sequence of that
//!   thread's calls and queue behind its held launches ([`super::holdback`]), which keeps the
//!   sequence in time order. A pop with nothing pushed (pushed before the trace began) is
//!   counted, not drawn; a range still open at the end of the trace closes at its last event.
//! - Marks are instants on the calling thread's track.
//! - Start/end ranges may end on another thread: each becomes a slice on a track of its
//!   process per source and domain (`NVTX ranges`, `NVTX ranges (DOMAIN)`), written at the end of
//!   the merge (overlapping ones on sibling lanes). Memory: one entry per range not yet ended,
//!   and one per ended range until the end; applications make few of these.
//! - Every range and mark carries its `domain` (non-default only), `category` (its name when
//!   the application named it) and `source`.
//!
//! This module keeps the state; `render/annotations.rs` writes the events.
use kreplay_common::stream::{Annotation, annotation};

use super::FastMap;
use crate::perfetto::Sequence;

/// A start/end range: when it began and what it is.
pub struct Started {
    /// Its start.
    pub ts: u64,
    /// Its message.
    pub name: String,
    /// Its domain ("" for the default one).
    pub domain: String,
    /// Its category (0: none).
    pub category: u32,
    /// Its source (roctx, NVTX).
    pub source: u8,
}

/// A start/end range that ended, waiting for the end of the merge.
pub struct Ended {
    /// Its process.
    pub pid: u32,
    /// Its start.
    pub begin: u64,
    /// Its end.
    pub end: u64,
    /// What it is.
    pub range: Started,
}

/// The annotation state of a merge.
#[derive(Default)]
pub struct UserRanges {
    /// Ranges pushed and not yet popped, per thread.
    pub depth: FastMap<(u32, u32), u32>,
    /// The sequence of each thread's calls and annotations.
    pub seqs: FastMap<(u32, u32), Sequence>,
    /// Category names by (pid, domain, category).
    categories: FastMap<(u32, String, u32), String>,
    started: FastMap<(u32, u64), Started>,
    /// Start/end ranges that ended, in end order.
    pub ended: Vec<Ended>,
    /// The latest time any record reached: where ranges still open at the end close.
    pub latest: u64,
    /// Ranges and marks written.
    pub written: u64,
    /// Pops and ends with no push or start seen.
    pub unmatched: u64,
}

impl UserRanges {
    /// Keeps what `a` says about names and start/end ranges; true when it is a push, pop or
    /// mark, for the caller to write on its thread's track.
    pub fn take(&mut self, a: &Annotation) -> bool {
        self.latest = self.latest.max(a.ts_ns);
        match a.kind {
            annotation::NAME_CATEGORY => {
                self.categories
                    .insert((a.pid, a.domain.clone(), a.category), a.name.clone());
            }
            annotation::START => {
                let s = Started {
                    ts: a.ts_ns,
                    name: a.name.clone(),
                    domain: a.domain.clone(),
                    category: a.category,
                    source: a.source,
                };
                self.started.insert((a.pid, a.id), s);
            }
            annotation::END => match self.started.remove(&(a.pid, a.id)) {
                Some(range) => self.ended.push(Ended {
                    pid: a.pid,
                    begin: range.ts,
                    end: a.ts_ns.max(range.ts),
                    range,
                }),
                None => self.unmatched += 1,
            },
            annotation::PUSH | annotation::POP | annotation::MARK => return true,
            // A newer writer's kind: skipped, as an unknown tag is.
            _ => {}
        }
        false
    }

    /// The name the application gave `category` of `domain` in process `pid`, if any.
    pub fn category_name(&self, pid: u32, domain: &str, category: u32) -> Option<String> {
        (category != 0)
            .then(|| {
                self.categories
                    .get(&(pid, domain.to_owned(), category))
                    .cloned()
            })
            .flatten()
    }
}
