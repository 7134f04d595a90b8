//! The live-bytes counters: per process, runtime layer and device (where the probes can know
//! it), the bytes allocated and not yet freed, changed when an allocation or free returns.
//!
//! Where an allocation lives ([`Place`]):
//! - HIP and the CUDA runtime: the calling thread's current device, known from the last
//!   successful `hipSetDevice` / `cudaSetDevice` the thread made during the trace. Both keep
//!   the current device per thread and the probes cannot read it, so a thread that never set
//!   it while traced (it may have before) counts on a track named "device not set during
//!   trace", not on a guessed device.
//! - HSA: the memory pool (or region) argument: each pool belongs to one agent.
//! - CUDA: the current context is not visible to the probes: one track per process, named so.
use std::{cmp::Reverse, collections::BinaryHeap, io::Write};

use kreplay_common::{
    api::{ApiKind, Library, NO_ARG, spec_of},
    stream::ApiCall,
};

use super::FastMap;
use super::labels::{layer_name, process_label};
use crate::perfetto::{CounterUnit, Sequence, TraceWriter, Track, WriterError};

/// Where an allocation's bytes are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// A device ordinal, from the thread's `hipSetDevice` or `cudaSetDevice`.
    Device(i32),
    /// An allocation by a thread whose current device the trace did not see set.
    DeviceNotSet,
    /// An HSA memory pool (`hsa_amd_memory_pool_allocate`'s pool handle).
    HsaPool(u64),
    /// An HSA region (`hsa_memory_allocate`'s region handle).
    HsaRegion(u64),
    /// The whole process: the layer's device is not known from its calls.
    Process,
}

impl Place {
    /// The counter track's name for a layer's bytes at this place.
    pub fn track_name(self, layer: Library) -> String {
        let l = layer_name(layer);
        match self {
            Place::Device(d) => format!("live bytes ({l} device {d})"),
            Place::DeviceNotSet => format!("live bytes ({l}, device not set during trace)"),
            Place::HsaPool(p) => format!("live bytes ({l} pool {p:#x})"),
            Place::HsaRegion(r) => format!("live bytes ({l} region {r:#x})"),
            Place::Process => format!("live bytes ({l}, all devices)"),
        }
    }
}

/// A counter: process, layer, place.
type CounterKey = (u32, Library, Place);

/// A live-bytes change waiting for its time: (time, arrival order, counter, delta).
type PendingDelta = (u64, u64, CounterKey, i64);

/// Live allocations and the counter values not yet written.
#[derive(Default)]
pub struct LiveBytes {
    counters: FastMap<CounterKey, Track>,
    /// (pid, layer, pointer) → (bytes, where they are counted).
    live: FastMap<(u32, Library, u64), (u64, Place)>,
    totals: FastMap<(u32, Library), i64>,
    place_totals: FastMap<CounterKey, i64>,
    /// Current device per (layer, pid, tid), from successful `hipSetDevice` and
    /// `cudaSetDevice` calls.
    device: FastMap<(Library, u32, u32), i32>,
    /// Changes not yet written. Allocation takes effect when the call returns, later than the
    /// entry time records are merged by.
    pending: BinaryHeap<Reverse<PendingDelta>>,
    pending_order: u64,
}

impl LiveBytes {
    /// Queues the live-bytes change a successful allocation or free makes, and follows the
    /// threads' current HIP and CUDA runtime device. Each runtime layer has its own counters:
    /// a HIP allocation is also an HSA allocation made on the application's behalf, and the
    /// HSA layer also holds the runtime's own memory.
    pub fn account(&mut self, c: &ApiCall) {
        let Some(spec) = spec_of(c.api) else { return };
        if c.ret as u32 != 0 {
            return;
        }
        let arg = |i: u8| {
            if (i as usize) < 6 {
                c.args[i as usize]
            } else {
                c.extra[i as usize - 6]
            }
        };
        let (key, delta) = match spec.kind {
            ApiKind::Device => {
                self.device
                    .insert((spec.library, c.pid, c.tid), arg(0) as u32 as i32);
                return;
            }
            ApiKind::Alloc if c.out != 0 && spec.size_arg != NO_ARG => {
                let size = arg(spec.size_arg);
                let place = self.place(c, spec.library, spec.name);
                let slot = (c.pid, spec.library, c.out);
                if self.live.contains_key(&slot) {
                    return;
                }
                self.live.insert(slot, (size, place));
                ((c.pid, spec.library, place), size as i64)
            }
            ApiKind::Free if spec.ptr_arg != NO_ARG => {
                match self.live.remove(&(c.pid, spec.library, arg(spec.ptr_arg))) {
                    Some((size, place)) => ((c.pid, spec.library, place), -(size as i64)),
                    None => return,
                }
            }
            _ => return,
        };
        self.pending_order += 1;
        self.pending
            .push(Reverse((c.exit_ns, self.pending_order, key, delta)));
    }

    /// Where an allocation call's bytes are counted.
    fn place(&self, c: &ApiCall, layer: Library, api: &str) -> Place {
        match layer {
            Library::Hip | Library::CudaRt => match self.device.get(&(layer, c.pid, c.tid)) {
                Some(&d) => Place::Device(d),
                None => Place::DeviceNotSet,
            },
            // The pool or region handle is the first argument, passed by value.
            Library::Hsa if api == "hsa_amd_memory_pool_allocate" => Place::HsaPool(c.args[0]),
            Library::Hsa if api == "hsa_memory_allocate" => Place::HsaRegion(c.args[0]),
            _ => Place::Process,
        }
    }

