//! The per-thread holdback of launch calls, so a launch slice can carry the flow to the GPU
//! dispatch it produced.
//!
//! Records are merged by start time: a launch call (`hipLaunchKernel`, entered at `enter`) is
//! merged before the tool's `Dispatch` record (merged at its `submit_ns`, inside the call's
//! `[enter, exit]`). The launch slice therefore waits here until the merge time passes its
//! `exit`: by then every dispatch it submitted has been seen and given a flow id. A thread's
//! later calls queue behind a held launch, so each thread's slices are still written in begin
//! order (its sequence stays monotonic and nested calls land inside the launch). Memory is
//! bounded: a thread holds what it called during one launch, and at most [`MAX_HELD`] records;
//! past that the oldest launch is written with the flows it has.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::FastMap;

use kreplay_common::stream::{Annotation, ApiCall};

use crate::perfetto::Sequence;

/// Records one thread may hold behind a launch before the launch is written anyway.
pub const MAX_HELD: usize = 4096;

/// A call waiting to be written.
#[derive(Debug)]
pub struct HeldCall {
    /// The sequence it goes on.
    pub seq: Sequence,
    /// The call.
    pub call: ApiCall,
    /// True for a launch- or copy-kind call (the reason the thread is held).
    pub launch: bool,
    /// A copy-kind call: a GPU copy's flow starts on it, not a dispatch's.
    pub copy: bool,
    /// Flows that start on this slice (one per dispatch it produced).
    pub flows: Vec<u64>,
    /// The external correlation id pushed around this call, if a `Correlation` record named it.
    pub external: Option<u64>,
    /// kreplay's own call ([`super::own_calls`]): written on the thread's kreplay track.
    pub own: bool,
    /// Not a call but a user annotation of the thread, queued behind its held calls so that
    /// its sequence stays in time order (`call` then only places it: pid, tid, time).
    pub annotation: Option<Box<Annotation>>,
}

#[derive(Default)]
struct Thread {
    items: VecDeque<HeldCall>,
    /// An entry for this thread is in `due`.
    scheduled: bool,
}

/// What [`Holdback::offer`] did with a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Nothing is held on its thread and it is not a launch: write it now.
    WriteNow,
    /// It is held; it comes back from [`Holdback::take_ready`] once its turn comes.
    Held,
}

/// Per-thread queues of held calls and the flow ids handed out.
#[derive(Default)]
pub struct Holdback {
    threads: FastMap<(u32, u32), Thread>,
    /// `(exit of the held launch at the head, pid << 32 | tid)`: two 64-bit words, since a heap
    /// writes an entry and reads it back at once, and a wide read of fields written narrower
    /// stalls the CPU's store forwarding.
    due: BinaryHeap<Reverse<(u64, u64)>>,
    ready: Vec<HeldCall>,
    /// Calls held over all threads: while none is, a call that is not a launch is written
    /// without looking its thread up.
    held_calls: usize,
    next_flow: u64,
    /// Launches written early because their thread held [`MAX_HELD`] records.
    pub forced: u64,
}

impl Holdback {
    /// Takes `call`: a launch, or any call of a thread that holds one, is held.
    pub fn offer(&mut self, seq: Sequence, call: &ApiCall, launch: bool) -> Offer {
        self.offer_call(seq, call, launch, false)
    }

    /// [`Holdback::offer`] for a call that may be kreplay's own (`own`): kreplay's calls queue
    /// with their thread's (one sequence stays in begin order) but never hold it, since no
    /// dispatch of the application's flows from them.
    pub fn offer_call(&mut self, seq: Sequence, call: &ApiCall, launch: bool, own: bool) -> Offer {
        self.offer_gpu_call(seq, call, launch, false, own)
    }

    /// [`Holdback::offer_call`] for a call that may cause GPU work: a launch (`launch`) or a
    /// copy or memset (`copy`), held until its exit so that the GPU records it caused can
    /// start their flows on it.
    pub fn offer_gpu_call(
        &mut self,
        seq: Sequence,
        call: &ApiCall,
        launch: bool,
        copy: bool,
        own: bool,
    ) -> Offer {
        let launch = (launch || copy) && !own;
        let key = (call.pid, call.tid);
        let held =
            self.held_calls > 0 && self.threads.get(&key).is_some_and(|t| !t.items.is_empty());
        if !held && !launch {
            return Offer::WriteNow;
        }
        let thread = self.threads.entry(key).or_default();
        thread.items.push_back(HeldCall {
            seq,
            call: call.clone(),
            launch,
            copy,
            flows: Vec::new(),
            external: None,
            own,
            annotation: None,
        });
        self.held_calls += 1;
        if thread.items.len() > MAX_HELD {
            self.forced += 1;
            self.release(key, None);
        } else if !thread.scheduled {
            thread.scheduled = true;
            self.due.push(Reverse((call.exit_ns, thread_key(key))));
        }
        Offer::Held
    }

