//! Pulling call and name records out of the BPF ring buffer without busy-waiting. The BPF side
//! wakes the reader only once the ring is a quarter full (a wake-up per record costs the probed
//! thread an irq_work and the reader a context switch), so readers also drain every
//! [`DRAIN_EVERY`]. Records are read through [`RingReader`], which publishes its position once
//! per batch (aya's `RingBuf` is kept for its fd, which tokio polls).
use aya::maps::{MapData, RingBuf};
use kreplay_common::probe::{CallRecord, Sample};
use tokio::io::{Interest, unix::AsyncFd};

use super::ring::RingReader;

/// How often readers drain the ring whether or not they were woken.
pub const DRAIN_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// The ring buffer registered with tokio's reactor.
pub struct Intake {
    fd: AsyncFd<RingBuf<MapData>>,
    reader: RingReader,
    /// Most records handed out by one drain: the ring's capacity, so a drain ends even while
    /// producers keep writing (they would otherwise keep it going forever).
    batch: usize,
    /// Items of neither record's size (never expected; counted, not trusted).
    pub malformed: u64,
}

impl Intake {
    /// Wraps the ring buffer taken from [`super::loader::Probes::take_events`]. Must be
    /// called inside a tokio runtime.
    pub fn new(ring: RingBuf<MapData>, ring_bytes: u32) -> std::io::Result<Intake> {
        let reader = RingReader::new(&ring, ring_bytes).map_err(std::io::Error::other)?;
        // SAFETY: the RingBuf owns its map fd and keeps it open, unchanged, until it is
        // dropped, which happens only when this AsyncFd is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let batch = ring_bytes as usize / std::mem::size_of::<CallRecord>() + 1;
        Ok(Intake {
            fd,
            reader,
            batch,
            malformed: 0,
        })
    }

    /// Hands the records available now to `sink`, at most one ring's worth; returns how many.
    pub fn drain(&mut self, sink: &mut impl FnMut(Sample)) -> usize {
        let malformed = &mut self.malformed;
        let mut n = 0;
        self.reader
            .drain(self.batch, &mut |item| match Sample::from_bytes(item) {
                Some(r) => {
                    sink(r);
                    n += 1;
                }
                None => *malformed += 1,
            });
        n
    }

    /// Waits until the ring buffer has data (then call [`Intake::drain`]).
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let mut guard = self.fd.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Waits until the ring buffer has data, then drains it.
    pub async fn next_batch(&mut self, sink: &mut impl FnMut(Sample)) -> std::io::Result<usize> {
        let mut guard = self.fd.readable_mut().await?;
        guard.clear_ready();
        drop(guard);
        Ok(self.drain(sink))
    }
}
