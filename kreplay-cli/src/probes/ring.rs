//! A consumer of the BPF ring buffer's shared memory that tells the kernel how far it has read
//! once per batch of records, not once per record.
//!
//! The kernel's producer reads the consumer position on every reservation (to check for room).
//! A reader that stores it after each record, as aya's `RingBuf::next` does, keeps that cache
//! line moving between the reader's CPU and the probed thread's CPU for as long as a drain
//! runs: one cross-core miss per probed call during drains. Publishing it every
//! [`PUBLISH_EVERY`] bytes, and at the end of each drain, costs the producer one miss per
//! batch instead. The ring's usable size shrinks by at most that much while a drain runs.
//!
//! Layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position (mapped read-write), page 1
//! the producer position, then the data pages, mapped twice in a row so a record that wraps
//! around the end reads as one contiguous slice. Each record starts with an 8-byte header whose
//! first u32 holds the length and the busy (reserved, not yet submitted) and discard bits.
use std::{
    os::fd::AsRawFd,
    ptr::NonNull,
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
};

/// Header bit: the record is reserved and not yet submitted.
const BUSY_BIT: u32 = 1 << 31;
/// Header bit: the record was discarded by its producer.
const DISCARD_BIT: u32 = 1 << 30;
/// Bytes of the record header.
const HEADER_BYTES: u64 = 8;
/// Consumed bytes after which the consumer position is published during a drain.
pub const PUBLISH_EVERY: u64 = 64 * 1024;

/// Errors mapping the ring buffer.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// `mmap` of one of the ring's regions failed.
    #[error("mmap of the ring buffer's {what} failed: {source}")]
    Mmap {
        /// Which region.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The size is not a power-of-two multiple of the page size.
    #[error("ring buffer size {0} is not a power-of-two number of pages")]
    Size(u32),
}

/// One mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(
        fd: &impl AsRawFd,
        len: usize,
        prot: i32,
        offset: usize,
        what: &'static str,
    ) -> Result<Mapping, RingError> {
        // SAFETY: a fresh shared mapping of the map's fd chosen by the kernel (null hint); it
        // aliases no Rust object, and the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RingError::Mmap {
                what,
                source: std::io::Error::last_os_error(),
            });
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(RingError::Mmap {
            what,
            source: std::io::Error::other("mmap returned null"),
        })?;
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the mapping past the
        // RingReader that owns it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The reading end of one BPF ring buffer.
pub struct RingReader {
    consumer: Mapping,
    producer: Mapping,
    page: usize,
    mask: u64,
    /// How far this reader has read.
    pos: u64,
    /// The position last stored for the kernel.
    published: u64,
}

// SAFETY: the mappings are plain shared memory owned by this value; every access goes through
// &self/&mut self and atomics where the kernel writes concurrently.
unsafe impl Send for RingReader {}

impl RingReader {
    /// Maps the ring buffer map behind `fd`, of `bytes` data bytes (a power-of-two number of
    /// pages), starting at the consumer position the kernel has.
    pub fn new(fd: &impl AsRawFd, bytes: u32) -> Result<RingReader, RingError> {
        let page = super::rings::page_bytes() as usize;
        if !bytes.is_power_of_two() || (bytes as usize) < page {
            return Err(RingError::Size(bytes));
        }
        let consumer = Mapping::new(
            fd,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            0,
            "consumer page",
        )?;
        let producer = Mapping::new(
            fd,
            page + 2 * bytes as usize,
            libc::PROT_READ,
            page,
            "producer and data pages",
        )?;
        let mut r = RingReader {
            consumer,
            producer,
            page,
            mask: u64::from(bytes) - 1,
            pos: 0,
            published: 0,
        };
        r.pos = r.consumer_pos().load(Ordering::Acquire);
        r.published = r.pos;
        Ok(r)
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped read-write for this value's life, page-aligned,
        // and its first word is the kernel's consumer position (an unsigned long on x86-64).
        unsafe { &*self.consumer.ptr.as_ptr().cast::<AtomicU64>() }
    }

