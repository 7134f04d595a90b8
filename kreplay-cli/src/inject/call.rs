//! Making a stopped thread call a function (SysV x86_64 ABI) and stop again when it returns,
//! and the system-call restart facts that make this safe for a thread stopped in a syscall.
use std::time::Duration;

use super::{
    error::InjectError,
    ptrace::{Regs, Stop, Tracee},
};

/// Bytes below the stack pointer a leaf function may use without moving it (the ABI's red zone).
pub const RED_ZONE: u64 = 128;

/// The return address the call is given: executing it faults, which stops the thread.
pub const FAULT_RETURN: u64 = 0;

/// The Linux-internal "restart me" results a syscall interrupted by a stop leaves in `rax`.
const ERESTARTSYS: i64 = 512;
const ERESTARTNOINTR: i64 = 513;
const ERESTARTNOHAND: i64 = 514;
const ERESTART_RESTARTBLOCK: i64 = 516;

/// What the kernel will do with a thread's interrupted system call when it resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupted {
    /// Not in an interrupted syscall: nothing to restart.
    No,
    /// Syscall `nr` will be re-executed (rip moved back over `syscall`, rax = nr).
    Restart {
        /// The syscall number (`orig_rax`).
        nr: i64,
    },
    /// The syscall continues through `restart_syscall` (a sleep with time left).
    RestartBlock {
        /// The syscall number (`orig_rax`).
        nr: i64,
    },
}

/// Classifies a stopped thread's `orig_rax` and `rax` as the kernel's signal-return path
/// does: a syscall number ≥ 0 with one of the restart results means the kernel restarts it
/// when the thread resumes with these registers.
pub fn interrupted_syscall(orig_rax: u64, rax: u64) -> Interrupted {
    let nr = orig_rax as i64;
    if nr < 0 {
        return Interrupted::No;
    }
    match -(rax as i64) {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => Interrupted::Restart { nr },
        ERESTART_RESTARTBLOCK => Interrupted::RestartBlock { nr },
        _ => Interrupted::No,
    }
}

/// Where the call's stack frame goes below the thread's stack pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Address of the copied data (16-byte aligned).
    pub data: u64,
    /// The stack pointer at the function's entry: it holds the return address, and is
    /// 8 past a 16-byte boundary, as after a `call` from an aligned stack.
    pub rsp: u64,
}

/// A frame for `data_len` bytes of data below `rsp` and its red zone.
pub fn frame(rsp: u64, data_len: usize) -> Frame {
    let data = (rsp - RED_ZONE - data_len as u64) & !15;
    Frame {
        data,
        rsp: data - 8,
    }
}

/// The registers for calling `func(args...)` from `saved`: arguments in rdi, rsi, rdx, rcx,
/// r8, r9; rax 0; direction flag clear; and `orig_rax = -1` so the kernel does not apply a
/// syscall restart to the call (the saved registers, restored later, keep it).
pub fn call_regs(saved: &Regs, func: u64, args: &[u64], rsp: u64) -> Regs {
    let mut regs = *saved;
    let slots: [&mut u64; 6] = [
        &mut regs.rdi,
        &mut regs.rsi,
        &mut regs.rdx,
        &mut regs.rcx,
        &mut regs.r8,
        &mut regs.r9,
    ];
    for (slot, &arg) in slots.into_iter().zip(args) {
        *slot = arg;
    }
    regs.rip = func;
    regs.rsp = rsp;
    regs.rax = 0;
    regs.orig_rax = u64::MAX;
    regs.eflags &= !0x400;
    regs
}