    /// Takes a user annotation of a thread: held behind the thread's held calls, if any
    /// ([`Offer::Held`]); else the caller writes it now.
    pub fn offer_annotation(&mut self, seq: Sequence, a: &Annotation) -> Offer {
        let any = self.held_calls > 0;
        let Some(thread) = self
            .threads
            .get_mut(&(a.pid, a.tid))
            .filter(|t| any && !t.items.is_empty())
        else {
            return Offer::WriteNow;
        };
        thread.items.push_back(HeldCall {
            seq,
            call: ApiCall {
                pid: a.pid,
                tid: a.tid,
                api: u16::MAX,
                enter_ns: a.ts_ns,
                exit_ns: a.ts_ns,
                ret: 0,
                args: [0; 6],
                extra: [0; 5],
                out: 0,
            },
            launch: false,
            copy: false,
            flows: Vec::new(),
            external: None,
            own: false,
            annotation: Some(Box::new(a.clone())),
        });
        self.held_calls += 1;
        Offer::Held
    }

    /// Moves to the ready list every held call whose turn has come at merge time `now`: a held
    /// launch once `now` is past its exit, and the calls queued behind it.
    pub fn advance(&mut self, now: u64) {
        while let Some(&Reverse((exit, packed))) = self.due.peek() {
            if exit >= now {
                break;
            }
            let (pid, tid) = ((packed >> 32) as u32, packed as u32);
            self.due.pop();
            if let Some(t) = self.threads.get_mut(&(pid, tid)) {
                t.scheduled = false;
            }
            self.release((pid, tid), Some(now));
        }
    }

    /// Releases everything (end of input).
    pub fn drain(&mut self) {
        let keys: Vec<(u32, u32)> = self.threads.keys().copied().collect();
        for key in keys {
            while self.threads.get(&key).is_some_and(|t| !t.items.is_empty()) {
                self.release(key, None);
            }
        }
        self.due.clear();
    }

    /// Whether [`Holdback::take_ready`] has calls to give.
    #[inline]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The calls ready to be written, in order per thread.
    pub fn take_ready(&mut self) -> Vec<HeldCall> {
        std::mem::take(&mut self.ready)
    }

    /// Gives back the (emptied) vector [`Holdback::take_ready`] returned, to reuse it.
    pub fn recycle(&mut self, mut v: Vec<HeldCall>) {
        v.clear();
        if self.ready.is_empty() {
            self.ready = v;
        }
    }

    /// A new flow id starting on the held launch of thread `(pid, tid)` whose `[enter, exit]`
    /// contains `ts`; `None` when that thread holds no such launch.
    pub fn flow_from_launch(&mut self, pid: u32, tid: u32, ts: u64) -> Option<u64> {
        self.flow_from(pid, tid, ts, false)
    }

    /// A new flow id starting on the held copy call of thread `(pid, tid)` whose
    /// `[enter, exit]` contains `ts` (a GPU copy or memset it submitted).
    pub fn flow_from_copy(&mut self, pid: u32, tid: u32, ts: u64) -> Option<u64> {
        self.flow_from(pid, tid, ts, true)
    }

    fn flow_from(&mut self, pid: u32, tid: u32, ts: u64, copy: bool) -> Option<u64> {
        let id = self.next_flow + 1;
        let t = self.threads.get_mut(&(pid, tid))?;
        // The innermost (latest-entered) call of the kind containing `ts`.
        let call = t.items.iter_mut().rev().find(|h| {
            h.launch && h.copy == copy && h.call.enter_ns <= ts && ts <= h.call.exit_ns
        })?;
        call.flows.push(id);
        self.next_flow = id;
        Some(id)
    }

    /// Notes external correlation id `ext` on the held launch of `(pid, tid)` containing `ts`.
    pub fn annotate_external(&mut self, pid: u32, tid: u32, ts: u64, ext: u64) -> bool {
        match self.launch_at(pid, tid, ts) {
            Some(launch) => {
                launch.external = Some(ext);
                true
            }
            None => false,
        }
    }

    /// Calls held now, over all threads.
    pub fn held(&self) -> usize {
        self.held_calls
    }

    fn launch_at(&mut self, pid: u32, tid: u32, ts: u64) -> Option<&mut HeldCall> {
        let t = self.threads.get_mut(&(pid, tid))?;
        // The innermost (latest-entered) launch containing `ts`.
        t.items
            .iter_mut()
            .rev()
            .find(|h| h.launch && !h.copy && h.call.enter_ns <= ts && ts <= h.call.exit_ns)
    }

    /// Releases the head launch of `key` when it is due at `now` (always when `now` is
    /// `None`), then every call behind it up to the next launch that is not due; schedules that
    /// launch.
    fn release(&mut self, key: (u32, u32), now: Option<u64>) {
        let Some(t) = self.threads.get_mut(&key) else {
            return;
        };
        let mut force = now.is_none();
        while let Some(head) = t.items.front() {
            if head.launch {
                let due = now.is_some_and(|n| head.call.exit_ns < n);
                if !due && !force {
                    if !t.scheduled {
                        t.scheduled = true;
                        self.due.push(Reverse((head.call.exit_ns, thread_key(key))));
                    }
                    return;
                }
                // Only the first launch is forced; later ones wait for their own exit.
                force = false;
            }
            let item = t.items.pop_front().expect("front exists");
            self.held_calls -= 1;
            self.ready.push(item);
        }
    }
}

