//! Which libraries each kind of target attaches to, with fake libraries and probes.

use std::cell::RefCell;

use kreplay_common::api::Library;

use super::*;

fn lib(path: &str, ino: u64, family: Library) -> RuntimeLib {
    RuntimeLib {
        dev_ino: (1, ino),
        host_path: path.into(),
        family,
    }
}

/// Fake libraries: fixed answers, and the questions asked.
#[derive(Default)]
struct Libs {
    mapped: Vec<RuntimeLib>,
    dlopen: Vec<RuntimeLib>,
    candidates: Vec<RuntimeLib>,
    startup: Vec<RuntimeLib>,
    asked: RefCell<Vec<String>>,
}

impl Libraries for Libs {
    fn of_pid(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
        self.asked
            .borrow_mut()
            .push(format!("of_pid {pid} {extra:?}"));
        if pid == 404 {
            anyhow::bail!("no such process: {pid}");
        }
        Ok(self.mapped.clone())
    }
    fn of_tree_root(&self, pid: u32, extra: &[PathBuf]) -> anyhow::Result<Vec<RuntimeLib>> {
        self.asked
            .borrow_mut()
            .push(format!("of_tree_root {pid} {extra:?}"));
        if pid == 404 {
            anyhow::bail!("no such process: {pid}");
        }
        Ok(Vec::new())
    }
    fn dlopen_candidates(&self, pid: u32) -> Vec<RuntimeLib> {
        self.asked.borrow_mut().push(format!("dlopen {pid}"));
        self.dlopen.clone()
    }
    fn candidates(&self, ld: Option<&str>, extra: &[PathBuf]) -> Vec<RuntimeLib> {
        self.asked
            .borrow_mut()
            .push(format!("candidates {ld:?} {extra:?}"));
        self.candidates.clone()
    }
    fn startup(&self, program: &str) -> Vec<RuntimeLib> {
        self.asked.borrow_mut().push(format!("startup {program}"));
        self.startup.clone()
    }
}

/// Fake probes: what was attached where; attaching a path in `refuse` fails.
#[derive(Default)]
struct Probes {
    attached: Vec<(String, Scope)>,
    rescans: u32,
    refuse: Vec<&'static str>,
}

impl Attach for Probes {
    fn attach(&mut self, lib: &RuntimeLib, scope: Scope) -> anyhow::Result<()> {
        let path = lib.host_path.display().to_string();
        if self.refuse.contains(&path.as_str()) {
            anyhow::bail!("cannot attach to {path}");
        }
        self.attached.push((path, scope));
        Ok(())
    }
    fn rescan_all(&mut self) {
        self.rescans += 1;
    }
}

fn plan(mode: Mode) -> Plan {
    Plan {
        mode,
        libs: vec!["/x/libextra.so".into()],
        ringbuf_bytes: 4096,
        thread_slots: 1,
        follow: false,
    }
}

fn command() -> Plan {
    plan(Mode::Command {
        argv: vec!["./app".into(), "arg".into()],
        env: vec![("K".into(), "v".into())],
    })
}

#[test]
fn each_pid_is_looked_up_with_the_extra_libraries_and_a_gone_one_fails() {
    let libs = Libs {
        mapped: vec![lib("/r/libamdhip64.so", 1, Library::Hip)],
        ..Libs::default()
    };
    let found = pid_libraries(&plan(Mode::Pids(vec![3, 5])), &libs).unwrap();
    assert_eq!(
        found,
        vec![(3, libs.mapped.clone()), (5, libs.mapped.clone())]
    );
    assert_eq!(
        *libs.asked.borrow(),
        [
            r#"of_pid 3 ["/x/libextra.so"]"#,
            r#"of_pid 5 ["/x/libextra.so"]"#
        ]
    );
    let err = pid_libraries(&plan(Mode::Pids(vec![3, 404, 5])), &libs).unwrap_err();
    assert_eq!(err.to_string(), "no such process: 404");
    assert_eq!(libs.asked.borrow().len(), 4, "stops at the first failure");
    assert_eq!(pid_libraries(&plan(Mode::All), &libs).unwrap(), vec![]);
    assert_eq!(pid_libraries(&command(), &libs).unwrap(), vec![]);
    assert_eq!(libs.asked.borrow().len(), 4, "other modes look nothing up");
}

