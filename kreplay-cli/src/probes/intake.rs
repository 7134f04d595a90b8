//! Pulling call and name records out of the BPF ring buffers without busy-waiting. The BPF side
//! wakes the reader only once a ring is a quarter full (a wake-up per record costs the probed
//! thread an irq_work and the reader a context switch), so readers also drain every
//! [`DRAIN_EVERY`]. Records are read through [`RingReader`], which publishes its position once
//! per batch (aya's `RingBuf` is kept for its fd, which tokio polls). With one ring per CPU
//! (`rings.rs`), a drain reads every ring and [`TimeOrder`] hands the records on in time order.
use aya::maps::{MapData, RingBuf};
use kreplay_common::{
    probe::{CallRecord, Sample},
    stream::monotonic_ns,
};
use tokio::io::{Interest, unix::AsyncFd};

use super::{order::TimeOrder, ring::RingReader};

/// How often readers drain the rings whether or not they were woken.
pub const DRAIN_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// One ring buffer registered with tokio's reactor.
struct Ring {
    fd: AsyncFd<RingBuf<MapData>>,
    reader: RingReader,
    /// Records read from this ring.
    read: u64,
}

/// The ring buffers of call records.
pub struct Intake {
    rings: Vec<Ring>,
    /// Most records handed out by one drain of one ring: its capacity, so a drain ends even
    /// while producers keep writing (they would otherwise keep it going forever).
    batch: usize,
    /// Records read from several rings, waiting for their turn.
    order: TimeOrder,
    /// Items of neither record's size (never expected; counted, not trusted).
    pub malformed: u64,
}

impl Intake {
    /// Wraps the ring buffers taken from [`super::loader::Probes::take_events`], each of
    /// `ring_bytes` data bytes. Must be called inside a tokio runtime.
    pub fn new(rings: Vec<RingBuf<MapData>>, ring_bytes: u32) -> std::io::Result<Intake> {
        let mut out = Vec::with_capacity(rings.len());
        for ring in rings {
            let reader = RingReader::new(&ring, ring_bytes).map_err(std::io::Error::other)?;
            // SAFETY: the RingBuf owns its map fd and keeps it open, unchanged, until it is
            // dropped, which happens only when this AsyncFd is dropped.
            let fd = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
            out.push(Ring {
                fd,
                reader,
                read: 0,
            });
        }
        Ok(Intake {
            rings: out,
            batch: ring_bytes as usize / std::mem::size_of::<CallRecord>() + 1,
            order: TimeOrder::default(),
            malformed: 0,
        })
    }

    /// Hands the records available now to `sink`, at most one ring's worth per ring; returns
    /// how many. With several rings, a record timed after this drain began waits for the next
    /// drain (see `order.rs`), so that each thread's records come out in order.
    pub fn drain(&mut self, sink: &mut impl FnMut(Sample)) -> usize {
        if let [ring] = self.rings.as_mut_slice() {
            let malformed = &mut self.malformed;
            let mut n = 0;
            ring.reader
                .drain(self.batch, &mut |item| match Sample::from_bytes(item) {
                    Some(r) => {
                        sink(r);
                        n += 1;
                    }
                    None => *malformed += 1,
                });
            ring.read += n as u64;
            return n;
        }
        let watermark = monotonic_ns();
        self.read_all();
        self.order.release(watermark, sink)
    }

    /// The last drain: every record available now, none held back.
    pub fn finish(&mut self, sink: &mut impl FnMut(Sample)) -> usize {
        let n = self.drain(sink);
        n + self.order.release(u64::MAX, sink)
    }

    /// Reads every ring into the time order.
    fn read_all(&mut self) {
        let (order, malformed) = (&mut self.order, &mut self.malformed);
        for ring in &mut self.rings {
            let read = &mut ring.read;
            ring.reader
                .drain(self.batch, &mut |item| match Sample::from_bytes(item) {
                    Some(r) => {
                        order.push(r);
                        *read += 1;
                    }
                    None => *malformed += 1,
                });
        }
    }

    /// Records read so far from each ring, ring 0 first.
    pub fn per_ring(&self) -> Vec<u64> {
        self.rings.iter().map(|r| r.read).collect()
    }

    /// Waits until a ring buffer has data (then call [`Intake::drain`]).
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let rings = &mut self.rings;
        std::future::poll_fn(|cx| {
            for ring in rings.iter_mut() {
                match ring.fd.poll_read_ready_mut(cx) {
                    std::task::Poll::Ready(Ok(mut guard)) => {
                        guard.clear_ready();
                        return std::task::Poll::Ready(Ok(()));
                    }
                    std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                    std::task::Poll::Pending => {}
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// Waits until a ring buffer has data, then drains them.
    pub async fn next_batch(&mut self, sink: &mut impl FnMut(Sample)) -> std::io::Result<usize> {
        self.readable().await?;
        Ok(self.drain(sink))
    }
}
