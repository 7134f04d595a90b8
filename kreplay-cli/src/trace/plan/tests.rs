//! The checks of a trace request, in the order they are reported, and the output names.

use super::*;

/// A request for `-p 7` with the default sizes.
fn pid7() -> Request {
    Request {
        pids: vec![7],
        ringbuf_bytes: 1 << 23,
        thread_slots: 4096,
        ..Request::default()
    }
}

fn check(req: Request) -> Result<Plan, PlanError> {
    Plan::check(req, |p| p != Path::new("/missing.so"))
}

#[test]
fn exactly_one_kind_of_target_is_asked_for() {
    let none = Request {
        pids: vec![],
        ..pid7()
    };
    assert_eq!(check(none.clone()), Err(PlanError::NoTarget));
    assert_eq!(
        PlanError::NoTarget.to_string(),
        "say what to trace: -p PID, --all, or a command after --"
    );
    let two = [
        Request {
            all: true,
            ..pid7()
        },
        Request {
            command: vec!["./app".into()],
            ..pid7()
        },
        Request {
            all: true,
            command: vec!["./app".into()],
            ..none
        },
    ];
    for req in two {
        assert_eq!(check(req), Err(PlanError::SeveralTargets));
    }
    assert_eq!(
        PlanError::SeveralTargets.to_string(),
        "give only one of -p PID, --all, or a command after --"
    );
}

#[test]
fn ring_sizes_are_powers_of_two_of_at_least_a_page() {
    for bad in [0, 4095, 2048, 12288, 3 << 20] {
        let req = Request {
            ringbuf_bytes: bad,
            ..pid7()
        };
        assert_eq!(check(req), Err(PlanError::RingbufBytes(bad)), "{bad}");
    }
    for good in [4096, 1 << 23, 1 << 31] {
        let req = Request {
            ringbuf_bytes: good,
            ..pid7()
        };
        assert_eq!(check(req).unwrap().ringbuf_bytes, good);
    }
    assert_eq!(
        PlanError::RingbufBytes(12288).to_string(),
        "--ringbuf-bytes must be a power of two of at least 4096, got 12288"
    );
}

#[test]
fn thread_slots_are_bounded_on_both_sides() {
    for (slots, ok) in [
        (0, false),
        (1, true),
        (MAX_THREAD_SLOTS, true),
        (MAX_THREAD_SLOTS + 1, false),
    ] {
        let got = check(Request {
            thread_slots: slots,
            ..pid7()
        });
        if ok {
            assert_eq!(got.unwrap().thread_slots, slots);
        } else {
            assert_eq!(got, Err(PlanError::ThreadSlots(slots)));
        }
    }
    assert_eq!(
        PlanError::ThreadSlots(0).to_string(),
        "--thread-slots must be between 1 and 262144 (432 bytes of kernel memory each), got 0"
    );
}

#[test]
fn the_first_missing_library_is_named() {
    let req = Request {
        libs: vec!["/ok.so".into(), "/missing.so".into()],
        ..pid7()
    };
    let err = check(req).unwrap_err();
    assert_eq!(err, PlanError::LibraryNotFound("/missing.so".into()));
    assert_eq!(err.to_string(), "library not found: /missing.so");
}

#[test]
fn checks_are_reported_in_order_targets_then_sizes_then_libraries() {
    let all_wrong = Request {
        pids: vec![],
        ringbuf_bytes: 5,
        thread_slots: 0,
        libs: vec!["/missing.so".into()],
        ..pid7()
    };
    assert_eq!(check(all_wrong.clone()), Err(PlanError::NoTarget));
    let sizes_wrong = Request {
        pids: vec![1],
        ..all_wrong
    };
    assert_eq!(check(sizes_wrong.clone()), Err(PlanError::RingbufBytes(5)));
    let slots_wrong = Request {
        ringbuf_bytes: 4096,
        ..sizes_wrong
    };
    assert_eq!(check(slots_wrong.clone()), Err(PlanError::ThreadSlots(0)));
}

#[test]
fn a_valid_request_becomes_its_mode() {
    let pids = check(Request {
        pids: vec![3, 5],
        libs: vec!["/ok.so".into()],
        ..pid7()
    })
    .unwrap();
    assert_eq!(
        pids,
        Plan {
            mode: Mode::Pids(vec![3, 5]),
            libs: vec!["/ok.so".into()],
            ringbuf_bytes: 1 << 23,
            thread_slots: 4096,
            follow: false,
        }
    );
    assert_eq!(pids.program(), None);
    let all = check(Request {
        pids: vec![],
        all: true,
        ..pid7()
    })
    .unwrap();
    assert_eq!(all.mode, Mode::All);
    let cmd = check(Request {
        pids: vec![],
        command: vec!["./app".into(), "-x".into()],
        env: vec![("K".into(), "v".into())],
        ..pid7()
    })
    .unwrap();
    assert_eq!(
        cmd.mode,
        Mode::Command {
            argv: vec!["./app".into(), "-x".into()],
            env: vec![("K".into(), "v".into())],
        }
    );
    assert_eq!(cmd.program(), Some("./app"));
}

#[test]
fn a_command_is_followed_with_its_children_and_pids_only_when_asked() {
    let cmd = Request {
        pids: vec![],
        command: vec!["./app".into()],
        ..pid7()
    };
    assert!(check(cmd.clone()).unwrap().follow);
    let alone = Request {
        no_children: true,
        ..cmd.clone()
    };
    assert!(!check(alone).unwrap().follow);
    assert!(!check(pid7()).unwrap().follow);
    let tree = Request {
        children: true,
        ..pid7()
    };
    assert!(check(tree).unwrap().follow);
    let all = Request {
        pids: vec![],
        all: true,
        ..pid7()
    };
    assert!(!check(all.clone()).unwrap().follow);
    let children_of_command = Request {
        children: true,
        ..cmd
    };
    assert_eq!(
        check(children_of_command),
        Err(PlanError::ChildrenWithoutPid)
    );
    let no_children_of_all = Request {
        no_children: true,
        ..all
    };
    assert_eq!(
        check(no_children_of_all.clone()),
        Err(PlanError::NoChildrenWithoutCommand)
    );
    assert_eq!(
        PlanError::NoChildrenWithoutCommand.to_string(),
        "--no-children applies to a command after --; -p PID follows no children unless --children"
    );
}

#[test]
fn streams_go_beside_the_trace_and_the_default_name_carries_the_local_time() {
    assert_eq!(
        streams_dir(Path::new("/t/run.pftrace")),
        PathBuf::from("/t/run.pftrace.streams")
    );
    assert_eq!(streams_dir(Path::new("out")), PathBuf::from("out.streams"));
    // SAFETY: tm is plain integers (and a pointer left null): all-zero is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    (tm.tm_year, tm.tm_mon, tm.tm_mday) = (126, 0, 5);
    (tm.tm_hour, tm.tm_min, tm.tm_sec) = (9, 7, 3);
    assert_eq!(
        dated_output(&tm),
        PathBuf::from("kreplay-20260105-090703.pftrace")
    );
    let name = default_output().display().to_string();
    assert!(
        name.len() == "kreplay-20260105-090703.pftrace".len()
            && name.starts_with("kreplay-2")
            && name.ends_with(".pftrace"),
        "{name}"
    );
}