/// `(pid, tid)` as one word, ordered as the pair.
fn thread_key((pid, tid): (u32, u32)) -> u64 {
    u64::from(pid) << 32 | u64::from(tid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfetto::TraceWriter;

    fn call(tid: u32, enter_ns: u64, exit_ns: u64) -> ApiCall {
        ApiCall {
            pid: 1,
            tid,
            api: 0,
            enter_ns,
            exit_ns,
            ret: 0,
            args: [0; 6],
            extra: [0; 5],
            out: 0,
        }
    }

    fn enters(v: &[HeldCall]) -> Vec<u64> {
        v.iter().map(|h| h.call.enter_ns).collect()
    }

    #[test]
    fn a_launch_holds_its_thread_until_the_merge_passes_its_exit() {
        let seq = TraceWriter::new(Vec::new()).default_sequence();
        let mut h = Holdback::default();
        assert_eq!(h.offer(seq, &call(7, 5, 8), false), Offer::WriteNow);
        assert_eq!(h.offer(seq, &call(7, 10, 20), true), Offer::Held);
        assert_eq!(h.offer(seq, &call(7, 12, 14), false), Offer::Held);
        assert_eq!(
            h.offer(seq, &call(8, 13, 15), false),
            Offer::WriteNow,
            "other thread"
        );
        assert_eq!(h.flow_from_launch(1, 7, 13), Some(1));
        assert_eq!(h.flow_from_launch(1, 7, 21), None, "outside the launch");
        h.advance(20);
        assert!(
            h.take_ready().is_empty(),
            "a dispatch submitted at 20 may still come"
        );
        assert_eq!(h.offer(seq, &call(7, 21, 22), false), Offer::Held);
        h.advance(21);
        let ready = h.take_ready();
        assert_eq!(enters(&ready), [10, 12, 21]);
        assert_eq!(ready[0].flows, [1]);
        assert_eq!(h.held(), 0);
        assert_eq!(h.offer(seq, &call(7, 30, 31), false), Offer::WriteNow);
    }

    #[test]
    fn a_second_launch_behind_the_first_waits_for_its_own_exit() {
        let seq = TraceWriter::new(Vec::new()).default_sequence();
        let mut h = Holdback::default();
        h.offer(seq, &call(7, 10, 20), true);
        h.offer(seq, &call(7, 25, 40), true);
        h.offer(seq, &call(7, 26, 27), false);
        h.advance(30);
        assert_eq!(enters(&h.take_ready()), [10]);
        h.advance(41);
        assert_eq!(enters(&h.take_ready()), [25, 26]);
    }

    #[test]
    fn a_thread_past_the_cap_writes_its_oldest_launch() {
        let seq = TraceWriter::new(Vec::new()).default_sequence();
        let mut h = Holdback::default();
        h.offer(seq, &call(7, 0, u64::MAX - 1), true);
        for i in 0..MAX_HELD as u64 {
            h.offer(seq, &call(7, 1 + i, 1 + i), false);
        }
        assert_eq!(h.forced, 1);
        assert_eq!(h.take_ready().len(), MAX_HELD + 1);
        assert_eq!(h.held(), 0);
    }

    #[test]
    fn kreplays_launches_never_hold_their_thread_but_queue_behind_the_apps() {
        let seq = TraceWriter::new(Vec::new()).default_sequence();
        let mut h = Holdback::default();
        assert_eq!(
            h.offer_call(seq, &call(7, 1, 2), true, true),
            Offer::WriteNow
        );
        assert_eq!(
            h.offer_call(seq, &call(7, 10, 20), true, false),
            Offer::Held
        );
        assert_eq!(h.offer_call(seq, &call(7, 12, 14), true, true), Offer::Held);
        // A dispatch submitted at 13 flows from the app's launch, not kreplay's inside it.
        assert_eq!(h.flow_from_launch(1, 7, 13), Some(1));
        h.advance(21);
        let ready = h.take_ready();
        assert_eq!(enters(&ready), [10, 12]);
        assert_eq!(
            ready
                .iter()
                .map(|r| (r.own, r.flows.clone()))
                .collect::<Vec<_>>(),
            [(false, vec![1]), (true, vec![])]
        );
    }

    #[test]
    fn drain_releases_everything_in_order() {
        let seq = TraceWriter::new(Vec::new()).default_sequence();
        let mut h = Holdback::default();
        h.offer(seq, &call(7, 10, 20), true);
        h.offer(seq, &call(7, 25, 40), true);
        h.offer(seq, &call(9, 11, 12), true);
        h.drain();
        let mut got = enters(&h.take_ready());
        got.sort();
        assert_eq!(got, [10, 11, 25]);
    }
}
