//! Track identity and per-track slice state: deterministic uuids, the descriptor each kind of
//! track gets, the stack of open slices that keeps slices on one track strictly nested, and
//! overflow lanes for overlapping GPU work.

use super::proto::{
    CounterDescriptor, CounterUnit, ProcessDescriptor, ThreadDescriptor, TrackDescriptor,
};
use super::wire::Preencoded;

/// A track defined on a `TraceWriter`; events name the track they are on with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Track {
    pub(crate) index: u32,
    pub(crate) uuid: u64,
}

impl Track {
    /// The track's uuid as written in its `TrackDescriptor` (stable across runs).
    pub fn uuid(&self) -> u64 {
        self.uuid
    }
}

/// What a track stands for; the uuid is a hash of the kind and its identifying numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackKey {
    /// A process, by pid.
    Process {
        /// Process id.
        pid: i32,
    },
    /// A thread, by pid and tid.
    Thread {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
    },
    /// A GPU device or agent, by a caller-chosen id (e.g. the agent's ordinal).
    Device {
        /// Device id.
        id: u64,
    },
    /// A track under another one (a queue or stream), by the parent's uuid and a key (e.g. the
    /// queue address or stream handle).
    Child {
        /// Parent track uuid.
        parent: u64,
        /// Key unique under the parent.
        key: u64,
    },
    /// A counter track, by parent uuid (0 for none) and the hash of its name.
    Counter {
        /// Parent track uuid, or 0.
        parent: u64,
        /// `name_hash` of the counter's name.
        name_hash: u64,
    },
    /// Overflow lane `lane` (1, 2, ...) of the track `base`, for slices that overlap.
    Lane {
        /// The base track's uuid.
        base: u64,
        /// Lane number, from 1.
        lane: u32,
    },
}

impl TrackKey {
    /// The track uuid: a fixed 64-bit mix of the kind and its fields, so the same key gives
    /// the same uuid in every run, on every machine. Never 0 (0 means "no track" to Perfetto).
    pub fn uuid(&self) -> u64 {
        let (kind, a, b) = match *self {
            TrackKey::Process { pid } => (1u64, pid as u32 as u64, 0),
            TrackKey::Thread { pid, tid } => (2, pid as u32 as u64, tid as u32 as u64),
            TrackKey::Device { id } => (3, id, 0),
            TrackKey::Child { parent, key } => (4, parent, key),
            TrackKey::Counter { parent, name_hash } => (5, parent, name_hash),
            TrackKey::Lane { base, lane } => (6, base, u64::from(lane)),
        };
        let h = mix(mix(mix(0x6b72_6570_6c61_7900 ^ kind) ^ a) ^ b);
        if h == 0 { 1 } else { h }
    }
}

/// splitmix64's finalizer: a bijective 64-bit mix with good avalanche.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of a name, for keys that are names (counter tracks). Stable across runs and
/// platforms, unlike `std`'s randomly seeded hasher.
pub fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Builds the descriptor of a process track.
pub(crate) fn process_descriptor(uuid: u64, pid: i32, name: &str) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        process: Some(ProcessDescriptor {
            pid: Some(pid),
            process_name: Some(name.to_owned()),
        }),
        ..Default::default()
    }
}

/// Builds the descriptor of a thread track.
pub(crate) fn thread_descriptor(
    uuid: u64,
    parent: Option<u64>,
    pid: i32,
    tid: i32,
    name: &str,
) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: parent,
        thread: Some(ThreadDescriptor {
            pid: Some(pid),
            tid: Some(i64::from(tid)),
            thread_name: Some(name.to_owned()),
        }),
        ..Default::default()
    }
}

/// Builds the descriptor of a named track (device, queue, stream, lane).
pub(crate) fn named_descriptor(uuid: u64, parent: Option<u64>, name: &str) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: parent,
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

/// Builds the descriptor of a counter track.
pub(crate) fn counter_descriptor(
    uuid: u64,
    parent: Option<u64>,
    name: &str,
    unit: CounterUnit,
) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: parent,
        name: Some(name.to_owned()),
        counter: Some(CounterDescriptor {
            unit: Some(unit as i32),
            unit_name: None,
        }),
        ..Default::default()
    }
}

/// End time of a slice opened with `TraceWriter::begin`, whose end is not known yet.
pub(crate) const OPEN_END: u64 = u64::MAX;

/// Why a slice cannot go on a track.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NestError {
    /// The new slice ends after the enclosing open slice.
    Crosses { parent_end: u64 },
}

