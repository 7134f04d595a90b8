//! Followed processes the loader's hook stopped (see `kreplay-ebpf/src/follow.rs`): each is
//! rescanned, so that the runtime libraries it just mapped are probed before their first call,
//! then resumed. Every process read from the ring is resumed, also when kreplay ends first.
use aya::maps::{MapData, RingBuf};
use kreplay_common::{probe::LoadStop, stream::monotonic_ns};
use tokio::io::{Interest, unix::AsyncFd};

/// The ring of stopped processes.
pub struct Holds {
    ring: AsyncFd<RingBuf<MapData>>,
    /// Each stop's length, from the stop to the resume, in ns.
    pauses: Vec<u64>,
}

/// The stops a ring's records carry (a [`LoadStop`] each; a short record is skipped).
pub fn stops(records: impl IntoIterator<Item = Vec<u8>>) -> Vec<LoadStop> {
    records
        .into_iter()
        .filter_map(|r| {
            let word = |at: usize, n: usize| r.get(at..at + n);
            Some(LoadStop {
                tgid: u32::from_le_bytes(word(0, 4)?.try_into().ok()?),
                _pad: 0,
                stop_ns: u64::from_le_bytes(word(8, 8)?.try_into().ok()?),
            })
        })
        .collect()
}

/// The median and the longest of `pauses` (ns), `None` when there are none.
pub fn pause_summary(pauses: &[u64]) -> Option<(u64, u64)> {
    let mut v = pauses.to_vec();
    v.sort_unstable();
    Some((*v.get(v.len() / 2)?, *v.last()?))
}

/// Resumes process `tgid` (SIGCONT); one already running is left as it is.
pub fn resume(tgid: u32) {
    // SAFETY: plain signal send; a pid that is gone makes it fail harmlessly (ESRCH).
    unsafe { libc::kill(tgid as i32, libc::SIGCONT) };
}

impl Holds {
    /// Wraps the ring taken from the probes. Must be called inside a tokio runtime.
    pub fn new(ring: RingBuf<MapData>) -> std::io::Result<Holds> {
        // SAFETY: the RingBuf owns its map fd and keeps it open, unchanged, until it is
        // dropped, which happens only when this AsyncFd is dropped.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Holds {
            ring,
            pauses: Vec::new(),
        })
    }

    /// Waits until a stopped process is waiting (then call [`Holds::take`]).
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let mut guard = self.ring.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// The stops since the last call.
    fn take(&mut self) -> Vec<LoadStop> {
        let ring = self.ring.get_mut();
        let mut records = Vec::new();
        while let Some(r) = ring.next() {
            records.push(r.to_vec());
        }
        stops(records)
    }

    /// Handles the stops since the last call: `attach` for each stopped process, then resumes
    /// it, noting how long it was stopped.
    pub fn serve(&mut self, mut attach: impl FnMut(u32)) {
        for stop in self.take() {
            attach(stop.tgid);
            resume(stop.tgid);
            self.pauses
                .push(monotonic_ns().saturating_sub(stop.stop_ns));
        }
    }

    /// Each stop's length so far, in ns.
    pub fn pauses(&self) -> &[u64] {
        &self.pauses
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        for stop in self.take() {
            resume(stop.tgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_is_one_stop_and_short_ones_are_skipped() {
        let rec =
            |tgid: u32, ns: u64| [&tgid.to_le_bytes()[..], &[0; 4], &ns.to_le_bytes()].concat();
        let recs = vec![rec(42, 1000), vec![1, 2, 3, 4], rec(7, 5)];
        assert_eq!(
            stops(recs),
            vec![
                LoadStop {
                    tgid: 42,
                    _pad: 0,
                    stop_ns: 1000
                },
                LoadStop {
                    tgid: 7,
                    _pad: 0,
                    stop_ns: 5
                },
            ]
        );
    }

    #[test]
    fn pauses_summarise_as_median_and_longest() {
        assert_eq!(pause_summary(&[]), None);
        assert_eq!(pause_summary(&[5]), Some((5, 5)));
        assert_eq!(pause_summary(&[9, 1, 4, 100]), Some((9, 100)));
    }
}
