//! The trace file's writer: the trace goes to the device with `O_DIRECT`, in aligned blocks a
//! writer thread writes while the merge goes on.
//!
//! A trace is written once, front to back, often hundreds of megabytes of it. Through the page
//! cache the kernel copies every byte into a page it must first find, reclaiming one when memory
//! is full of cache: on the development VM that was a fifth of `kreplay merge`'s CPU time
//! (`docs/bench/merge.md`). With `O_DIRECT` the device reads the bytes from kreplay's own
//! buffer. Blocks of [`BLOCK`] bytes go to a thread, so the merge does not wait for the device;
//! at most [`BLOCKS`] exist, so memory stays flat whatever the trace's length.
//!
//! Where the filesystem refuses `O_DIRECT`, or a write with it fails as invalid, the file is
//! written through the page cache as usual. The last, partial block always is (a direct write
//! must cover whole blocks), once [`TraceFile::flush`] has waited for the thread.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Alignment of a direct write's buffer, file offset and length (the largest logical block
/// size of common devices, and the page size).
const ALIGN: usize = 4096;
/// Bytes of one direct write.
pub const BLOCK: usize = 512 * 1024;
/// Blocks at most: one being filled, the others queued or being written.
pub const BLOCKS: usize = 3;

/// A buffer of [`BLOCK`] bytes at an [`ALIGN`]-aligned address inside `mem`.
struct Block {
    mem: Vec<u8>,
    off: usize,
    len: usize,
}

impl Block {
    fn new() -> Block {
        let mem = vec![0u8; BLOCK + ALIGN];
        let off = mem.as_ptr().align_offset(ALIGN);
        Block { mem, off, len: 0 }
    }

    fn data(&self) -> &[u8] {
        &self.mem[self.off..self.off + self.len]
    }

    /// Copies as much of `buf` as fits; returns how much.
    fn fill(&mut self, buf: &[u8]) -> usize {
        let n = buf.len().min(BLOCK - self.len);
        let at = self.off + self.len;
        self.mem[at..at + n].copy_from_slice(&buf[..n]);
        self.len += n;
        n
    }
}

/// The thread writing full blocks, and the channels to it.
struct Direct {
    cur: Block,
    /// Blocks not made yet.
    unmade: usize,
    to_thread: SyncSender<Block>,
    back: Receiver<Block>,
    thread: JoinHandle<io::Result<()>>,
}

/// A trace output file: `O_DIRECT` block writes through a thread where the filesystem allows,
/// else plain writes. [`TraceFile::flush`] writes everything and leaves the file in plain mode.
pub struct TraceFile {
    file: File,
    direct: Option<Direct>,
}

/// Sets or clears `O_DIRECT` on `file` (a flag of the open file description, which a
/// duplicated descriptor shares).
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor `file` owns; F_GETFL and F_SETFL read and set its status
    // flags and touch no memory.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_DIRECT
    } else {
        flags & !libc::O_DIRECT
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes all of `data` to `file`; a write `O_DIRECT` refuses as invalid (`*direct` on) turns
/// it off and is written again through the page cache.
fn write_block(file: &mut File, mut data: &[u8], direct: &mut bool) -> io::Result<()> {
    while !data.is_empty() {
        match file.write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if *direct && e.raw_os_error() == Some(libc::EINVAL) => {
                set_direct(file, false)?;
                *direct = false;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl TraceFile {
    /// Writes to `file` (empty, opened for writing) with `O_DIRECT` where possible.
    pub fn new(file: File) -> TraceFile {
        let direct = Self::start(&file);
        if direct.is_none() {
            // Refused, or no thread: plain writes (a no-op when O_DIRECT was never set).
            let _ = set_direct(&file, false);
        }
        TraceFile { file, direct }
    }

    /// Turns `O_DIRECT` on and starts the thread, on a duplicate of `file`'s descriptor.
    fn start(file: &File) -> Option<Direct> {
        set_direct(file, true).ok()?;
        let mut theirs = file.try_clone().ok()?;
        let (to_thread, from_main) = sync_channel::<Block>(BLOCKS);
        let (to_main, back) = sync_channel::<Block>(BLOCKS);
        let thread = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || {
                let mut direct = true;
                for mut block in from_main {
                    write_block(&mut theirs, block.data(), &mut direct)?;
                    block.len = 0;
                    let _ = to_main.send(block);
                }
                Ok(())
            })
            .ok()?;
        Some(Direct {
            cur: Block::new(),
            unmade: BLOCKS - 1,
            to_thread,
            back,
            thread,
        })
    }

    /// Hands the full block to the thread and takes an empty one; an error is the thread's.
    fn rotate(&mut self) -> io::Result<()> {
        let d = self.direct.as_mut().expect("in direct mode");
        let empty = if d.unmade > 0 {
            d.unmade -= 1;
            Some(Block::new())
        } else {
            d.back.recv().ok()
        };
        let sent = empty.map(|e| std::mem::replace(&mut d.cur, e));
        match sent.map(|full| d.to_thread.send(full)) {
            Some(Ok(())) => Ok(()),
            // The thread stopped: its error says why.
            _ => self
                .finish_thread()
                .and(Err(io::Error::other("the trace writer thread stopped"))),
        }
    }

    /// Stops the thread after the blocks sent so far, writes the block still being filled
    /// through the page cache, and leaves the file in plain mode; returns the thread's error.
    fn finish_thread(&mut self) -> io::Result<()> {
        let Some(d) = self.direct.take() else {
            return Ok(());
        };
        drop(d.to_thread);
        let result = d
            .thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the trace writer thread panicked")));
        set_direct(&self.file, false)?;
        result?;
        self.file.write_all(d.cur.data())
    }

    /// Writes everything and returns the file.
    pub fn into_file(mut self) -> io::Result<File> {
        self.flush()?;
        Ok(self.file)
    }
}

impl Write for TraceFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(d) = self.direct.as_mut() else {
            return self.file.write(buf);
        };
        let n = d.cur.fill(buf);
        if d.cur.len == BLOCK {
            self.rotate()?;
        }
        Ok(n)
    }

    /// Waits for the blocks the thread holds, writes the partial one through the page cache and
    /// leaves the file in plain mode (later writes go through the page cache).
    fn flush(&mut self) -> io::Result<()> {
        self.finish_thread()?;
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `n` of a recognisable pattern.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn what_is_written_in_pieces_of_any_size_reads_back_exactly() {
        let dir = std::env::temp_dir().join(format!("kreplay-trace-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Less than a block, exactly blocks, and more blocks than exist, with a tail.
        for len in [0, 1000, BLOCK, 2 * BLOCK, BLOCKS * BLOCK * 3 + 12_345] {
            let path = dir.join(format!("t-{len}"));
            let mut f = TraceFile::new(File::create(&path).unwrap());
            let data = pattern(len);
            for piece in data.chunks(100_003) {
                f.write_all(piece).unwrap();
            }
            let file = f.into_file().unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), data, "{len} bytes");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_after_a_flush_go_on_through_the_page_cache() {
        let dir = std::env::temp_dir().join(format!("kreplay-trace-flush-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t");
        let mut f = TraceFile::new(File::create(&path).unwrap());
        let data = pattern(BLOCK + 77);
        f.write_all(&data[..BLOCK + 5]).unwrap();
        f.flush().unwrap();
        f.write_all(&data[BLOCK + 5..]).unwrap();
        drop(f.into_file().unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
