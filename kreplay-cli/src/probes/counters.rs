//! The probes' loss and fault counters, as kreplay reads them (summed over CPUs).

/// Loss and fault counters summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Records that did not fit in the ring buffer.
    pub ringbuf_drops: u64,
    /// Calls whose entry state could not be saved.
    pub entry_map_full: u64,
    /// Returns without a saved entry.
    pub missing_entry: u64,
    /// Failed user-memory reads.
    pub read_faults: u64,
    /// Allocations the inventory could not hold.
    pub alloc_map_full: u64,
    /// Calls not recorded because another thread held their thread's slot.
    pub slot_clash: u64,
    /// Saved calls whose return never fired (no record could exist).
    pub abandoned: u64,
    /// Child processes not followed: the set of followed processes was full.
    pub unfollowed: u64,
    /// Library loads of followed processes the loader hook could not hold.
    pub loads_lost: u64,
    /// Processes mapping a new runtime library file that could not be held (`--all`).
    pub new_files_lost: u64,
    /// Reader wake-ups the programs forced (not a loss).
    pub wakeups: u64,
}

impl Counters {
    /// Records lost for any reason.
    pub fn lost(&self) -> u64 {
        self.losses().iter().map(|&(_, n)| n).sum()
    }

    /// Each cause of lost records with its count, labelled as the trace's drop markers say it.
    pub fn losses(&self) -> [(&'static str, u64); 4] {
        [
            ("ring buffer full", self.ringbuf_drops),
            ("calls nested too deep", self.entry_map_full),
            ("allocation inventory full", self.alloc_map_full),
            ("thread slot shared with another thread", self.slot_clash),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_clashes_count_as_lost_records_and_abandoned_frames_do_not() {
        let c = Counters {
            ringbuf_drops: 1,
            entry_map_full: 2,
            missing_entry: 100,
            read_faults: 100,
            alloc_map_full: 4,
            slot_clash: 8,
            abandoned: 100,
            wakeups: 100,
            unfollowed: 100,
            loads_lost: 100,
            new_files_lost: 100,
        };
        // Processes not followed are reported on their own: their calls were never counted.
        assert_eq!(c.lost(), 15);
        assert_eq!(c.losses()[3], ("thread slot shared with another thread", 8));
    }
}
