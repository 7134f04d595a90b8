//! The NVTX calls kreplay implements, each turned into one `Annotation` record on the calling
//! thread's buffer (or, for domains and registered strings, a handle NVTX hands back).
//!
//! A domain handle is a leaked [`Domain`] and a registered string handle a leaked
//! NUL-terminated copy: both stay valid for the process's life (`nvtxDomainDestroy` frees
//! nothing, so a handle used after it still reads), and a process makes few of either.
//! Every callback catches panics and returns NVTX's error value instead.

use core::ffi::{CStr, c_char};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use kreplay_common::stream::{Annotation, Record, annotation, monotonic_ns};

use super::ffi::{
    CStrPtr, EventAttributes, FunctionPointer, WChar, core_slot as c, core2_slot as c2,
    message_type,
};
use crate::record::{current_pid, current_tid, global};

/// A domain made by `nvtxDomainCreateA/W`: its handle points here.
pub struct Domain {
    /// The domain's name.
    pub name: String,
}

/// Ids of start/end ranges, unique in the process (0 is never one).
static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling thread's pushed ranges not yet popped, over all domains (what push returns).
    static DEPTH: Cell<i32> = const { Cell::new(0) };
    /// Bit `l`: the push at level `l` (< 64) was dropped at the buffer's cap, so its pop is
    /// left out too (kept alone, it would close the enclosing range instead).
    static DROPPED: Cell<u64> = const { Cell::new(0) };
}

type Attr = *const EventAttributes;
type DomainH = *const Domain;

/// A callback as NVTX's generic slot type: NVTX casts it back to the slot's own type.
macro_rules! fp {
    ($f:ident : $ty:ty) => {{
        let f: $ty = $f;
        // SAFETY: only the pointer's type changes; NVTX calls it through the slot's real
        // signature, which `$ty` spells out.
        unsafe { core::mem::transmute::<$ty, FunctionPointer>(f) }
    }};
}
/// The core module's slots kreplay fills.
pub static CORE: [(usize, FunctionPointer); 13] = [
    (c::MARK_EX, fp!(mark_ex: unsafe extern "C" fn(Attr))),
    (c::MARK_A, fp!(mark_a: unsafe extern "C" fn(CStrPtr))),
    (c::MARK_W, fp!(mark_w: unsafe extern "C" fn(*const WChar))),
    (
        c::RANGE_START_EX,
        fp!(start_ex: unsafe extern "C" fn(Attr) -> u64),
    ),
    (
        c::RANGE_START_A,
        fp!(start_a: unsafe extern "C" fn(CStrPtr) -> u64),
    ),
    (
        c::RANGE_START_W,
        fp!(start_w: unsafe extern "C" fn(*const WChar) -> u64),
    ),
    (c::RANGE_END, fp!(end: extern "C" fn(u64))),
    (
        c::RANGE_PUSH_EX,
        fp!(push_ex: unsafe extern "C" fn(Attr) -> i32),
    ),
    (
        c::RANGE_PUSH_A,
        fp!(push_a: unsafe extern "C" fn(CStrPtr) -> i32),
    ),
    (
        c::RANGE_PUSH_W,
        fp!(push_w: unsafe extern "C" fn(*const WChar) -> i32),
    ),
    (c::RANGE_POP, fp!(pop: extern "C" fn() -> i32)),
    (
        c::NAME_CATEGORY_A,
        fp!(name_category_a: unsafe extern "C" fn(u32, CStrPtr)),
    ),
    (
        c::NAME_CATEGORY_W,
        fp!(name_category_w: unsafe extern "C" fn(u32, *const WChar)),
    ),
];

/// The core2 (domain) module's slots kreplay fills.
pub static CORE2: [(usize, FunctionPointer); 11] = [
    (
        c2::DOMAIN_MARK_EX,
        fp!(domain_mark_ex: unsafe extern "C" fn(DomainH, Attr)),
    ),
    (
        c2::DOMAIN_RANGE_START_EX,
        fp!(domain_start_ex: unsafe extern "C" fn(DomainH, Attr) -> u64),
    ),
    (
        c2::DOMAIN_RANGE_END,
        fp!(domain_end: unsafe extern "C" fn(DomainH, u64)),
    ),
    (
        c2::DOMAIN_RANGE_PUSH_EX,
        fp!(domain_push_ex: unsafe extern "C" fn(DomainH, Attr) -> i32),
    ),
    (
        c2::DOMAIN_RANGE_POP,
        fp!(domain_pop: unsafe extern "C" fn(DomainH) -> i32),
    ),
    (
        c2::DOMAIN_NAME_CATEGORY_A,
        fp!(domain_name_category_a: unsafe extern "C" fn(DomainH, u32, CStrPtr)),
    ),
    (
        c2::DOMAIN_NAME_CATEGORY_W,
        fp!(domain_name_category_w: unsafe extern "C" fn(DomainH, u32, *const WChar)),
    ),
    (
        c2::DOMAIN_REGISTER_STRING_A,
        fp!(register_string_a: unsafe extern "C" fn(DomainH, CStrPtr) -> *const c_char),
    ),
    (
        c2::DOMAIN_REGISTER_STRING_W,
        fp!(register_string_w: unsafe extern "C" fn(DomainH, *const WChar) -> *const c_char),
    ),
    (
        c2::DOMAIN_CREATE_A,
        fp!(domain_create_a: unsafe extern "C" fn(CStrPtr) -> DomainH),
    ),
    (
        c2::DOMAIN_CREATE_W,
        fp!(domain_create_w: unsafe extern "C" fn(*const WChar) -> DomainH),
    ),
];