#[test]
fn only_a_command_is_started_and_its_pid_becomes_the_target() {
    let mut calls = Vec::new();
    let (t, child) = start(&command(), |argv, env| {
        calls.push((argv.to_vec(), env.to_vec()));
        Ok(("child", 77))
    })
    .unwrap();
    assert_eq!((t, child), (Target::Command(77), Some("child")));
    assert_eq!(
        calls,
        [(
            vec!["./app".to_string(), "arg".to_string()],
            vec![("K".to_string(), "v".to_string())]
        )]
    );
    let never = |_: &[String], _: &[(String, String)]| -> std::io::Result<((), u32)> {
        panic!("nothing to start")
    };
    assert_eq!(
        start(&plan(Mode::Pids(vec![4, 2])), never).unwrap(),
        (Target::Pids(vec![4, 2]), None)
    );
    assert_eq!(start(&plan(Mode::All), never).unwrap(), (Target::All, None));
    let err = start(&command(), |_, _| -> std::io::Result<((), u32)> {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    })
    .unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "starting ./app: {}",
            std::io::Error::from(std::io::ErrorKind::NotFound)
        )
    );
}

#[test]
fn a_pid_gets_its_mapped_libraries_and_the_other_families_it_may_dlopen() {
    let hip = lib("/r/libamdhip64.so", 1, Library::Hip);
    let libs = Libs {
        dlopen: vec![
            lib("/r/other/libamdhip64.so", 2, Library::Hip),
            lib("/r/libcuda.so.1", 3, Library::Cuda),
            lib("/r/libbroken.so", 4, Library::Hsa),
        ],
        ..Libs::default()
    };
    let mut probes = Probes {
        refuse: vec!["/r/libbroken.so"],
        ..Probes::default()
    };
    let target = Target::Pids(vec![9]);
    let found = vec![(9, vec![hip])];
    attach(
        &plan(Mode::Pids(vec![9])),
        &target,
        &found,
        Some("/ld"),
        &libs,
        &mut probes,
    )
    .unwrap();
    // The mapped family is not looked for again; a dlopen candidate that fails is skipped.
    assert_eq!(
        probes.attached,
        [
            ("/r/libamdhip64.so".to_string(), Scope::Pid(9)),
            ("/r/libcuda.so.1".to_string(), Scope::Pid(9)),
        ]
    );
    assert_eq!(probes.rescans, 0);
    assert_eq!(*libs.asked.borrow(), ["dlopen 9"]);
    // A mapped library that fails to attach fails the run.
    let mut strict = Probes {
        refuse: vec!["/r/libamdhip64.so"],
        ..Probes::default()
    };
    let err = attach(
        &plan(Mode::Pids(vec![9])),
        &target,
        &found,
        None,
        &libs,
        &mut strict,
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "cannot attach to /r/libamdhip64.so"
    );
}

