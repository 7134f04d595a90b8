//! Kernel names from a CUDA program's registration code, for host stubs that have no symbol.
//!
//! nvcc's host code registers each kernel of a translation unit with
//! `__cudaRegisterFunction(handle, hostFun, deviceFun, deviceName, ...)`: `rsi` is the host
//! stub's address and `rdx` (and `rcx`) the mangled device name, a C string in read-only data.
//! In x86-64 position independent code both are loaded with RIP-relative `lea` shortly before
//! the call. So a file stripped of its symbols (a pip wheel's `libtorch_cuda.so`) still says,
//! in its code, which name each host stub has: [`registered_kernels`] finds the calls to
//! `__cudaRegisterFunction` (through its PLT stub, through its GOT slot with `-fno-plt`, or
//! directly to a definition when the runtime is linked in) in one pass over the executable
//! sections, and reads the two operands from the instructions just before each call.
use std::collections::HashMap;

use object::{
    Architecture, Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable,
    RelocationFlags, RelocationTarget, SectionKind, elf,
};

/// The runtime's registration function.
pub const REGISTER_FUNCTION: &str = "__cudaRegisterFunction";
/// How far before a call its argument loads are looked for, in bytes.
const WINDOW: usize = 96;
/// The longest name read.
const NAME_CAP: usize = 4096;

/// Errors reading a file's registrations.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// The file is not an ELF object this parser understands.
    #[error("parsing ELF: {0}")]
    Parse(#[from] object::Error),
}

/// What a call to the registration function looks like in one file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CallTargets {
    /// Addresses an `e8 rel32` call reaches the function at: its PLT stubs, its definition.
    pub direct: Vec<u64>,
    /// GOT slots a `ff 15 disp32` call (`call [rip+slot]`) reads the function's address from.
    pub slots: Vec<u64>,
    /// The file's executable address ranges (start, end): another call found before a
    /// registration counts only when it lands in one of them.
    pub code: Vec<(u64, u64)>,
}

impl CallTargets {
    fn is_empty(&self) -> bool {
        self.direct.is_empty() && self.slots.is_empty()
    }
}

/// One registration call found in code: the host stub's address and the name's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// Virtual address loaded into `rsi`.
    pub stub: u64,
    /// Virtual address loaded into `rdx` (or `rcx` when `rdx` was not loaded).
    pub name: u64,
}

/// Every (host stub file offset → mangled device name) pair the registration code of the ELF
/// file in `data` makes. Empty for files that neither import nor define
/// `__cudaRegisterFunction`, and for other architectures than x86-64.
pub fn registered_kernels(data: &[u8]) -> Result<HashMap<u64, String>, RegistrationError> {
    let file = object::File::parse(data)?;
    let mut out = HashMap::new();
    if file.architecture() != Architecture::X86_64 {
        return Ok(out);
    }
    let targets = call_targets(&file);
    if targets.is_empty() {
        return Ok(out);
    }
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then_some((s.address(), off, size))
        })
        .collect();
    let file_offset = |va: u64| {
        segments
            .iter()
            .find(|&&(start, _, size)| va >= start && va - start < size)
            .and_then(|&(start, off, _)| (va - start).checked_add(off))
    };
    let code: Vec<(u64, &[u8])> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text && !is_plt(s.name().unwrap_or("")))
        .filter_map(|s| Some((s.address(), s.data().ok()?)))
        .collect();
    let in_code = |va: u64| {
        code.iter()
            .any(|&(start, d)| va >= start && va - start < d.len() as u64)
    };
    for &(addr, bytes) in &code {
        for r in scan_code(bytes, addr, &targets) {
            if !in_code(r.stub) {
                continue;
            }
            let (Some(stub), Some(name_off)) = (file_offset(r.stub), file_offset(r.name)) else {
                continue;
            };
            if let Some(name) = symbol_name_at(data, name_off) {
                out.entry(stub).or_insert(name);
            }
        }
    }
    Ok(out)
}

/// True for the sections that hold PLT stubs (`.plt`, `.plt.sec`, `.plt.got`).
fn is_plt(name: &str) -> bool {
    name == ".plt" || name.starts_with(".plt.")
}