/// Records one annotation of the calling thread, now; false when it was dropped.
#[inline]
fn record(kind: u8, category: u32, id: u64, domain: &str, name: String) -> bool {
    global().record_kept(Record::Annotation(Annotation {
        pid: current_pid(),
        tid: current_tid(),
        ts_ns: monotonic_ns(),
        kind,
        source: annotation::NVTX,
        category,
        id,
        domain: domain.to_owned(),
        name,
    }))
}

/// Runs `f`, returning `fallback` if it panics: nothing unwinds into the application.
#[inline]
fn guarded<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// A NUL-terminated string, lossily as UTF-8 (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn ascii(p: CStrPtr) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A NUL-terminated `wchar_t` (UTF-32) string (empty for null; invalid units become U+FFFD).
///
/// # Safety
/// `p` is null or a NUL-terminated `wchar_t` string.
unsafe fn wide(p: *const WChar) -> String {
    let mut s = String::new();
    if p.is_null() {
        return s;
    }
    let mut i = 0;
    loop {
        // SAFETY: within the string, up to and including its terminating 0.
        let u = unsafe { *p.add(i) };
        if u == 0 {
            return s;
        }
        s.push(char::from_u32(u as u32).unwrap_or(char::REPLACEMENT_CHARACTER));
        i += 1;
    }
}

/// The message and category of an event attribute structure.
///
/// # Safety
/// `a` is null or points at an `nvtxEventAttributes_t` whose `size` says how much is valid.
unsafe fn message(a: Attr) -> (String, u32) {
    if a.is_null() {
        return (String::new(), 0);
    }
    // SAFETY: the caller's contract: the fixed head (version, size) is always there.
    let a = unsafe { &*a };
    if usize::from(a.size) < core::mem::size_of::<EventAttributes>() {
        return (String::new(), a.category);
    }
    let name = match a.message_type {
        // SAFETY: NVTX's contract for each message type: a NUL-terminated string of that
        // kind, or a handle kreplay's register_string returned (a NUL-terminated copy).
        message_type::ASCII | message_type::REGISTERED => unsafe { ascii(a.message.cast()) },
        // SAFETY: as above.
        message_type::UNICODE => unsafe { wide(a.message.cast()) },
        _ => String::new(),
    };
    (name, a.category)
}

/// The name of a domain handle ("" for the default domain, null).
///
/// # Safety
/// `d` is null or a handle [`domain_create_a`]/[`domain_create_w`] returned.
unsafe fn domain_name<'a>(d: DomainH) -> &'a str {
    if d.is_null() {
        ""
    } else {
        // SAFETY: the caller's contract: a leaked, never-freed Domain.
        unsafe { &(*d).name }
    }
}

fn push(domain: &str, name: String, category: u32) -> i32 {
    let level = DEPTH.with(|d| {
        let l = d.get();
        d.set(l.saturating_add(1));
        l
    });
    let kept = record(annotation::PUSH, category, 0, domain, name);
    if (0..64).contains(&level) {
        let bit = 1u64 << level;
        DROPPED.with(|d| d.set(if kept { d.get() & !bit } else { d.get() | bit }));
    }
    level
}

fn pop_in(domain: &str) -> i32 {
    let Some(level) = DEPTH.with(|d| {
        let l = d.get();
        (l > 0).then(|| {
            d.set(l - 1);
            l - 1
        })
    }) else {
        return -1;
    };
    let push_dropped = (0..64).contains(&level) && DROPPED.with(|d| d.get() >> level & 1 == 1);
    if !push_dropped {
        record(annotation::POP, 0, 0, domain, String::new());
    }
    level
}

fn start(domain: &str, name: String, category: u32) -> u64 {
    let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    // A start dropped at the cap leaves its end unmatched: the merge counts it and draws none.
    record(annotation::START, category, id, domain, name);
    id
}

unsafe extern "C" fn mark_ex(a: Attr) {
    guarded((), || {
        // SAFETY: NVTX passes the application's attribute structure.
        let (name, cat) = unsafe { message(a) };
        record(annotation::MARK, cat, 0, "", name);
    })
}

unsafe extern "C" fn mark_a(m: CStrPtr) {
    guarded((), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        record(annotation::MARK, 0, 0, "", v);
    })
}

unsafe extern "C" fn mark_w(m: *const WChar) {
    guarded((), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        record(annotation::MARK, 0, 0, "", v);
    })
}

