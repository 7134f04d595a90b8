//! The passes of one replay over a complete snapshot: per pass submit and wait, hash what the
//! pass wrote (on the device where it can, else through the host), restore before the next.
//! After the first restore, later restores look only at the regions that restore found changed
//! (the snapshot's write set) when the determinism check hashes the last pass over every
//! region on the device: a pass that wrote elsewhere is then found there, and the dispatch
//! runs once more from a full restore. A failed pass or restore ends in
//! [`put_back`](super::put_back).

use kreplay_common::stream::monotonic_ns as now_ns;
use kreplay_common::stream::{Record, ReplayPass, replay_step};

use super::backend::{Backend, BackendError};
use super::determinism::DeviceCheck;
use super::inventory::Inventory;
use super::pass_check::{hash_regions, judge, report_difference};
use super::placement::Check;
use super::put_back::{put_back, restore_record};
use super::request::{Outcome, Request};
use super::restore::restore_hashing;
use super::restore_device::restores_in_one_pass;
use super::restore_stats::RestoreStats;
use super::snapshot::Snapshot;

/// The passes of one replay over a complete snapshot.
pub(super) struct Passes<'r, 's, B: Backend> {
    pub(super) backend: &'r B,
    pub(super) inv: &'r Inventory,
    pub(super) req: &'r Request<'r, B>,
    pub(super) snap: &'r Snapshot<'s, B>,
    pub(super) thread: (u32, u32),
    pub(super) hash_passes: bool,
    /// Differences between passes are reported (the determinism check is on); off, they
    /// are still acted on (restores of every region, a re-run) but not reported.
    pub(super) report: bool,
    pub(super) step: &'r dyn Fn(u8, u32, u64, u64, u64) -> Record,
}