/// Runs `func(args...)` in the stopped thread on a frame at `rsp` whose return address is
/// already written, and returns rax once the call returns into [`FAULT_RETURN`]. Signals that
/// arrive meanwhile are deferred to after the detach; a fault elsewhere is an error.
pub fn run_call(
    tracee: &mut Tracee,
    saved: &Regs,
    func: u64,
    args: &[u64],
    rsp: u64,
    timeout: Duration,
) -> Result<u64, InjectError> {
    tracee.set_regs(&call_regs(saved, func, args, rsp))?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        tracee.cont()?;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let stop = tracee
            .wait(left, "the injected call to return")
            .map_err(|e| match e {
                InjectError::Timeout {
                    tid, waiting_for, ..
                } => InjectError::Timeout {
                    tid,
                    ms: timeout.as_millis(),
                    waiting_for,
                },
                e => e,
            })?;
        match stop {
            Stop::Exited => {
                return Err(InjectError::CallFailed {
                    tid: tracee.tid(),
                    what: "ended with the process exiting".into(),
                });
            }
            // A group stop or a leftover interrupt: keep running the call.
            Stop::Event(_) => continue,
            Stop::Signal(sig) if is_fault(sig) => {
                let regs = tracee.regs()?;
                if sig == libc::SIGSEGV && regs.rip == FAULT_RETURN && regs.rsp == rsp + 8 {
                    return Ok(regs.rax);
                }
                return Err(InjectError::CallFailed {
                    tid: tracee.tid(),
                    what: format!("faulted with signal {sig} at rip {:#x}", regs.rip),
                });
            }
            Stop::Signal(sig) => tracee.defer(sig),
        }
    }
}

/// Signals a fault in the called code raises synchronously.
fn is_fault(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_results_of_a_syscall_are_recognized() {
        let neg = |e: i64| (-e) as u64;
        // read(2) interrupted with -ERESTARTSYS: restarted.
        assert_eq!(
            interrupted_syscall(0, neg(512)),
            Interrupted::Restart { nr: 0 }
        );
        assert_eq!(
            interrupted_syscall(7, neg(513)),
            Interrupted::Restart { nr: 7 }
        );
        assert_eq!(
            interrupted_syscall(232, neg(514)),
            Interrupted::Restart { nr: 232 }
        );
        // nanosleep with time left: through restart_syscall.
        assert_eq!(
            interrupted_syscall(35, neg(516)),
            Interrupted::RestartBlock { nr: 35 }
        );
        // -EINTR is returned to the program as is; a finished syscall's result is kept.
        assert_eq!(interrupted_syscall(0, neg(4)), Interrupted::No);
        assert_eq!(interrupted_syscall(0, 5), Interrupted::No);
        // Not in a syscall (orig_rax -1): rax is just a register, whatever its value.
        assert_eq!(interrupted_syscall(u64::MAX, neg(512)), Interrupted::No);
    }

    #[test]
    fn the_frame_sits_below_the_red_zone_with_an_abi_aligned_entry_stack() {
        for rsp in [0x7ffc_0000_1000u64, 0x7ffc_0000_1008, 0x7ffc_0000_0ff3] {
            for len in [1usize, 15, 16, 17, 200] {
                let f = frame(rsp, len);
                assert_eq!(f.data % 16, 0);
                assert_eq!(f.rsp % 16, 8, "entry rsp is 8 mod 16, as after a call");
                assert!(
                    f.data + len as u64 <= rsp - RED_ZONE,
                    "data must not touch the red zone"
                );
                assert!(
                    rsp - RED_ZONE - (f.data + len as u64) < 16,
                    "no more than alignment slack"
                );
                assert_eq!(
                    f.rsp + 8,
                    f.data,
                    "the return address sits just below the data"
                );
            }
        }
    }

    #[test]
    fn call_registers_carry_arguments_and_never_restart_a_syscall() {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut saved: Regs = unsafe { std::mem::zeroed() };
        saved.orig_rax = 0;
        saved.rax = (-512i64) as u64;
        saved.rip = 0x1002;
        saved.eflags = 0x246 | 0x400;
        saved.rbx = 99;
        let r = call_regs(&saved, 0xdead0, &[0x1000, 2], 0x7000 - 8);
        assert_eq!((r.rip, r.rdi, r.rsi, r.rsp), (0xdead0, 0x1000, 2, 0x6ff8));
        assert_eq!(r.orig_rax, u64::MAX);
        assert_eq!(interrupted_syscall(r.orig_rax, r.rax), Interrupted::No);
        assert_eq!(r.eflags, 0x246, "direction flag cleared, others kept");
        assert_eq!(r.rbx, 99, "callee-saved registers are left as they were");
        // The saved registers still describe the interrupted read, restarted at the detach.
        assert_eq!(
            interrupted_syscall(saved.orig_rax, saved.rax),
            Interrupted::Restart { nr: 0 }
        );
    }
}
