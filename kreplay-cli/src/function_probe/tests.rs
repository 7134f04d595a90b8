//! `kreplay probe`'s checks, scopes, loop decisions, counting and lines, with plain values.

use kreplay_common::probe::{EXTRA_WORDS, NAME_BYTES, NameRecord};

use super::*;

const LIB: &str = "/l/libfoo.so";

fn request<'a>(pids: &'a [u32], command: &'a [String]) -> Request<'a> {
    Request {
        lib: Path::new(LIB),
        pids,
        command,
        ringbuf_bytes: 1 << 22,
    }
}

/// Process 8 and the library exist; nothing else does.
fn exists(p: &Path) -> bool {
    p == Path::new("/proc/8") || p == Path::new(LIB)
}

fn call() -> CallRecord {
    CallRecord {
        enter_ns: 1_000,
        exit_ns: 1_250,
        pid: 42,
        tid: 43,
        api: USER_FUNCTION,
        flags: 0,
        parent: 0,
        _pad: 0,
        args: [1, 2, 0xff, 0, 0, 7],
        extra: [0; EXTRA_WORDS],
        ret: 3,
        out: 0,
    }
}

#[test]
fn requests_are_checked_in_order_and_name_the_culprit() {
    let cmd = vec!["./app".to_string()];
    assert_eq!(request(&[8], &[]).check(exists), Ok(()));
    assert_eq!(request(&[], &cmd).check(exists), Ok(()));
    assert_eq!(request(&[], &[]).check(exists), Ok(()));
    let small = Request {
        ringbuf_bytes: 1024,
        ..request(&[8], &cmd)
    };
    assert_eq!(small.check(exists), Err(RequestError::RingbufBytes(1024)));
    assert_eq!(
        request(&[9], &cmd).check(exists),
        Err(RequestError::PidsAndCommand)
    );
    assert_eq!(
        request(&[8, 9, 10], &[]).check(exists),
        Err(RequestError::NoSuchProcess(9))
    );
    let no_lib = Request {
        lib: Path::new("/nonexistent/libx.so"),
        ..request(&[9], &[])
    };
    assert_eq!(no_lib.check(exists), Err(RequestError::NoSuchProcess(9)));
    let err = Request {
        lib: Path::new("/nonexistent/libx.so"),
        ..request(&[8], &[])
    }
    .check(exists)
    .unwrap_err();
    assert_eq!(err.to_string(), "library not found: /nonexistent/libx.so");
    assert_eq!(
        [
            RequestError::RingbufBytes(1024).to_string(),
            RequestError::PidsAndCommand.to_string(),
            RequestError::NoSuchProcess(9).to_string(),
            RequestError::SymbolNotFound {
                symbol: "foo_add".into(),
                lib: LIB.into(),
                functions: 12,
            }
            .to_string(),
        ],
        [
            "--ringbuf-bytes must be a power of two of at least 4096, got 1024",
            "give either -p PID or a command after --, not both",
            "no such process: 9",
            "symbol foo_add not found in /l/libfoo.so (12 functions there)",
        ]
    );
}

#[test]
fn the_probe_goes_to_the_command_the_pids_or_every_process() {
    let cmd = vec!["./app".to_string(), "x".to_string()];
    let started = request(&[], &cmd);
    assert_eq!(started.scopes(Some(77)), [Scope::Pid(77)]);
    assert_eq!(
        started.probing_line("foo_add", Some(77)),
        "kreplay: probing foo_add in /l/libfoo.so for ./app (pid 77); stop with Ctrl-C"
    );
    let pids = request(&[3, 5], &[]);
    assert_eq!(pids.scopes(None), [Scope::Pid(3), Scope::Pid(5)]);
    assert_eq!(
        pids.probing_line("getpid", None),
        "kreplay: probing getpid in /l/libfoo.so for pid 3, 5; stop with Ctrl-C"
    );
    let every = request(&[], &[]);
    assert_eq!(every.scopes(None), [Scope::All]);
    assert_eq!(
        every.probing_line("getpid", None),
        "kreplay: probing getpid in /l/libfoo.so for every process; stop with Ctrl-C"
    );
}

#[test]
fn the_user_cookie_keeps_stack_words_and_no_inventory_role() {
    let c = user_cookie();
    assert_eq!(c, Cookie(u64::from(USER_FUNCTION) | 1 << 24));
    assert_eq!(
        (c.api(), c.mode(), c.words(), c.role(), c.out_plus_one()),
        (USER_FUNCTION, mode::STACK_WORDS, 0, role::NONE, 0)
    );
}

