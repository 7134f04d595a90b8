//! Puts the records of the per-CPU rings back in time order.
//!
//! Each ring holds its records in commit order, but a thread that moves between CPUs leaves its
//! records in several rings, and a drain reads the rings one after another. A record is released
//! once its time (a call's exit; a name's, its naming call's exit) is before the instant the
//! drain began. A thread's next record is timed after its previous one was committed, so every
//! earlier record of that thread had been committed when the drain began, and was read by it or
//! by an earlier one. The same holds for a kernel's name and a launch of that kernel in another
//! thread, which can only begin once the naming call has returned. Released records come out
//! sorted by time, ties in the order they were read.
use kreplay_common::probe::{CallRecord, NameRecord, Sample};

/// Records read from the rings and not yet released. Calls and names are held apart: a
/// [`Sample`] is as large as its larger variant (a name, 288 bytes), and a call is 136, so
/// holding calls as calls halves what the reader copies per record.
#[derive(Default)]
pub struct TimeOrder {
    /// (time, reading order, call).
    calls: Vec<(u64, u64, CallRecord)>,
    /// (time, reading order, name).
    names: Vec<(u64, u64, NameRecord)>,
    read: u64,
}

impl TimeOrder {
    /// Holds a record just read.
    pub fn push(&mut self, s: Sample) {
        match s {
            Sample::Call(r) => self.calls.push((r.exit_ns, self.read, r)),
            Sample::Name(n) => self.names.push((n.ts_ns, self.read, n)),
        }
        self.read += 1;
    }

    /// Hands `sink` every held record timed before `watermark` (CLOCK_MONOTONIC ns; `u64::MAX`
    /// for all of them), in time order; returns how many.
    pub fn release(&mut self, watermark: u64, sink: &mut impl FnMut(Sample)) -> usize {
        self.calls.sort_unstable_by_key(|p| (p.0, p.1));
        self.names.sort_unstable_by_key(|p| (p.0, p.1));
        let cut_calls = self.calls.partition_point(|p| p.0 < watermark);
        let cut_names = self.names.partition_point(|p| p.0 < watermark);
        let (mut c, mut n) = (0, 0);
        while c < cut_calls || n < cut_names {
            let call_first = n == cut_names
                || (c < cut_calls
                    && (self.calls[c].0, self.calls[c].1) < (self.names[n].0, self.names[n].1));
            if call_first {
                sink(Sample::Call(self.calls[c].2));
                c += 1;
            } else {
                sink(Sample::Name(self.names[n].2));
                n += 1;
            }
        }
        self.calls.drain(..cut_calls);
        self.names.drain(..cut_names);
        cut_calls + cut_names
    }

    /// Records held.
    pub fn held(&self) -> usize {
        self.calls.len() + self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use kreplay_common::probe::{CallRecord, NAME_BYTES, NameRecord, Sample};

    use super::TimeOrder;

    fn call(tid: u32, exit_ns: u64) -> Sample {
        Sample::Call(CallRecord {
            enter_ns: exit_ns - 1,
            exit_ns,
            pid: 1,
            tid,
            api: 0,
            flags: 0,
            parent: 0,
            _pad: 0,
            args: [0; 6],
            extra: [0; 5],
            ret: 0,
            out: 0,
        })
    }

    fn name(tid: u32, ts_ns: u64) -> Sample {
        Sample::Name(NameRecord {
            ts_ns,
            handle: 7,
            pid: 1,
            tid,
            api: 0,
            len: 1,
            _pad: 0,
            name: [b'k'; NAME_BYTES],
        })
    }

    fn times(v: &[Sample]) -> Vec<(u32, u64)> {
        v.iter()
            .map(|s| match s {
                Sample::Call(r) => (r.tid, r.exit_ns),
                Sample::Name(n) => (n.tid, n.ts_ns + 1000),
            })
            .collect()
    }

    #[test]
    fn records_before_the_watermark_come_out_in_time_order_and_the_rest_wait() {
        let mut o = TimeOrder::default();
        // Ring 0 then ring 1, as a drain reads them: thread 5 moved from CPU 1 to CPU 0.
        for s in [call(5, 30), call(6, 10), call(5, 50)] {
            o.push(s);
        }
        for s in [call(5, 20), call(7, 40), call(7, 60)] {
            o.push(s);
        }
        let mut out = vec![];
        assert_eq!(o.release(45, &mut |s| out.push(s)), 4);
        assert_eq!(times(&out), vec![(6, 10), (5, 20), (5, 30), (7, 40)]);
        assert_eq!(o.held(), 2);
        // The next drain read one more record (timed before the held ones' watermark).
        o.push(call(6, 55));
        out.clear();
        assert_eq!(o.release(u64::MAX, &mut |s| out.push(s)), 3);
        assert_eq!(times(&out), vec![(5, 50), (6, 55), (7, 60)]);
        assert_eq!(o.held(), 0);
    }

    #[test]
    fn a_name_follows_its_call_at_the_same_time() {
        let mut o = TimeOrder::default();
        for s in [call(2, 15), call(1, 20), name(1, 20), call(3, 20)] {
            o.push(s);
        }
        let mut out = vec![];
        assert_eq!(o.release(21, &mut |s| out.push(s)), 4);
        // Ties keep reading order: the call, its name, then the other thread's call.
        assert_eq!(times(&out), vec![(2, 15), (1, 20), (1, 1020), (3, 20)]);
    }
}