    fn producer_pos(&self) -> u64 {
        // SAFETY: as above for the producer page (read-only); the kernel stores it with release
        // semantics after a record's header is written, so acquire makes the header visible.
        unsafe { &*self.producer.ptr.as_ptr().cast::<AtomicU64>() }.load(Ordering::Acquire)
    }

    fn publish(&mut self) {
        if self.published != self.pos {
            // Release: the records' bytes are read before the kernel may reuse their space.
            self.consumer_pos().store(self.pos, Ordering::Release);
            self.published = self.pos;
        }
    }

    /// Hands each submitted record (at most `max`) to `sink` in order, stopping at the first
    /// one still being written; skips discarded ones. Returns how many were handed out.
    pub fn drain(&mut self, max: usize, sink: &mut impl FnMut(&[u8])) -> usize {
        let data = self.page;
        let mut n = 0;
        let mut prod = self.producer_pos();
        while n < max {
            if self.pos == prod {
                // Caught up: one more look, for records submitted while this drain ran.
                prod = self.producer_pos();
                if self.pos == prod {
                    break;
                }
            }
            let off = data + (self.pos & self.mask) as usize;
            // SAFETY: off + 8 lies inside the producer mapping (data starts at `page`, the data
            // pages are mapped twice, and off < page + size); headers are 8-byte aligned, and
            // the kernel writes the header's first word with an atomic exchange.
            let header = unsafe { &*self.producer.ptr.as_ptr().add(off).cast::<AtomicU32>() }
                .load(Ordering::Acquire);
            if header & BUSY_BIT != 0 {
                break;
            }
            let len = u64::from(header & !(BUSY_BIT | DISCARD_BIT));
            if len > self.mask {
                // Never written by the kernel; stop rather than read past the mapping.
                tracing::warn!(
                    len,
                    "ring buffer record longer than the ring: reading stopped"
                );
                break;
            }
            if header & DISCARD_BIT == 0 {
                // SAFETY: the record's bytes lie within the double mapping (off < page + size,
                // len <= size), are no longer written by the producer (busy bit clear, read
                // with acquire), and stay unchanged until the consumer position passes them.
                let rec = unsafe {
                    std::slice::from_raw_parts(
                        self.producer.ptr.as_ptr().add(off + HEADER_BYTES as usize),
                        len as usize,
                    )
                };
                sink(rec);
                n += 1;
            }
            self.pos += (HEADER_BYTES + len).next_multiple_of(8);
            if self.pos - self.published >= PUBLISH_EVERY {
                self.publish();
            }
        }
        self.publish();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs::File, os::unix::fs::FileExt};

    /// A file laid out like a ring buffer map's mmap space (consumer page, producer page, the
    /// data twice), standing in for the kernel's double mapping of the data pages.
    struct FakeRing {
        file: File,
        page: u64,
        size: u64,
    }

    impl FakeRing {
        fn new(size: u64) -> FakeRing {
            let page = crate::probes::rings::page_bytes() as u64;
            let file = tempfile_in_tmp();
            file.set_len(2 * page + 2 * size).unwrap();
            FakeRing { file, page, size }
        }

        fn set_consumer(&self, pos: u64) {
            self.file.write_all_at(&pos.to_le_bytes(), 0).unwrap();
        }

        fn consumer(&self) -> u64 {
            let mut b = [0u8; 8];
            self.file.read_exact_at(&mut b, 0).unwrap();
            u64::from_le_bytes(b)
        }

        fn set_producer(&self, pos: u64) {
            self.file
                .write_all_at(&pos.to_le_bytes(), self.page)
                .unwrap();
        }

        /// Writes a record at ring position `pos` (both copies); returns the next position.
        fn record(&self, pos: u64, payload: &[u8], flags: u32) -> u64 {
            let mut rec = (payload.len() as u32 | flags).to_le_bytes().to_vec();
            rec.extend_from_slice(&[0; 4]);
            rec.extend_from_slice(payload);
            for (i, b) in rec.iter().enumerate() {
                let at = (pos + i as u64) % self.size;
                for copy in [0, self.size] {
                    self.file
                        .write_all_at(&[*b], 2 * self.page + copy + at)
                        .unwrap();
                }
            }
            pos + (rec.len() as u64).next_multiple_of(8)
        }
    }

