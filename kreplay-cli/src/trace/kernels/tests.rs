//! Kernel names: maps parsing, naming calls, symbol and driver-object lookups.

use super::*;
use kreplay_common::{api::id_of, probe::NAME_BYTES};

fn call(api: &str, args: [u64; 6], out: u64) -> CallRecord {
    CallRecord {
        enter_ns: 10,
        exit_ns: 20,
        pid: std::process::id(),
        tid: 1,
        api: id_of(api).unwrap(),
        flags: FLAG_OUT_VALID,
        parent: 0,
        _pad: 0,
        args,
        extra: [0; 5],
        ret: 0,
        out,
    }
}

/// A driver object as the driver lays it out: a word, then the name pointer.
#[repr(C)]
struct DriverObject {
    first: u64,
    name: *const u8,
}

#[test]
fn kernel_handles_of_runtime_and_driver_launches_are_named_from_the_driver_object() {
    let name = b"_Z4stepPf\0";
    let obj = DriverObject {
        first: 1,
        name: name.as_ptr(),
    };
    let handle = &obj as *const DriverObject as u64;
    let mut k = KernelNames::default();
    // A cudaKernel_t passed to cudaLaunchKernel: heap memory, no file, no symbol.
    let r = k.launch(&call("cudaLaunchKernel", [handle, 0, 0, 0, 0, 0], 0));
    assert_eq!(r.name.as_deref(), Some("step(float*)"));
    assert_eq!(
        r.new_record.map(|n| (n.handle, n.name)),
        Some((handle, "step(float*)".into()))
    );
    // A CUfunction passed to cuLaunchKernel, once per handle.
    let r = k.launch(&call("cuLaunchKernel", [handle, 0, 0, 0, 0, 0], 0));
    assert_eq!(r.name.as_deref(), Some("step(float*)"));
    // A handle whose object points at no symbol stays unnamed.
    let junk = b"not a name\0";
    let bad = DriverObject {
        first: 1,
        name: junk.as_ptr(),
    };
    let bad_handle = &bad as *const DriverObject as u64;
    let r = k.launch(&call("cudaLaunchKernel", [bad_handle, 0, 0, 0, 0, 0], 0));
    assert_eq!(r, Resolved::default());
}

#[test]
fn maps_lines_with_offsets_and_spaces_parse() {
    let text = "7f00-7f80 r-xp 00001000 08:01 42 /opt/my lib/libx.so\n\
                7f80-7fa0 rw-p 00000000 00:00 0 \n\
                7fa0-7fb0 r--p 00002000 08:01 43 /usr/lib/liby.so (deleted)\n";
    assert_eq!(
        parse_maps(text),
        vec![
            Mapping {
                start: 0x7f00,
                end: 0x7f80,
                offset: 0x1000,
                path: "/opt/my lib/libx.so".into()
            },
            Mapping {
                start: 0x7fa0,
                end: 0x7fb0,
                offset: 0x2000,
                path: "/usr/lib/liby.so".into()
            },
        ]
    );
}

#[test]
fn itanium_names_are_demangled_and_c_names_kept() {
    assert_eq!(
        demangle("_Z5saxpyfPKfPfm"),
        "saxpy(float, float const*, float*, unsigned long)"
    );
    assert_eq!(demangle("saxpy"), "saxpy");
    assert_eq!(demangle("_Znot valid"), "_Znot valid");
}

#[test]
fn the_mappings_of_a_process_that_exited_are_kept() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let mut k = KernelNames::default();
    k.remember(std::process::id());
    let mine = k.maps[&std::process::id()].maps.len();
    assert!(mine > 0);
    // The child, exited and not yet reaped, has no mappings to read: nothing is stored.
    std::thread::sleep(std::time::Duration::from_millis(200));
    k.remember(pid);
    assert!(!k.maps.contains_key(&pid));
    // Stored mappings are not replaced by an empty read.
    let zombie = ProcMaps::read(pid).unwrap();
    assert!(zombie.maps.is_empty());
    k.maps
        .insert(pid, ProcMaps::read(std::process::id()).unwrap());
    k.remember(pid);
    assert_eq!(k.maps[&pid].maps.len(), mine);
    child.wait().unwrap();
}

#[test]
fn module_handles_are_named_and_aliased() {
    let mut k = KernelNames::default();
    let mut n = NameRecord {
        ts_ns: 5,
        handle: 0xabc0,
        pid: std::process::id(),
        tid: 1,
        api: id_of("cuLibraryGetKernel").unwrap(),
        len: 9,
        _pad: 0,
        name: [0; NAME_BYTES],
    };
    n.name[..9].copy_from_slice(b"_Z3addPf\0");
    let rec = k.named(&n);
    assert_eq!((rec.handle, rec.name.as_str()), (0xabc0, "add(float*)"));
    // cuKernelGetFunction(&f, kernel) names f after the kernel.
    let alias = k
        .alias(&call(
            "cuKernelGetFunction",
            [0x7000, 0xabc0, 0, 0, 0, 0],
            0xf00d,
        ))
        .unwrap();
    assert_eq!((alias.handle, alias.name.as_str()), (0xf00d, "add(float*)"));
    let launched = k.launch(&call("cuLaunchKernel", [0xf00d, 1, 1, 1, 1, 1], 0));
    assert_eq!(launched.name.as_deref(), Some("add(float*)"));
    assert_eq!(launched.new_record, None);
    // A heap handle nobody named stays unnamed (and is not looked up again).
    let unknown = Box::new(0u64);
    let addr = &*unknown as *const u64 as u64;
    let r = call("hipModuleLaunchKernel", [addr, 1, 1, 1, 1, 1], 0);
    assert_eq!(k.launch(&r), Resolved::default());
    assert!(k.misses.contains(&(r.pid, addr)));
}

#[test]
fn exited_processes_are_forgotten_at_the_second_look() {
    let mut k = KernelNames::default();
    let mut n = NameRecord {
        ts_ns: 1,
        handle: 0x10,
        pid: 4242,
        tid: 1,
        api: id_of("hipModuleGetFunction").unwrap(),
        len: 2,
        _pad: 0,
        name: [0; NAME_BYTES],
    };
    n.name[0] = b'k';
    k.named(&n);
    n.pid = 4343;
    k.named(&n);
    let alive = |p: u32| p == 4343;
    k.forget_exited(alive);
    assert_eq!(k.names.len(), 2, "kept one more tick");
    k.forget_exited(alive);
    let left: Vec<u32> = k.names.keys().map(|key| key.0).collect();
    assert_eq!(left, [4343]);
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn kreplay_test_host_stub() -> u64 {
    std::hint::black_box(7)
}

#[test]
fn a_host_stub_resolves_through_this_process_symbols() {
    let mut k = KernelNames::default();
    let addr = kreplay_test_host_stub as *const () as u64;
    assert_eq!(kreplay_test_host_stub(), 7);
    let r = k.launch(&call("hipLaunchKernel", [addr, 1, 1, 1, 1, 1], 0));
    assert_eq!(r.name.as_deref(), Some("kreplay_test_host_stub"));
    let rec = r.new_record.expect("a record for the name found");
    assert_eq!((rec.handle, rec.ts_ns), (addr, 9));
    // The second launch finds it in the table, with no new record.
    let again = k.launch(&call("hipLaunchKernel", [addr, 1, 1, 1, 1, 1], 0));
    assert_eq!(
        (again.name.as_deref(), again.new_record),
        (Some("kreplay_test_host_stub"), None)
    );
}