unsafe extern "C" fn start_ex(a: Attr) -> u64 {
    guarded(0, || {
        // SAFETY: NVTX passes the application's attribute structure.
        let (name, cat) = unsafe { message(a) };
        start("", name, cat)
    })
}

unsafe extern "C" fn start_a(m: CStrPtr) -> u64 {
    guarded(0, || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        start("", v, 0)
    })
}

unsafe extern "C" fn start_w(m: *const WChar) -> u64 {
    guarded(0, || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        start("", v, 0)
    })
}

extern "C" fn end(id: u64) {
    guarded((), || {
        record(annotation::END, 0, id, "", String::new());
    })
}

unsafe extern "C" fn push_ex(a: Attr) -> i32 {
    guarded(-1, || {
        // SAFETY: NVTX passes the application's attribute structure.
        let (name, cat) = unsafe { message(a) };
        push("", name, cat)
    })
}

unsafe extern "C" fn push_a(m: CStrPtr) -> i32 {
    guarded(-1, || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        push("", v, 0)
    })
}

unsafe extern "C" fn push_w(m: *const WChar) -> i32 {
    guarded(-1, || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        push("", v, 0)
    })
}

extern "C" fn pop() -> i32 {
    guarded(-1, || pop_in(""))
}

unsafe extern "C" fn name_category_a(cat: u32, m: CStrPtr) {
    guarded((), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        record(annotation::NAME_CATEGORY, cat, 0, "", v);
    })
}

unsafe extern "C" fn name_category_w(cat: u32, m: *const WChar) {
    guarded((), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        record(annotation::NAME_CATEGORY, cat, 0, "", v);
    })
}

unsafe extern "C" fn domain_mark_ex(d: DomainH, a: Attr) {
    guarded((), || {
        // SAFETY: NVTX passes a handle of ours (or null) and the application's attributes.
        let (dom, (name, cat)) = unsafe { (domain_name(d), message(a)) };
        record(annotation::MARK, cat, 0, dom, name);
    })
}

unsafe extern "C" fn domain_start_ex(d: DomainH, a: Attr) -> u64 {
    guarded(0, || {
        // SAFETY: as in domain_mark_ex.
        let (dom, (name, cat)) = unsafe { (domain_name(d), message(a)) };
        start(dom, name, cat)
    })
}

unsafe extern "C" fn domain_end(d: DomainH, id: u64) {
    guarded((), || {
        // SAFETY: NVTX passes a handle of ours (or null).
        let dom = unsafe { domain_name(d) };
        record(annotation::END, 0, id, dom, String::new());
    })
}

unsafe extern "C" fn domain_push_ex(d: DomainH, a: Attr) -> i32 {
    guarded(-1, || {
        // SAFETY: as in domain_mark_ex.
        let (dom, (name, cat)) = unsafe { (domain_name(d), message(a)) };
        push(dom, name, cat)
    })
}

unsafe extern "C" fn domain_pop(d: DomainH) -> i32 {
    guarded(-1, || {
        // SAFETY: NVTX passes a handle of ours (or null).
        let v = unsafe { domain_name(d) };
        pop_in(v)
    })
}

unsafe extern "C" fn domain_name_category_a(d: DomainH, cat: u32, m: CStrPtr) {
    guarded((), || {
        // SAFETY: a handle of ours (or null) and the application's string.
        let (dom, name) = unsafe { (domain_name(d), ascii(m)) };
        record(annotation::NAME_CATEGORY, cat, 0, dom, name);
    })
}

unsafe extern "C" fn domain_name_category_w(d: DomainH, cat: u32, m: *const WChar) {
    guarded((), || {
        // SAFETY: a handle of ours (or null) and the application's string.
        let (dom, name) = unsafe { (domain_name(d), wide(m)) };
        record(annotation::NAME_CATEGORY, cat, 0, dom, name);
    })
}

/// A registered string's handle: a leaked NUL-terminated copy (null if `s` has a NUL).
fn leak_c_string(s: String) -> *const c_char {
    match std::ffi::CString::new(s) {
        Ok(c) => c.into_raw(),
        Err(_) => core::ptr::null(),
    }
}

unsafe extern "C" fn register_string_a(_d: DomainH, m: CStrPtr) -> *const c_char {
    guarded(core::ptr::null(), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        leak_c_string(v)
    })
}

unsafe extern "C" fn register_string_w(_d: DomainH, m: *const WChar) -> *const c_char {
    guarded(core::ptr::null(), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        leak_c_string(v)
    })
}

fn leak_domain(name: String) -> DomainH {
    Box::into_raw(Box::new(Domain { name }))
}

unsafe extern "C" fn domain_create_a(m: CStrPtr) -> DomainH {
    guarded(core::ptr::null(), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { ascii(m) };
        leak_domain(v)
    })
}

unsafe extern "C" fn domain_create_w(m: *const WChar) -> DomainH {
    guarded(core::ptr::null(), || {
        // SAFETY: NVTX passes the application's string.
        let v = unsafe { wide(m) };
        leak_domain(v)
    })
}