    fn tempfile_in_tmp() -> File {
        let path = std::env::temp_dir().join(format!(
            "kreplay-ring-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    fn drain_all(r: &mut RingReader, max: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        r.drain(max, &mut |b| got.push(b.to_vec()));
        got
    }

    #[test]
    fn hands_out_submitted_records_skips_discarded_and_stops_at_busy() {
        let ring = FakeRing::new(4096 * 4);
        let mut p = ring.record(0, b"first record", 0);
        p = ring.record(p, b"gone", DISCARD_BIT);
        p = ring.record(p, &[7u8; 20], 0);
        let busy_at = p;
        p = ring.record(p, b"not yet", BUSY_BIT);
        ring.set_producer(p);
        let mut r = RingReader::new(&ring.file, 4096 * 4).unwrap();
        assert_eq!(
            drain_all(&mut r, 100),
            vec![b"first record".to_vec(), vec![7u8; 20]]
        );
        // Published up to the busy record: 8+12 -> 24, 8+4 -> 16, 8+20 -> 32.
        assert_eq!((busy_at, ring.consumer()), (72, 72));
        assert!(drain_all(&mut r, 100).is_empty());
        ring.record(busy_at, b"not yet", 0);
        assert_eq!(drain_all(&mut r, 100), vec![b"not yet".to_vec()]);
        assert_eq!(ring.consumer(), p);
    }

    #[test]
    fn stops_at_max_and_resumes_where_it_stopped() {
        let ring = FakeRing::new(4096);
        let mut p = 0;
        for i in 0..5u8 {
            p = ring.record(p, &[i; 8], 0);
        }
        ring.set_producer(p);
        let mut r = RingReader::new(&ring.file, 4096).unwrap();
        assert_eq!(drain_all(&mut r, 2), vec![vec![0u8; 8], vec![1u8; 8]]);
        assert_eq!(ring.consumer(), 32);
        assert_eq!(
            drain_all(&mut r, 10),
            vec![vec![2u8; 8], vec![3u8; 8], vec![4u8; 8]]
        );
        assert_eq!(ring.consumer(), 80);
    }

    #[test]
    fn reads_a_record_that_wraps_around_the_end_whole() {
        let ring = FakeRing::new(4096);
        let start = 3 * 4096 - 16;
        ring.set_consumer(start);
        let payload: Vec<u8> = (0..40u8).collect();
        let end = ring.record(start, &payload, 0);
        ring.set_producer(end);
        let mut r = RingReader::new(&ring.file, 4096).unwrap();
        assert_eq!(drain_all(&mut r, 10), vec![payload]);
        assert_eq!(ring.consumer(), start + 48);
    }

    #[test]
    fn publishes_its_position_every_publish_every_bytes_during_a_drain() {
        let ring = FakeRing::new(256 * 1024);
        let mut p = 0;
        for i in 0..100u32 {
            p = ring.record(p, &[i as u8; 1016], 0);
        }
        ring.set_producer(p);
        let mut r = RingReader::new(&ring.file, 256 * 1024).unwrap();
        let mut seen = Vec::new();
        r.drain(1000, &mut |b| seen.push((b[0], ring.consumer())));
        assert_eq!(seen.len(), 100);
        // 1024 bytes a record: the position is first published once 64 records are read.
        assert_eq!(seen[63], (63, 0));
        assert_eq!(seen[64], (64, PUBLISH_EVERY));
        assert_eq!(seen[99], (99, PUBLISH_EVERY));
        assert_eq!(ring.consumer(), 100 * 1024);
    }

    #[test]
    fn rejects_a_size_that_is_not_a_power_of_two_number_of_pages() {
        let ring = FakeRing::new(4096);
        assert!(matches!(
            RingReader::new(&ring.file, 6000),
            Err(RingError::Size(6000))
        ));
        assert!(matches!(
            RingReader::new(&ring.file, 512),
            Err(RingError::Size(512))
        ));
    }
}