#[test]
fn the_loop_drains_on_its_timer_and_stops_on_a_signal_or_the_commands_exit() {
    let mut w = Watch::new(&[]);
    assert!(!w.checks_exits());
    let never = |_| panic!("no pid to look at");
    assert_eq!(w.on(Wake::Batch, never), Next::Continue);
    assert_eq!(w.on(Wake::DrainTick, never), Next::Drain);
    assert_eq!(w.on(Wake::Stop, never), Next::Finish);
    assert_eq!(w.exit_code(), 0);
    assert_eq!(w.on(Wake::Exited(3), never), Next::Finish);
    assert_eq!(w.exit_code(), 3);
    // A status outside 0..=255 is clamped.
    let mut big = Watch::new(&[]);
    big.on(Wake::Exited(300), never);
    assert_eq!(big.exit_code(), 255);
    let mut neg = Watch::new(&[]);
    neg.on(Wake::Exited(-9), never);
    assert_eq!(neg.exit_code(), 0);
}

#[test]
fn with_pids_the_loop_ends_once_every_one_has_exited() {
    let mut w = Watch::new(&[3, 5]);
    assert!(w.checks_exits());
    assert_eq!(w.on(Wake::ExitCheck, |p| p == 5), Next::Continue);
    assert_eq!(w.on(Wake::ExitCheck, |p| p == 3), Next::Continue);
    assert_eq!(w.on(Wake::ExitCheck, |_| false), Next::Finish);
    assert_eq!(w.exit_code(), 0);
}

#[test]
fn only_calls_are_counted_and_passed_on() {
    let mut calls = Calls::default();
    let name = NameRecord {
        ts_ns: 1,
        handle: 2,
        pid: 42,
        tid: 43,
        api: 0,
        len: 0,
        _pad: 0,
        name: [0; NAME_BYTES],
    };
    assert_eq!(calls.take(Sample::Name(name)), None);
    assert_eq!(calls.take(Sample::Call(call())), Some(call()));
    assert_eq!(calls.take(Sample::Call(call())), Some(call()));
    assert_eq!(calls.count, 2);
}

#[test]
fn a_call_prints_as_json_or_as_a_hex_text_line() {
    assert_eq!(
        call_line(&call(), "foo_add", true),
        "{\"pid\":42,\"tid\":43,\"enter_ns\":1000,\"exit_ns\":1250,\"args\":[1,2,255,0,0,7],\"ret\":3}\n"
    );
    assert_eq!(
        call_line(&call(), "foo_add", false),
        "     42      43 foo_add(0x1, 0x2, 0xff, 0x0, 0x0, 0x7) = 0x3  250 ns\n"
    );
    // A return seen before its entry's clock (another CPU's) shows 0 ns, not a wrap.
    let early = CallRecord {
        exit_ns: 900,
        ..call()
    };
    assert!(call_line(&early, "f", false).ends_with(" = 0x3  0 ns\n"));
}

#[test]
fn the_report_names_each_cause_of_a_lost_call() {
    let c = Counters {
        ringbuf_drops: 4,
        entry_map_full: 2,
        missing_entry: 7,
        alloc_map_full: 1,
        slot_clash: 3,
        ..Counters::default()
    };
    assert_eq!(
        report_line(1000, &c, 5),
        "kreplay: 1000 calls recorded; dropped: 10 (ring buffer full 4, nested too deep 2, \
         thread slot shared 3); returns without entry 7; unreadable records 5"
    );
}

#[test]
fn a_symbol_missing_from_the_library_is_named_with_the_library_and_its_function_count() {
    let req = request(&[], &[]);
    let empty = SymbolTable::default();
    assert_eq!(
        req.offset_in(&empty, "foo_add"),
        Err(RequestError::SymbolNotFound {
            symbol: "foo_add".to_owned(),
            lib: PathBuf::from(LIB),
            functions: 0,
        })
    );
    assert_eq!(
        req.offset_in(&empty, "foo_add").unwrap_err().to_string(),
        "symbol foo_add not found in /l/libfoo.so (0 functions there)"
    );
}

#[test]
fn bare_attaches_the_empty_programs_and_otherwise_the_recording_ones() {
    assert_eq!(programs(true), Programs::Bare);
    assert_eq!(programs(false), Programs::Record);
}
