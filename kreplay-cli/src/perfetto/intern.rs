//! Name interning: one writer-wide table of names behind cheap handles, and per-sequence iid
//! tables that say which names a sequence has already defined in its `InternedData`.
//!
//! Callers resolve a name to a handle once (`TraceWriter::event_name`); an event then costs an
//! index into the sequence's table, not a string hash. Perfetto scopes iids to a sequence, so
//! each sequence numbers its names from 1 (iid 0 is invalid) in the order it first uses them.

use std::collections::HashMap;

/// A handle to an interned slice/instant name; get one from `TraceWriter::event_name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventName(pub(crate) u32);

/// A handle to an interned debug-annotation name; get one from
/// `TraceWriter::annotation_name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AnnotationName(pub(crate) u32);

/// Writer-wide table of distinct names, indexed by handle.
#[derive(Default)]
pub(crate) struct NameTable {
    names: Vec<Box<str>>,
    index: HashMap<Box<str>, u32>,
}

impl NameTable {
    /// Returns the index of `name`, adding it on first sight.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&idx) = self.index.get(name) {
            return idx;
        }
        let idx = u32::try_from(self.names.len()).expect("fewer than 2^32 distinct names");
        self.names.push(name.into());
        self.index.insert(name.into(), idx);
        idx
    }

    /// The name behind `idx`.
    pub(crate) fn get(&self, idx: u32) -> &str {
        &self.names[idx as usize]
    }
}

/// One sequence's iids for one kind of name: `iids[global index]` is the iid, 0 if the
/// sequence has not defined the name yet.
#[derive(Default)]
pub(crate) struct SeqIids {
    iids: Vec<u64>,
    next: u64,
}

impl SeqIids {
    /// Returns the sequence's iid for the name at `global`, and whether this call defined it
    /// (so the packet being written must carry it in `interned_data`).
    #[inline]
    pub(crate) fn iid(&mut self, global: u32) -> (u64, bool) {
        let slot = global as usize;
        if let Some(&iid) = self.iids.get(slot)
            && iid != 0
        {
            return (iid, false);
        }
        if self.iids.len() <= slot {
            self.iids.resize(slot + 1, 0);
        }
        self.next += 1;
        self.iids[slot] = self.next;
        (self.next, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deduplicated_and_kept() {
        let mut table = NameTable::default();
        let a = table.intern("hipMalloc");
        let b = table.intern("hipFree");
        assert_eq!(table.intern("hipMalloc"), a);
        assert_ne!(a, b);
        assert_eq!(table.get(a), "hipMalloc");
        assert_eq!(table.get(b), "hipFree");
    }

    #[test]
    fn sequence_iids_start_at_one_and_are_defined_once() {
        let mut seq = SeqIids::default();
        assert_eq!(seq.iid(5), (1, true));
        assert_eq!(seq.iid(0), (2, true));
        assert_eq!(seq.iid(5), (1, false));
        assert_eq!(seq.iid(0), (2, false));
        // A second sequence numbers independently.
        let mut other = SeqIids::default();
        assert_eq!(other.iid(0), (1, true));
    }
}