/// Where calls to `__cudaRegisterFunction` go in `file`: its definition, the GOT slots of its
/// import relocations, and the PLT stubs that jump through those slots.
fn call_targets(file: &object::File<'_>) -> CallTargets {
    let mut t = CallTargets {
        code: file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect(),
        ..CallTargets::default()
    };
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        let named = sym
            .name()
            .is_ok_and(|n| n.split_once('@').map_or(n, |(base, _)| base) == REGISTER_FUNCTION);
        if named && sym.is_definition() && sym.address() != 0 && !t.direct.contains(&sym.address())
        {
            t.direct.push(sym.address());
        }
    }
    if let (Some(relocs), Some(dynsym)) = (file.dynamic_relocations(), file.dynamic_symbol_table())
    {
        for (slot, rel) in relocs {
            let RelocationTarget::Symbol(idx) = rel.target() else {
                continue;
            };
            let slot_kind = matches!(
                rel.flags(),
                RelocationFlags::Elf { r_type }
                    if r_type == elf::R_X86_64_JUMP_SLOT || r_type == elf::R_X86_64_GLOB_DAT
            );
            let named = dynsym
                .symbol_by_index(idx)
                .and_then(|s| s.name())
                .is_ok_and(|n| n == REGISTER_FUNCTION);
            if slot_kind && named && !t.slots.contains(&slot) {
                t.slots.push(slot);
            }
        }
    }
    if t.slots.is_empty() {
        return t;
    }
    for s in file.sections() {
        if !is_plt(s.name().unwrap_or("")) {
            continue;
        }
        let Ok(bytes) = s.data() else { continue };
        for stub in plt_stubs(bytes, s.address(), &t.slots) {
            if !t.direct.contains(&stub) {
                t.direct.push(stub);
            }
        }
    }
    t
}

/// The entry addresses of the PLT stubs in `bytes` (at address `addr`) that jump through one
/// of `slots`: `ff 25 disp32` (`jmp [rip+slot]`), with the `bnd` prefix and `endbr64` of an
/// IBT-enabled `.plt.sec` entry counted in.
pub fn plt_stubs(bytes: &[u8], addr: u64, slots: &[u64]) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..bytes.len() {
        if bytes[i] != 0xff || bytes.get(i + 1) != Some(&0x25) {
            continue;
        }
        let Some(target) = rip_target(bytes, addr, i, 2, 6) else {
            continue;
        };
        if !slots.contains(&target) {
            continue;
        }
        let mut start = i;
        if start >= 1 && bytes[start - 1] == 0xf2 {
            start -= 1;
        }
        if start >= 4 && bytes[start - 4..start] == [0xf3, 0x0f, 0x1e, 0xfa] {
            start -= 4;
        }
        out.push(addr.wrapping_add(start as u64));
    }
    out
}

/// The address a RIP-relative operand of the instruction at `bytes[at..]` refers to: its
/// `disp32` at offset `disp_at` in an instruction `len` bytes long. `None` when the
/// instruction does not fit in `bytes`.
fn rip_target(bytes: &[u8], addr: u64, at: usize, disp_at: usize, len: usize) -> Option<u64> {
    let d = bytes.get(at + disp_at..at + disp_at + 4)?;
    if at + len > bytes.len() {
        return None;
    }
    let disp = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64;
    Some(
        addr.wrapping_add((at + len) as u64)
            .wrapping_add_signed(disp),
    )
}

/// A call instruction at `bytes[at..]`: its length and where it goes (`Direct` for `e8
/// rel32`, `Slot` for `ff 15 disp32`).
fn call_at(bytes: &[u8], addr: u64, at: usize) -> Option<(usize, Call)> {
    match bytes[at] {
        0xe8 => rip_target(bytes, addr, at, 1, 5).map(|t| (5, Call::Direct(t))),
        0xff if bytes.get(at + 1) == Some(&0x15) => {
            rip_target(bytes, addr, at, 2, 6).map(|t| (6, Call::Slot(t)))
        }
        _ => None,
    }
}

/// Where a call goes.
#[derive(Clone, Copy)]
enum Call {
    Direct(u64),
    Slot(u64),
}

/// Argument registers the registration's operands are loaded into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reg {
    Rsi,
    Rdx,
    Rcx,
}

