//! Reading the loaded object's maps: the rings of call records and of loader stops, the loss
//! counters and the live-allocation inventory.
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use kreplay_common::probe::{
    ALLOCS_MAP, AllocInfo, AllocKey, COUNTERS_MAP, EVENTS_MAPS, LOADS_MAP, counter,
};

use super::{Counters, ProbeError, Probes};

impl Probes {
    /// Takes the ring of followed processes stopped in the loader hook (once).
    pub fn take_loads(&mut self) -> Result<RingBuf<MapData>, ProbeError> {
        let map = self
            .bpf
            .take_map(LOADS_MAP)
            .ok_or(ProbeError::MissingMap(LOADS_MAP))?;
        RingBuf::try_from(map).map_err(|source| ProbeError::Map {
            name: LOADS_MAP,
            source,
        })
    }

    /// Takes the ring buffers of call records in use (once), ring 0 first.
    pub fn take_events(&mut self) -> Result<Vec<RingBuf<MapData>>, ProbeError> {
        let mut out = Vec::with_capacity(self.rings.count as usize);
        for name in &EVENTS_MAPS[..self.rings.count as usize] {
            let map = self
                .bpf
                .take_map(name)
                .ok_or(ProbeError::MissingMap(name))?;
            out.push(RingBuf::try_from(map).map_err(|source| ProbeError::Map { name, source })?);
        }
        Ok(out)
    }

    /// Reads the loss counters, summed over CPUs.
    pub fn counters(&self) -> Result<Counters, ProbeError> {
        let map = self
            .bpf
            .map(COUNTERS_MAP)
            .ok_or(ProbeError::MissingMap(COUNTERS_MAP))?;
        let arr: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|source| ProbeError::Map {
                name: COUNTERS_MAP,
                source,
            })?;
        let mut sums = [0u64; counter::COUNT as usize];
        for (i, sum) in sums.iter_mut().enumerate() {
            let values = arr.get(&(i as u32), 0).map_err(|source| ProbeError::Map {
                name: COUNTERS_MAP,
                source,
            })?;
            *sum = values.iter().sum();
        }
        Ok(Counters {
            ringbuf_drops: sums[counter::RINGBUF_DROPS as usize],
            entry_map_full: sums[counter::ENTRY_MAP_FULL as usize],
            missing_entry: sums[counter::MISSING_ENTRY as usize],
            read_faults: sums[counter::READ_FAULTS as usize],
            alloc_map_full: sums[counter::ALLOC_MAP_FULL as usize],
            slot_clash: sums[counter::SLOT_CLASH as usize],
            unfollowed: sums[counter::FOLLOW_FULL as usize],
            loads_lost: sums[counter::LOADS_LOST as usize],
            new_files_lost: sums[counter::NEW_FILE_LOST as usize],
            abandoned: sums[counter::ABANDONED as usize],
            wakeups: sums[counter::WAKEUPS as usize],
        })
    }

    /// The live-allocation inventory: every allocation not yet freed, per process.
    pub fn live_allocations(&self) -> Result<Vec<(AllocKey, AllocInfo)>, ProbeError> {
        let map = self
            .bpf
            .map(ALLOCS_MAP)
            .ok_or(ProbeError::MissingMap(ALLOCS_MAP))?;
        let allocs: BpfHashMap<_, AllocKey, AllocInfo> =
            BpfHashMap::try_from(map).map_err(|source| ProbeError::Map {
                name: ALLOCS_MAP,
                source,
            })?;
        let mut out = Vec::new();
        for item in allocs.iter() {
            out.push(item.map_err(|source| ProbeError::Map {
                name: ALLOCS_MAP,
                source,
            })?);
        }
        Ok(out)
    }
}