#[test]
fn all_attaches_every_candidate_system_wide_then_rescans() {
    let libs = Libs {
        candidates: vec![
            lib("/usr/lib/libcuda.so.1", 1, Library::Cuda),
            lib("/x/libextra.so", 2, Library::Hip),
        ],
        ..Libs::default()
    };
    let mut probes = Probes::default();
    attach(
        &plan(Mode::All),
        &Target::All,
        &[],
        Some("/ld"),
        &libs,
        &mut probes,
    )
    .unwrap();
    assert_eq!(
        probes.attached,
        [
            ("/usr/lib/libcuda.so.1".to_string(), Scope::All),
            ("/x/libextra.so".to_string(), Scope::All),
        ]
    );
    assert_eq!(probes.rescans, 1);
    // kreplay's own LD_LIBRARY_PATH says nothing about other processes.
    assert_eq!(
        *libs.asked.borrow(),
        [r#"candidates None ["/x/libextra.so"]"#]
    );
}

#[test]
fn a_command_gets_its_startup_libraries_and_other_families_from_the_usual_places() {
    let libs = Libs {
        startup: vec![lib("/app/rpath/libamdhip64.so", 1, Library::Hip)],
        candidates: vec![
            // Another copy of a family the loader resolves at startup: left out.
            lib("/usr/lib/libamdhip64.so", 2, Library::Hip),
            // The same file as the startup one (by dev/ino): kept (the attacher skips a file it
            // already attached for the scope).
            lib("/alias/libamdhip64.so", 1, Library::Hip),
            lib("/usr/lib/libcuda.so.1", 3, Library::Cuda),
        ],
        ..Libs::default()
    };
    let mut probes = Probes::default();
    attach(
        &command(),
        &Target::Command(41),
        &[],
        Some("/ld"),
        &libs,
        &mut probes,
    )
    .unwrap();
    assert_eq!(
        probes.attached,
        [
            ("/alias/libamdhip64.so".to_string(), Scope::Pid(41)),
            ("/usr/lib/libcuda.so.1".to_string(), Scope::Pid(41)),
            ("/app/rpath/libamdhip64.so".to_string(), Scope::Pid(41)),
        ]
    );
    assert_eq!(probes.rescans, 0);
    assert_eq!(
        *libs.asked.borrow(),
        [
            "startup ./app",
            r#"candidates Some("/ld") ["/x/libextra.so"]"#
        ]
    );
    let mut failing = Probes {
        refuse: vec!["/usr/lib/libcuda.so.1"],
        ..Probes::default()
    };
    let err = attach(
        &command(),
        &Target::Command(41),
        &[],
        None,
        &libs,
        &mut failing,
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "cannot attach to /usr/lib/libcuda.so.1"
    );
}

fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

#[test]
fn the_first_line_names_what_is_traced_and_the_time_spent_attaching() {
    assert_eq!(
        tracing_line(&Target::Pids(vec![12, 34]), None, 80, ms(7)),
        "kreplay: tracing pid 12, 34: 80 probes attached in 7 ms; stop with Ctrl-C"
    );
    assert_eq!(
        tracing_line(&Target::All, None, 3, ms(0)),
        "kreplay: tracing every process using a GPU runtime: 3 probes attached in 0 ms; stop \
         with Ctrl-C"
    );
    assert_eq!(
        tracing_line(&Target::Command(41), Some("./app"), 120, ms(1999)),
        "kreplay: tracing ./app (pid 41): 120 probes attached in 1999 ms; stop with Ctrl-C"
    );
}

#[test]
fn descendants_are_found_through_every_generation_once() {
    // 10 → 11 → 13 → 14, 10 → 12; 20 is another tree; 15's parent 14 appears later in the list.
    let parents = [(11, 10), (12, 10), (13, 11), (21, 20), (15, 14), (14, 13)];
    let mut d = descendants(10, &parents);
    d.sort_unstable();
    assert_eq!(d, vec![11, 12, 13, 14, 15]);
    assert_eq!(descendants(12, &parents), Vec::<u32>::new());
    assert_eq!(descendants(20, &parents), vec![21]);
}

#[test]
fn a_followed_tree_is_probed_for_every_process_and_a_lone_target_for_itself() {
    let libs = Libs {
        startup: vec![lib("/app/rpath/libamdhip64.so", 1, Library::Hip)],
        mapped: vec![lib("/r/libcuda.so.1", 2, Library::Cuda)],
        ..Libs::default()
    };
    let followed = Plan {
        follow: true,
        ..command()
    };
    let mut probes = Probes::default();
    attach(
        &followed,
        &Target::Command(41),
        &[],
        None,
        &libs,
        &mut probes,
    )
    .unwrap();
    assert_eq!(
        probes.attached,
        [("/app/rpath/libamdhip64.so".to_string(), Scope::All)]
    );
    let tree = Plan {
        follow: true,
        ..plan(Mode::Pids(vec![9]))
    };
    let mut probes = Probes::default();
    attach(
        &tree,
        &Target::Pids(vec![9]),
        &[(9, libs.mapped.clone())],
        None,
        &libs,
        &mut probes,
    )
    .unwrap();
    assert_eq!(
        probes.attached,
        [("/r/libcuda.so.1".to_string(), Scope::All)]
    );
    assert_eq!(scope(&tree, 9), Scope::All);
    assert_eq!(scope(&plan(Mode::Pids(vec![9])), 9), Scope::Pid(9));
}

#[test]
fn the_root_of_a_followed_tree_may_map_no_runtime_but_must_exist() {
    let libs = Libs {
        mapped: vec![lib("/r/libamdhip64.so", 1, Library::Hip)],
        ..Libs::default()
    };
    let tree = Plan {
        follow: true,
        ..plan(Mode::Pids(vec![7]))
    };
    assert_eq!(pid_libraries(&tree, &libs).unwrap(), vec![(7, vec![])]);
    let gone = Plan {
        follow: true,
        ..plan(Mode::Pids(vec![404]))
    };
    assert_eq!(
        pid_libraries(&gone, &libs).unwrap_err().to_string(),
        "no such process: 404"
    );
    assert_eq!(
        *libs.asked.borrow(),
        [
            r#"of_tree_root 7 ["/x/libextra.so"]"#,
            r#"of_tree_root 404 ["/x/libextra.so"]"#,
        ]
    );
}