/// State of one track in a writer.
pub(crate) struct TrackState {
    pub(crate) uuid: u64,
    /// `TrackEvent.track_uuid` (field 11) pre-encoded.
    pub(crate) uuid_field: Preencoded,
    pub(crate) parent: Option<u64>,
    /// Name, kept for the descriptors of overflow lanes.
    pub(crate) name: Box<str>,
    /// End times of the slices open on this track at the writer's current time, outermost
    /// first; `OPEN_END` for slices opened with `begin`. Bounded by the nesting depth.
    pub(crate) open: Vec<u64>,
    /// Overflow lanes: (track index, busy until). Lane 0 is this track itself.
    pub(crate) lanes: Vec<(u32, u64)>,
}

impl TrackState {
    /// A track with nothing open.
    pub(crate) fn new(uuid: u64, parent: Option<u64>, name: &str, index: u32) -> Self {
        TrackState {
            uuid,
            uuid_field: Preencoded::default().uint(11, uuid),
            parent,
            name: name.into(),
            open: Vec::new(),
            lanes: vec![(index, 0)],
        }
    }

    /// Checks that a slice ending at `end` fits inside the innermost open slice. The caller has
    /// already closed every slice that ended at or before the new slice's begin.
    #[inline]
    pub(crate) fn check_fits(&self, end: u64) -> Result<(), NestError> {
        match self.open.last() {
            Some(&parent_end) if end > parent_end => Err(NestError::Crosses { parent_end }),
            _ => Ok(()),
        }
    }

    /// Removes the open slice ending at `end` (the innermost one when the caller kept to the
    /// nesting rules). Returns whether it was the innermost.
    pub(crate) fn close(&mut self, end: u64) -> bool {
        // The innermost first: the common case, a pop (`remove` calls memmove even for none).
        if self.open.last() == Some(&end) {
            self.open.pop();
            return true;
        }
        match self.open.iter().rposition(|&e| e == end) {
            Some(pos) => {
                self.open.remove(pos);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_stable_distinct_and_nonzero() {
        let p = TrackKey::Process { pid: 42 }.uuid();
        // Pinned: a change here changes the uuids of every trace kreplay writes.
        assert_eq!(p, 0x0982_0b6e_d150_e820);
        let keys = [
            TrackKey::Process { pid: 42 },
            TrackKey::Process { pid: 43 },
            TrackKey::Thread { pid: 42, tid: 42 },
            TrackKey::Thread { pid: 42, tid: 43 },
            TrackKey::Device { id: 42 },
            TrackKey::Child { parent: p, key: 0 },
            TrackKey::Child { parent: p, key: 1 },
            TrackKey::Counter {
                parent: p,
                name_hash: name_hash("live bytes"),
            },
            TrackKey::Counter {
                parent: 0,
                name_hash: name_hash("live bytes"),
            },
            TrackKey::Lane { base: p, lane: 1 },
            TrackKey::Lane { base: p, lane: 2 },
        ];
        let uuids: std::collections::HashSet<u64> = keys.iter().map(TrackKey::uuid).collect();
        assert_eq!(uuids.len(), keys.len());
        assert!(!uuids.contains(&0));
    }

    #[test]
    fn name_hash_is_fnv1a() {
        // FNV-1a 64 reference values.
        assert_eq!(name_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(name_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn nesting_accepts_children_and_rejects_crossing_slices() {
        let mut t = TrackState::new(1, None, "t", 0);
        assert_eq!(t.check_fits(100), Ok(()));
        t.open.push(100);
        assert_eq!(t.check_fits(100), Ok(()), "a child may end with its parent");
        assert_eq!(t.check_fits(50), Ok(()));
        assert_eq!(
            t.check_fits(101),
            Err(NestError::Crosses { parent_end: 100 })
        );
        t.open.push(OPEN_END);
        assert_eq!(t.check_fits(5_000), Ok(()), "inside an open-ended begin()");
    }

    #[test]
    fn close_reports_whether_the_slice_was_innermost() {
        let mut t = TrackState::new(1, None, "t", 0);
        t.open.extend([100, OPEN_END]);
        assert!(!t.close(100), "a begin() is still open inside");
        assert_eq!(t.open, vec![OPEN_END]);
        assert!(t.close(OPEN_END));
        assert!(t.open.is_empty());
        assert!(!t.close(7), "nothing open ends at 7");
    }
}
