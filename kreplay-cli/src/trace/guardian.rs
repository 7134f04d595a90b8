//! The guardian: a small process of its own that resumes every process kreplay holds
//! stopped (the loader hook, `--all`'s new library files) if kreplay ends without resuming
//! them — killed with SIGKILL, say. It holds the map of held processes and the holding switch
//! open and waits on a pipe whose only writer is kreplay; at end of file it turns holding off
//! (the programs may outlive kreplay's last descriptor by a moment), sends SIGCONT to every
//! process the map names, and, after a pause that lets a program already past the switch
//! finish, does so once more, then exits. When kreplay ends normally the map is empty by then.
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `BPF_MAP_UPDATE_ELEM`.
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_MAP_GET_NEXT_KEY`.
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;

/// The attribute of `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
struct UpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The attribute of `BPF_MAP_GET_NEXT_KEY`.
#[repr(C)]
struct NextKeyAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    next_key: u64,
}

/// kreplay's end of the guardian's pipe: the guardian acts once it is closed.
pub struct Guardian {
    _writer: OwnedFd,
}

impl Guardian {
    /// Starts a guardian over `held`, the map of held processes (tgid keys), and `switch`, the
    /// holding switch (a one-entry array of u32). The guardian is
    /// not a child of kreplay (it is forked twice), has a session of its own (a terminal's
    /// Ctrl-C does not reach it) and keeps no other file open.
    pub fn start(held: BorrowedFd<'_>, switch: BorrowedFd<'_>) -> io::Result<Guardian> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the array on success; checked.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nothing else.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let fds = [held.as_raw_fd(), switch.as_raw_fd(), reader.as_raw_fd()];
        // SAFETY: fork in a multi-threaded process: the children call only async-signal-safe
        // functions (fork, setsid, close_range, read, the bpf system call, kill, _exit), take no
        // lock and allocate nothing.
        let child = unsafe { libc::fork() };
        match child {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // SAFETY: as above; the middle process exits at once, the grandchild guards.
                unsafe {
                    if libc::fork() == 0 {
                        guard(fds);
                    }
                    libc::_exit(0)
                }
            }
            pid => {
                let mut status = 0;
                // SAFETY: reaps the middle process, which exits at once.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                drop(reader);
                Ok(Guardian { _writer: writer })
            }
        }
    }
}

/// The guardian's life: wait for the end of the pipe, turn holding off, resume every held
/// process (twice), exit. `fds` are the held map, the switch and the pipe's reading end.
fn guard(fds: [RawFd; 3]) -> ! {
    let [held, switch, rd] = fds;
    // SAFETY: async-signal-safe system calls on descriptors this process owns; the buffers
    // are locals that outlive each call.
    unsafe {
        libc::setsid();
        // Named for `ps`, and deaf to the signals that end kreplay (`pkill kreplay` matches
        // its command line): it ends when kreplay's end of the pipe closes.
        libc::prctl(
            libc::PR_SET_NAME,
            c"kreplay-guard".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let mut keep = fds.map(|f| f as libc::c_uint);
        keep.sort_unstable();
        let close_range = |first: libc::c_uint, last: libc::c_uint| {
            if first <= last {
                libc::syscall(libc::SYS_close_range, first, last, 0);
            }
        };
        let mut from = 0;
        for k in keep {
            if k > from {
                close_range(from, k - 1);
            }
            from = k + 1;
        }
        close_range(from, libc::c_uint::MAX);
        let mut byte = 0u8;
        loop {
            let n = libc::read(rd, (&raw mut byte).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        let (zero_key, off) = (0u32, 0u32);
        let update = UpdateAttr {
            map_fd: switch as u32,
            _pad: 0,
            key: (&raw const zero_key) as u64,
            value: (&raw const off) as u64,
            flags: 0,
        };
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            &raw const update,
            std::mem::size_of::<UpdateAttr>() as libc::c_uint,
        );
        resume_all(held);
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        libc::nanosleep(&pause, std::ptr::null_mut());
        resume_all(held);
        libc::_exit(0)
    }
}

/// Sends SIGCONT to every process the map `held` names (async-signal-safe).
fn resume_all(held: RawFd) {
    let (mut key, mut next) = (0u32, 0u32);
    let mut first = true;
    // At most the map's size in steps.
    for _ in 0..kreplay_common::probe::discovery::HELD_MAX {
        let attr = NextKeyAttr {
            map_fd: held as u32,
            _pad: 0,
            key: if first { 0 } else { (&raw const key) as u64 },
            next_key: (&raw mut next) as u64,
        };
        // SAFETY: the bpf system call reads `attr` and writes `next`, both live locals.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_GET_NEXT_KEY,
                &raw const attr,
                std::mem::size_of::<NextKeyAttr>() as libc::c_uint,
            )
        };
        if rc != 0 {
            break;
        }
        // SAFETY: plain signal send.
        unsafe { libc::kill(next as libc::pid_t, libc::SIGCONT) };
        key = next;
        first = false;
    }
}