impl<'s, B: Backend> Passes<'_, 's, B> {
    /// Runs every pass (see [`replay`]).
    pub(super) fn all(
        &mut self,
        on_device: &mut Option<DeviceCheck<'s, B>>,
        emit: &mut dyn FnMut(Record),
    ) -> Outcome {
        let (backend, inv, req, snapshot) = (self.backend, self.inv, self.req, self.snap);
        let mut first: Option<Vec<Vec<u64>>> = None;
        let mut nondeterministic = false;
        // Whether the last restore kept the hashes of the pass it followed; before the first,
        // whether the restores keep them at all (the first restore then does not sample, and
        // its hashes of pass 0 are the reference the later passes are compared with).
        let mut restores_keep = on_device.as_ref().is_some_and(|c| c.restores_hash())
            && restores_in_one_pass(snapshot)
            && backend.can_restore_on_device();
        // Whether a restore was limited to the snapshot's write set.
        let mut limited = false;
        for pass in 0..req.passes {
            if let Err(failed) = self.run_pass(pass, emit) {
                return failed;
            }
            let hash_passes = self.hash_passes;
            // On the host-hash path the restore's own read also hashes what the pass wrote.
            let fused = hash_passes
                && !nondeterministic
                && pass + 1 < req.passes
                && snapshot.check == Check::HostHash
                && !snapshot.skip_check.get();
            // A pass a one-pass restore follows is hashed by that restore, while the restores
            // keep what they hash.
            let by_restore = hash_passes
                && !nondeterministic
                && restores_keep
                && pass + 1 < req.passes
                && restores_in_one_pass(snapshot);
            if hash_passes && !nondeterministic && !fused && !by_restore {
                let found = match on_device.as_mut() {
                    Some(check) => self.on_device(check, pass, emit),
                    None => {
                        let t = now_ns();
                        let h = hash_regions(backend, snapshot);
                        emit((self.step)(
                            replay_step::HASH_PASS,
                            pass,
                            t,
                            now_ns(),
                            snapshot.bytes(),
                        ));
                        judge(snapshot, pass, h, &mut first, req.correlation, emit)
                    }
                };
                if found {
                    nondeterministic = true;
                    if limited && pass + 1 == req.passes {
                        // The last pass ran on memory restored only where pass 0 wrote: run
                        // the dispatch once more from a full restore.
                        return self.rerun(pass + 1, emit);
                    }
                }
            }
            if pass + 1 < req.passes {
                let rs = now_ns();
                let mut blocks = fused.then(Vec::new);
                let st = restore_hashing(backend, inv, snapshot, blocks.as_mut());
                emit(self.restore_record(pass + 1, rs, &st));
                limited |= snapshot.write_set.borrow().is_some();
                if st.failed > 0 {
                    let why = format!(
                        "the restore before pass {} failed in {} region(s), first {:#x}",
                        pass + 1,
                        st.failed,
                        st.first_failed
                    );
                    return self.put_back(pass + 1, why, emit);
                }
                restores_keep =
                    on_device.as_ref().is_some_and(|c| c.restores_hash()) && st.one_pass_all;
                if let Some(check) = on_device.as_ref().filter(|_| by_restore && pass == 0) {
                    self.adopt_pass_0(check, restores_keep, emit);
                } else if let Some(check) = on_device.as_ref().filter(|_| by_restore) {
                    // A restore that compared what it hashed with pass 0's and found it the
                    // same needs no comparison; one that found a difference is followed by a
                    // comparison of every hash, which finds the first chunk that differs.
                    let same_in_restore = st.compared && st.differ_chunks == 0;
                    if restores_keep && !same_in_restore {
                        match self.compare(check, pass, emit) {
                            Ok(Some(at)) => {
                                nondeterministic = self.found_difference(pass, at, emit)
                            }
                            Ok(None) => {}
                            Err(e) => tracing::warn!(
                                "kreplay: comparing pass {pass} on the device failed: {e}; not checked"
                            ),
                        }
                    } else if !restores_keep {
                        tracing::debug!(
                            "kreplay: pass {pass}'s restore did not keep its hashes; determinism not checked for it"
                        );
                    }
                }
                if fused {
                    nondeterministic =
                        judge(snapshot, pass, blocks, &mut first, req.correlation, emit);
                }
                if nondeterministic && snapshot.write_set.borrow_mut().take().is_some() {
                    // The restore just made looked only where pass 0 wrote: look everywhere
                    // before the next pass.
                    let rs = now_ns();
                    let st = restore_hashing(backend, inv, snapshot, None);
                    emit(self.restore_record(pass + 1, rs, &st));
                    if st.failed > 0 {
                        let why = format!("the full restore before pass {} failed", pass + 1);
                        return self.put_back(pass + 1, why, emit);
                    }
                } else if pass == 0 {
                    self.limit_to_write_set(on_device.as_ref(), nondeterministic, &st);
                }
            }
        }
        Outcome::Replayed {
            passes: req.passes,
            nondeterministic: nondeterministic && self.report,
        }
    }

    /// Hashes pass `pass` on the device and, after pass 0, compares it with pass 0's; true
    /// when it differs (reported).
    fn on_device(
        &mut self,
        check: &mut DeviceCheck<'s, B>,
        pass: u32,
        emit: &mut dyn FnMut(Record),
    ) -> bool {
        let snapshot = self.snap;
        let t = now_ns();
        let hashed = check.hash(snapshot, pass);
        emit((self.step)(
            replay_step::HASH_PASS,
            pass,
            t,
            now_ns(),
            snapshot.bytes(),
        ));
        let found = match hashed {
            Ok(()) if pass == 0 => Ok(None),
            Ok(()) => self.compare(check, pass, emit),
            Err(e) => Err(e),
        };
        match found {
            Ok(Some(at)) => self.found_difference(pass, at, emit),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(
                    "kreplay: hashing pass {pass} on the device failed: {e}; determinism not checked"
                );
                self.hash_passes = false;
                false
            }
        }
    }

    /// Compares pass `pass`'s hashes with pass 0's on the device, recorded as a step: the
    /// region (address) and byte offset of the first chunk that differs.
    fn compare(
        &self,
        check: &DeviceCheck<'s, B>,
        pass: u32,
        emit: &mut dyn FnMut(Record),
    ) -> Result<Option<(u64, u64)>, BackendError> {
        let t = now_ns();
        let found = check.compare(self.snap);
        let bytes = 2 * check.hash_bytes();
        emit((self.step)(
            replay_step::COMPARE_PASS,
            pass,
            t,
            now_ns(),
            bytes,
        ));
        found
    }

    /// After the first restore: pass 0's hashes, which that restore kept, become the reference
    /// (copied on the device); when it did not keep them all, determinism is not checked.
    fn adopt_pass_0(
        &mut self,
        check: &DeviceCheck<'s, B>,
        kept: bool,
        emit: &mut dyn FnMut(Record),
    ) {
        let t = now_ns();
        let adopted = if kept {
            check.adopt_first()
        } else {
            Err(BackendError::Missing(
                "pass 0's hashes (the first restore did not restore every region in one pass)",
            ))
        };
        emit((self.step)(
            replay_step::HASH_PASS,
            0,
            t,
            now_ns(),
            check.hash_bytes(),
        ));
        if let Err(e) = adopted {
            tracing::debug!("kreplay: {e}; determinism not checked");
            self.hash_passes = false;
        }
    }

    /// After the first restore (`st`): limits the later restores to the pieces it (or its
    /// sample) found changed, when the last pass will be hashed over every region on the
    /// device (so a pass that writes elsewhere is found) and that restore saw every region in
    /// one pass. Each piece is compared with pass 0's hashes (`check`'s reference) as the
    /// later restores hash it, so those passes need no comparison of their own.
    fn limit_to_write_set(
        &self,
        check: Option<&DeviceCheck<'s, B>>,
        nondeterministic: bool,
        st: &RestoreStats,
    ) {
        let snapshot = self.snap;
        let Some(check) = check else { return };
        if !self.hash_passes
            || nondeterministic
            || self.req.passes < 3
            || !st.one_pass_all
            || !restores_in_one_pass(snapshot)
        {
            return;
        }
        let mut dirty = snapshot.last_dirty.borrow().clone();
        for (_, j) in &mut dirty {
            j.reference = check.reference_of(j.seen);
        }
        *snapshot.write_set.borrow_mut() = Some(dirty);
    }

    /// Pass `pass` differs from pass 0 at `at` (region, offset): reported when the
    /// determinism check is on. True either way (what follows must not trust the write set).
    fn found_difference(&self, pass: u32, at: (u64, u64), emit: &mut dyn FnMut(Record)) -> bool {
        if self.report {
            report_difference(pass, at, self.req.correlation, emit)
        } else {
            true
        }
    }

    /// Runs the dispatch as pass `pass` and emits its record (with the GPU's time of it, where
    /// the backend measured it); a failed pass ends in [`Self::put_back`], whose outcome is the
    /// error.
    fn run_pass(&self, pass: u32, emit: &mut dyn FnMut(Record)) -> Result<(), Outcome> {
        let start_ns = now_ns();
        let gpu_ns = match self.backend.submit_wait_timed(self.req.dispatch) {
            Ok(t) => t,
            Err(e) => return Err(self.put_back(pass, format!("pass {pass} failed: {e}"), emit)),
        };
        let (pid, tid) = self.thread;
        emit(
            ReplayPass {
                correlation: self.req.correlation,
                pass,
                start_ns,
                end_ns: now_ns(),
                pid,
                tid,
                gpu_ns: gpu_ns.unwrap_or(0),
            }
            .into(),
        );
        Ok(())
    }

    fn restore_record(&self, pass: u32, start_ns: u64, st: &RestoreStats) -> Record {
        restore_record(self.req, self.snap, pass, start_ns, st, self.thread)
    }

    /// After a last pass that differed from pass 0 while restores were limited to the write
    /// set: restores every region that changed and runs the dispatch once more as pass `pass`,
    /// so the application sees a run from the snapshot's memory.
    fn rerun(&self, pass: u32, emit: &mut dyn FnMut(Record)) -> Outcome {
        *self.snap.write_set.borrow_mut() = None;
        let rs = now_ns();
        let st = restore_hashing(self.backend, self.inv, self.snap, None);
        emit(self.restore_record(pass, rs, &st));
        if st.failed > 0 {
            let why = format!("the full restore before pass {pass} failed");
            return self.put_back(pass, why, emit);
        }
        if let Err(failed) = self.run_pass(pass, emit) {
            return failed;
        }
        Outcome::Replayed {
            passes: pass + 1,
            nondeterministic: self.report,
        }
    }

    /// After every pass ran (`outcome`), for a request that asks for it: every region back to
    /// the snapshot's bytes, so the dispatch the caller runs next starts from them. A failed
    /// restore ends in [`put_back`](super::put_back) like one between passes.
    pub(super) fn restore_after(&self, outcome: Outcome, emit: &mut dyn FnMut(Record)) -> Outcome {
        let Outcome::Replayed { passes, .. } = outcome else {
            return outcome;
        };
        *self.snap.write_set.borrow_mut() = None;
        let rs = now_ns();
        let st = restore_hashing(self.backend, self.inv, self.snap, None);
        emit(self.restore_record(passes, rs, &st));
        if st.failed > 0 {
            let why = format!(
                "the restore after the last pass failed in {} region(s), first {:#x}",
                st.failed, st.first_failed
            );
            return self.put_back(passes, why, emit);
        }
        outcome
    }

    fn put_back(&self, pass: u32, why: String, emit: &mut dyn FnMut(Record)) -> Outcome {
        *self.snap.write_set.borrow_mut() = None;
        put_back(
            self.backend,
            self.inv,
            self.snap,
            self.req,
            pass,
            self.thread,
            why,
            emit,
        )
    }
}