/// A RIP-relative `lea` of an address into an argument register at `bytes[at..]`
/// (`48 8d 35/15/0d disp32`): its length, the register and the address.
fn load_at(bytes: &[u8], addr: u64, at: usize) -> Option<(usize, Reg, u64)> {
    if bytes[at] != 0x48 || bytes.get(at + 1) != Some(&0x8d) {
        return None;
    }
    let reg = match *bytes.get(at + 2)? {
        0x35 => Reg::Rsi,
        0x15 => Reg::Rdx,
        0x0d => Reg::Rcx,
        _ => return None,
    };
    rip_target(bytes, addr, at, 3, 7).map(|t| (7, reg, t))
}

/// Every registration call in the code `bytes` (at virtual address `addr`), one linear pass:
/// a call reaching one of `targets`, with the host stub loaded into `rsi` and the name into
/// `rdx` (or `rcx`) by RIP-relative `lea`s within [`WINDOW`] bytes before it and after any
/// other call.
pub fn scan_code(bytes: &[u8], addr: u64, targets: &CallTargets) -> Vec<Registration> {
    let mut out = Vec::new();
    for i in 0..bytes.len() {
        // The first-byte filter: only `e8` and `ff` start the calls looked for.
        let b = bytes[i];
        if b != 0xe8 && b != 0xff {
            continue;
        }
        let is_registration = match call_at(bytes, addr, i) {
            Some((_, Call::Direct(t))) => targets.direct.contains(&t),
            Some((_, Call::Slot(s))) => targets.slots.contains(&s),
            None => false,
        };
        if is_registration && let Some(r) = operands_before(bytes, addr, i, targets) {
            out.push(r);
        }
    }
    out
}

/// The host stub and name loaded before the registration call at `bytes[call..]`: decoded
/// forward from [`WINDOW`] bytes back, the last load into each register, forgetting what came
/// before any other call seen on the way. Only the loads are decoded, the rest is stepped
/// over a byte at a time.
fn operands_before(
    bytes: &[u8],
    addr: u64,
    call: usize,
    targets: &CallTargets,
) -> Option<Registration> {
    let (mut rsi, mut rdx, mut rcx) = (None, None, None);
    let mut p = call.saturating_sub(WINDOW);
    while p < call {
        if let Some((len, reg, value)) = load_at(bytes, addr, p)
            && p + len <= call
        {
            match reg {
                Reg::Rsi => rsi = Some(value),
                Reg::Rdx => rdx = Some(value),
                Reg::Rcx => rcx = Some(value),
            }
            p += len;
            continue;
        }
        // A call is not skipped over: when its bytes are really the start of a `lea` that
        // follows (an `e8` ending another instruction), the `lea` is still read.
        if let Some((len, c)) = call_at(bytes, addr, p)
            && p + len <= call
            && plausible_call(c, targets)
        {
            (rsi, rdx, rcx) = (None, None, None);
        }
        p += 1;
    }
    Some(Registration {
        stub: rsi?,
        name: rdx.or(rcx)?,
    })
}

/// Whether a call decoded while walking back is likely a real one (so that bytes of other
/// instructions that happen to read as a call do not cut the window): a direct call that
/// lands in the file's code, or any call through a slot.
fn plausible_call(c: Call, targets: &CallTargets) -> bool {
    match c {
        Call::Direct(t) => {
            targets.direct.contains(&t) || targets.code.iter().any(|&(s, e)| t >= s && t < e)
        }
        // `ff 15` is seldom part of another instruction: any slot counts.
        Call::Slot(_) => true,
    }
}

/// The symbol-like NUL-terminated string at `off` in `data` (at most [`NAME_CAP`] bytes):
/// letters, digits, `_`, `$` and `.`, not starting with a digit.
fn symbol_name_at(data: &[u8], off: u64) -> Option<String> {
    let start = usize::try_from(off).ok()?;
    let rest = data.get(start..)?;
    let rest = &rest[..rest.len().min(NAME_CAP + 1)];
    let end = rest.iter().position(|&b| b == 0)?;
    let name = &rest[..end];
    let ok = !name.is_empty()
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.');
    ok.then(|| String::from_utf8_lossy(name).into_owned())
}

#[cfg(test)]
#[path = "registrations_tests.rs"]
mod tests;