    /// Writes the live-bytes values whose time is at or before `now` on sequence `seq`;
    /// counts them in `written`.
    pub fn flush<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        seq: Sequence,
        now: u64,
        process_names: &FastMap<u32, String>,
        written: &mut u64,
    ) -> Result<(), WriterError> {
        while let Some(&Reverse((ts, _, key, delta))) = self.pending.peek() {
            if ts > now {
                break;
            }
            self.pending.pop();
            let (pid, layer, place) = key;
            *self.totals.entry((pid, layer)).or_default() += delta;
            let live = self.place_totals.entry(key).or_default();
            *live += delta;
            let value = *live;
            let track = match self.counters.get(&key) {
                Some(&t) => t,
                None => {
                    let pname = process_label(process_names, pid);
                    let parent = w.process_track(pid as i32, &pname)?;
                    let name = place.track_name(layer);
                    let t = w.counter_track(Some(parent), &name, CounterUnit::UnitSizeBytes)?;
                    self.counters.insert(key, t);
                    t
                }
            };
            w.counter(seq, track, ts, value)?;
            *written += 1;
        }
        Ok(())
    }

    /// Live bytes per (process, runtime layer) as of the values written so far.
    pub fn totals(&self) -> &FastMap<(u32, Library), i64> {
        &self.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kreplay_common::api::id_of;

    fn call(api: &str, tid: u32, args: [u64; 6], out: u64, t: u64) -> ApiCall {
        ApiCall {
            pid: 9,
            tid,
            api: id_of(api).unwrap(),
            enter_ns: t,
            exit_ns: t + 1,
            ret: 0,
            args,
            extra: [0; 5],
            out,
        }
    }

    #[test]
    fn hip_bytes_follow_each_threads_device_and_frees_find_their_track() {
        let mut l = LiveBytes::default();
        l.account(&call("hipMalloc", 1, [0, 100, 0, 0, 0, 0], 0x1000, 1));
        l.account(&call("hipSetDevice", 1, [1, 0, 0, 0, 0, 0], 0, 2));
        l.account(&call("hipMalloc", 1, [0, 200, 0, 0, 0, 0], 0x2000, 3));
        // Another thread's device is its own.
        l.account(&call("hipMalloc", 2, [0, 400, 0, 0, 0, 0], 0x3000, 4));
        // A failed hipSetDevice changes nothing.
        let mut bad = call("hipSetDevice", 1, [7, 0, 0, 0, 0, 0], 0, 5);
        bad.ret = 101;
        l.account(&bad);
        l.account(&call("hipSetDevice", 1, [0, 0, 0, 0, 0, 0], 0, 6));
        // Freed on device 0's thread state, counted off device 1 where it was allocated.
        l.account(&call("hipFree", 1, [0x2000, 0, 0, 0, 0, 0], 0, 7));
        l.account(&call("hipMalloc", 1, [0, 800, 0, 0, 0, 0], 0x4000, 8));
        l.account(&call(
            "hsa_amd_memory_pool_allocate",
            1,
            [0xabc, 16, 0, 0, 0, 0],
            0x5000,
            9,
        ));
        let got: Vec<(Place, i64)> = {
            let mut v: Vec<_> = l
                .pending
                .iter()
                .map(|Reverse((_, _, (_, _, p), d))| (*p, *d))
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            got,
            vec![
                (Place::Device(0), 800),
                (Place::Device(1), -200),
                (Place::Device(1), 200),
                (Place::DeviceNotSet, 100),
                (Place::DeviceNotSet, 400),
                (Place::HsaPool(0xabc), 16),
            ]
        );
        assert_eq!(
            Place::Device(1).track_name(Library::Hip),
            "live bytes (HIP device 1)"
        );
        assert_eq!(
            Place::HsaPool(0xabc).track_name(Library::Hsa),
            "live bytes (HSA pool 0xabc)"
        );
        assert_eq!(
            Place::Process.track_name(Library::Cuda),
            "live bytes (CUDA driver, all devices)"
        );
    }

    #[test]
    fn cuda_runtime_bytes_follow_cuda_set_device_apart_from_hip_and_the_driver() {
        let mut l = LiveBytes::default();
        l.account(&call("cudaMalloc", 1, [0, 64, 0, 0, 0, 0], 0x1000, 1));
        l.account(&call("cudaSetDevice", 1, [2, 0, 0, 0, 0, 0], 0, 2));
        // The driver allocation cudaMalloc makes: the driver layer's own counter.
        l.account(&call("cuMemAlloc_v2", 1, [0, 128, 0, 0, 0, 0], 0x2000, 3));
        l.account(&call("cudaMalloc", 1, [0, 128, 0, 0, 0, 0], 0x2000, 3));
        // cudaSetDevice is not HIP's device.
        l.account(&call("hipMalloc", 1, [0, 256, 0, 0, 0, 0], 0x3000, 4));
        l.account(&call("cudaSetDevice", 1, [0, 0, 0, 0, 0, 0], 0, 5));
        l.account(&call("cudaFree", 1, [0x2000, 0, 0, 0, 0, 0], 0, 6));
        let mut got: Vec<(Library, Place, i64)> = l
            .pending
            .iter()
            .map(|Reverse((_, _, (_, layer, p), d))| (*layer, *p, *d))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (Library::Hip, Place::DeviceNotSet, 256),
                (Library::Cuda, Place::Process, 128),
                (Library::CudaRt, Place::Device(2), -128),
                (Library::CudaRt, Place::Device(2), 128),
                (Library::CudaRt, Place::DeviceNotSet, 64),
            ]
        );
        assert_eq!(
            Place::Device(2).track_name(Library::CudaRt),
            "live bytes (CUDA runtime device 2)"
        );
    }
}
