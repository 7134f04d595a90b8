//! The probe records' layouts and cookie encoding.

use super::*;
use crate::api::{APIS, NO_ARG, id_of};

#[test]
fn cookie_round_trips_every_api() {
    for (i, s) in APIS.iter().enumerate() {
        let c = Cookie::for_spec(i as u16, s);
        assert_eq!(c.api(), i as u16);
        let expect_out = if s.out_arg == NO_ARG {
            0
        } else {
            s.out_arg as u64 + 1
        };
        assert_eq!(c.out_plus_one(), expect_out, "{}", s.name);
    }
    let qid = id_of("hsa_queue_create").unwrap();
    let q = Cookie::for_spec(qid, &APIS[qid as usize]);
    assert_eq!(
        (q.out_plus_one(), q.mode(), q.words()),
        (8, mode::STACK_WORDS, 2)
    );
    let m = id_of("hipMalloc").unwrap();
    let c = Cookie::for_spec(m, &APIS[m as usize]);
    assert_eq!(
        (c.role(), c.size_plus_one(), c.out_plus_one()),
        (role::ALLOC, 2, 1)
    );
    let ex = id_of("cuLaunchKernelEx").unwrap();
    let c = Cookie::for_spec(ex, &APIS[ex as usize]);
    assert_eq!((c.mode(), c.words()), (mode::ARG0_STRUCT, 5));
    assert_eq!((c.name_plus_one(), c.handle_plus_one()), (0, 0));
}

#[test]
fn naming_calls_carry_name_and_handle_in_the_cookie() {
    let reg = id_of("__hipRegisterFunction").unwrap();
    let c = Cookie::for_spec(reg, &APIS[reg as usize]);
    assert_eq!(
        (
            c.api(),
            c.name_plus_one(),
            c.handle_plus_one(),
            c.void_ret()
        ),
        (reg, 4, 2, true)
    );
    let get = id_of("hipModuleGetFunction").unwrap();
    let c = Cookie::for_spec(get, &APIS[get as usize]);
    assert_eq!(
        (c.name_plus_one(), c.handle_plus_one(), c.void_ret()),
        (3, 0, false)
    );
    assert_eq!(c.out_plus_one(), 1);
}

#[test]
fn samples_are_told_apart_by_size() {
    let mut n = NameRecord {
        ts_ns: 1,
        handle: 0x1000,
        pid: 2,
        tid: 3,
        api: 4,
        len: 6,
        _pad: 0,
        name: [0; NAME_BYTES],
    };
    n.name[..6].copy_from_slice(b"saxpy\0");
    // SAFETY: NameRecord is plain data; viewing it as bytes for the test is sound.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            (&raw const n).cast::<u8>(),
            core::mem::size_of::<NameRecord>(),
        )
    };
    let Some(Sample::Name(back)) = Sample::from_bytes(bytes) else {
        panic!("not a name record")
    };
    assert_eq!((back.name_bytes(), back.handle), (&b"saxpy"[..], 0x1000));
    assert_eq!(Sample::from_bytes(&bytes[..100]), None);
    n.len = NAME_BYTES as u16;
    n.name = [b'a'; NAME_BYTES];
    assert_eq!(n.name_bytes().len(), NAME_BYTES);
}

#[test]
fn record_decodes_from_bytes() {
    let mut r = CallRecord {
        enter_ns: 1,
        exit_ns: 2,
        pid: 3,
        tid: 4,
        api: 5,
        flags: FLAG_OUT_VALID,
        parent: 0,
        _pad: 0,
        args: [6, 7, 8, 9, 10, 11],
        extra: [12, 13, 14, 15, 16],
        ret: 17,
        out: 18,
    };
    // SAFETY: CallRecord is plain data; viewing it as bytes for the test is sound.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            (&raw const r).cast::<u8>(),
            core::mem::size_of::<CallRecord>(),
        )
    };
    assert_eq!(CallRecord::from_bytes(bytes), Some(r));
    assert_eq!(CallRecord::from_bytes(&bytes[..135]), None);
    assert_eq!(r.arg(7), Some(13));
    assert_eq!(r.arg(11), None);
    r.flags = 0;
    assert_eq!(r.arg(0), Some(6));
}
