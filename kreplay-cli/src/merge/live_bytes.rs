//! The live-bytes counters: per process and runtime layer, the bytes allocated and not yet
//! freed, changed when an allocation or free returns.
use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap},
    io::Write,
};

use kreplay_common::{
    api::{ApiKind, Library, NO_ARG, spec_of},
    stream::ApiCall,
};

use super::render::layer_name;
use crate::perfetto::{CounterUnit, Sequence, TraceWriter, Track, WriterError};

/// A live-bytes change waiting for its time: (time, arrival order, pid, layer, delta).
type PendingDelta = (u64, u64, u32, Library, i64);

/// Live allocations and the counter values not yet written.
#[derive(Default)]
pub struct LiveBytes {
    counters: HashMap<(u32, Library), Track>,
    live: HashMap<(u32, Library, u64), u64>,
    totals: HashMap<(u32, Library), i64>,
    /// Changes not yet written. Allocation takes effect when the call returns, later than the
    /// entry time records are merged by.
    pending: BinaryHeap<Reverse<PendingDelta>>,
    pending_order: u64,
}

impl LiveBytes {
    /// Queues the live-bytes change a successful allocation or free makes. Each runtime layer
    /// (HIP, HSA, CUDA) has its own counter: a HIP allocation is also an HSA allocation made
    /// on the application's behalf, and the HSA layer also holds the runtime's own memory.
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
        let delta = match spec.kind {
            ApiKind::Alloc if c.out != 0 && spec.size_arg != NO_ARG => {
                let size = arg(spec.size_arg);
                if self
                    .live
                    .insert((c.pid, spec.library, c.out), size)
                    .is_some()
                {
                    return;
                }
                size as i64
            }
            ApiKind::Free if spec.ptr_arg != NO_ARG => {
                match self.live.remove(&(c.pid, spec.library, arg(spec.ptr_arg))) {
                    Some(size) => -(size as i64),
                    None => return,
                }
            }
            _ => return,
        };
        self.pending_order += 1;
        self.pending.push(Reverse((
            c.exit_ns,
            self.pending_order,
            c.pid,
            spec.library,
            delta,
        )));
    }

    /// Writes the live-bytes values whose time is at or before `now` on sequence `seq`;
    /// counts them in `written`.
    pub fn flush<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        seq: Sequence,
        now: u64,
        process_names: &HashMap<u32, String>,
        written: &mut u64,
    ) -> Result<(), WriterError> {
        while let Some(&Reverse((ts, _, pid, layer, delta))) = self.pending.peek() {
            if ts > now {
                break;
            }
            self.pending.pop();
            let live = self.totals.entry((pid, layer)).or_default();
            *live += delta;
            let value = *live;
            let track = match self.counters.get(&(pid, layer)) {
                Some(&t) => t,
                None => {
                    let pname = super::render::process_label(process_names, pid);
                    let parent = w.process_track(pid as i32, &pname)?;
                    let name = format!("live bytes ({})", layer_name(layer));
                    let t = w.counter_track(Some(parent), &name, CounterUnit::UnitSizeBytes)?;
                    self.counters.insert((pid, layer), t);
                    t
                }
            };
            w.counter(seq, track, ts, value)?;
            *written += 1;
        }
        Ok(())
    }

    /// Live bytes per (process, runtime layer) as of the values written so far.
    pub fn totals(&self) -> &HashMap<(u32, Library), i64> {
        &self.totals
    }
}
