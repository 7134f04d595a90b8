//! The injection protocol against a fake NVTX copy: the slots kreplay fills, and what the
//! filled slots record.

use core::ffi::{c_uint, c_void};
use std::sync::Mutex;

use kreplay_common::stream::{Annotation, Record, annotation};

use super::ffi::{
    CB_MODULE_CORE, CB_MODULE_CORE2, ETID_CALLBACKS, ExportTableCallbacks, FunctionPointer,
    FunctionTable, core_slot, core2_slot,
};

const CORE_SIZE: usize = 16;
const CORE2_SIZE: usize = 16;

/// The fake copy's function-pointer variables and slot tables (NVTX's `nvtxGlobals`).
struct Fake {
    core_fns: [Option<FunctionPointer>; CORE_SIZE + 1],
    core2_fns: [Option<FunctionPointer>; CORE2_SIZE + 1],
    core_table: [*mut Option<FunctionPointer>; CORE_SIZE + 1],
    core2_table: [*mut Option<FunctionPointer>; CORE2_SIZE + 1],
}

// SAFETY: the fake is only touched under FAKE's mutex.
unsafe impl Send for Fake {}

static FAKE: Mutex<Option<Box<Fake>>> = Mutex::new(None);

unsafe extern "C" fn get_module(module: u32, out: *mut FunctionTable, size: *mut c_uint) -> i32 {
    let mut g = FAKE.lock().unwrap();
    let f = g.as_mut().unwrap();
    let (table, n) = match module {
        CB_MODULE_CORE => (f.core_table.as_mut_ptr(), CORE_SIZE),
        CB_MODULE_CORE2 => (f.core2_table.as_mut_ptr(), CORE2_SIZE),
        _ => return 0,
    };
    // SAFETY: the test passes valid out-pointers, as NVTX's caller (kreplay) does.
    unsafe {
        *out = table.cast();
        *size = n as c_uint;
    }
    1
}

static CALLBACKS: ExportTableCallbacks = ExportTableCallbacks {
    struct_size: core::mem::size_of::<ExportTableCallbacks>(),
    get_module_function_table: Some(get_module),
};

unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    if id == ETID_CALLBACKS {
        (&raw const CALLBACKS).cast()
    } else {
        core::ptr::null()
    }
}

fn slot<T: Copy>(table: &[Option<FunctionPointer>], i: usize) -> T {
    let f = table[i].expect("slot filled");
    assert_eq!(
        core::mem::size_of::<T>(),
        core::mem::size_of::<FunctionPointer>()
    );
    // SAFETY: the test names the slot's real signature, as NVTX's caller does.
    unsafe { core::mem::transmute_copy(&f) }
}

/// The annotations the calling thread recorded since the last call, in order.
fn taken(tid: u32) -> Vec<Annotation> {
    let r = crate::record::global();
    r.merge();
    let (rows, _) = r.take_merged();
    rows.into_iter()
        .filter_map(|row| match row {
            Record::Annotation(a) if a.tid == tid => Some(a),
            _ => None,
        })
        .collect()
}

#[test]
fn injection_fills_the_slots_and_each_call_records_one_annotation() {
    let mut fake = Box::new(Fake {
        core_fns: [None; CORE_SIZE + 1],
        core2_fns: [None; CORE2_SIZE + 1],
        core_table: [core::ptr::null_mut(); CORE_SIZE + 1],
        core2_table: [core::ptr::null_mut(); CORE2_SIZE + 1],
    });
    for i in 1..CORE_SIZE {
        fake.core_table[i] = &raw mut fake.core_fns[i];
    }
    for i in 1..CORE2_SIZE {
        fake.core2_table[i] = &raw mut fake.core2_fns[i];
    }
    *FAKE.lock().unwrap() = Some(fake);
    // `install`, not the entry point: that also starts the flusher thread, which (with no
    // output directory) would discard the rows this test reads back.
    // SAFETY: a getter with NVTX's protocol.
    assert!(unsafe { super::install(Some(get_export_table)) });
    let (core, core2) = {
        let g = FAKE.lock().unwrap();
        let f = g.as_ref().unwrap();
        (f.core_fns, f.core2_fns)
    };
    let filled: Vec<usize> = (0..=CORE_SIZE).filter(|&i| core[i].is_some()).collect();
    assert_eq!(
        filled,
        (1..=13).collect::<Vec<_>>(),
        "core slots 1-13, not NameOsThread"
    );
    let filled2: Vec<usize> = (0..=CORE2_SIZE).filter(|&i| core2[i].is_some()).collect();
    assert_eq!(filled2, vec![1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]);

    let tid = crate::record::current_tid();
    taken(tid);
    let push_a: unsafe extern "C" fn(*const i8) -> i32 = slot(&core, core_slot::RANGE_PUSH_A);
    let pop: extern "C" fn() -> i32 = slot(&core, core_slot::RANGE_POP);
    let mark_w: unsafe extern "C" fn(*const i32) -> () = slot(&core, core_slot::MARK_W);
    let create: unsafe extern "C" fn(*const i8) -> *const c_void =
        slot(&core2, core2_slot::DOMAIN_CREATE_A);
    let dpush: unsafe extern "C" fn(*const c_void, *const super::ffi::EventAttributes) -> i32 =
        slot(&core2, core2_slot::DOMAIN_RANGE_PUSH_EX);
    let start_a: unsafe extern "C" fn(*const i8) -> u64 = slot(&core, core_slot::RANGE_START_A);
    let end: extern "C" fn(u64) = slot(&core, core_slot::RANGE_END);
    let wide: Vec<i32> = "tick\0".chars().map(|c| c as i32).collect();
    // SAFETY: NUL-terminated strings and a valid attribute structure, as NVTX passes them.
    let (levels, id) = unsafe {
        let outer = push_a(c"outer".as_ptr());
        let d = create(c"lib".as_ptr());
        let attr = super::ffi::EventAttributes {
            version: 3,
            size: 48,
            category: 7,
            color_type: 0,
            color: 0,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: super::ffi::message_type::ASCII,
            message: c"inner".as_ptr().cast(),
        };
        let inner = dpush(d, &attr);
        mark_w(wide.as_ptr());
        let id = start_a(c"async".as_ptr());
        end(id);
        (vec![outer, inner, pop(), pop(), pop()], id)
    };
    assert_eq!(
        levels,
        vec![0, 1, 1, 0, -1],
        "push levels, pop levels, a pop too many"
    );
    let got: Vec<(u8, u32, u64, String, String)> = taken(tid)
        .into_iter()
        .map(|a| (a.kind, a.category, a.id, a.domain, a.name))
        .collect();
    use annotation::*;
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        vec![
            (PUSH, 0, 0, s(""), s("outer")),
            (PUSH, 7, 0, s("lib"), s("inner")),
            (MARK, 0, 0, s(""), s("tick")),
            (START, 0, id, s(""), s("async")),
            (END, 0, id, s(""), s("")),
            (POP, 0, 0, s(""), s("")),
            (POP, 0, 0, s(""), s("")),
        ]
    );
    assert!(id > 0);

    // A push dropped at the thread buffer's cap takes its pop with it: kept alone, the pop
    // would close the enclosing range instead.
    let recorder = crate::record::global();
    // SAFETY: as above.
    assert_eq!(unsafe { push_a(c"kept".as_ptr()) }, 0);
    let mut filler = 0;
    while recorder.record_kept(Record::Annotation(Annotation {
        pid: 0,
        tid,
        ts_ns: 0,
        kind: MARK,
        source: NVTX,
        category: 0,
        id: 0,
        domain: String::new(),
        name: String::new(),
    })) {
        filler += 1;
    }
    assert!(filler > 0, "the buffer filled up");
    // SAFETY: as above.
    assert_eq!(unsafe { push_a(c"dropped".as_ptr()) }, 1);
    assert_eq!(
        taken(tid).len(),
        1 + filler,
        "the first push and the marks, not the second"
    );
    assert_eq!((pop(), pop()), (1, 0));
    let got: Vec<(u8, String)> = taken(tid).into_iter().map(|a| (a.kind, a.name)).collect();
    assert_eq!(got, [(POP, s(""))], "only the kept push's pop");
}
