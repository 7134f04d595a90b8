//! Kernel names from registration code in real compiled programs: tests/cuda-sim's
//! `cudart_app` linked with `-s`, calling `__cudaRegisterFunction` through its PLT stub and,
//! built with `-fno-plt`, through its GOT slot. No symbol names a host stub; the scan of the
//! registration code names every one, at the offset the unstripped build's symbols give.
use std::{collections::HashMap, fs};

use kreplay_cli::{probes::elf::SymbolTable, trace::registrations::registered_kernels};
use kreplay_tests::cudart_sim;

/// The mangled names of `cudart_app`'s two kernels.
const KERNELS: [&str; 2] = ["_Z12axpy_inplacePfPKffi", "_Z10count_hitsPfi"];

#[test]
fn every_host_stub_of_a_stripped_program_is_named_by_its_registration_code() {
    let sim = cudart_sim("trace-cuda-sim");
    for (stripped, reference) in [
        (&sim.stripped_app, &sim.app),
        (&sim.stripped_noplt_app, &sim.noplt_app),
    ] {
        let symbols = SymbolTable::read(reference).unwrap();
        let want: HashMap<u64, String> = KERNELS
            .map(|n| (symbols.offset(n).expect(n), n.to_string()))
            .into();
        let bare = SymbolTable::read(stripped).unwrap();
        for off in want.keys() {
            assert_eq!(bare.name_at(*off), None, "{}", stripped.display());
        }
        let data = fs::read(stripped).unwrap();
        assert_eq!(
            registered_kernels(&data).unwrap(),
            want,
            "{}",
            stripped.display()
        );
        // The unstripped build's code says the same.
        assert_eq!(
            registered_kernels(&fs::read(reference).unwrap()).unwrap(),
            want
        );
    }
}

#[test]
fn files_that_register_kernels_are_told_apart_from_their_headers() {
    use kreplay_cli::trace::kernels::registers_kernels;
    let sim = cudart_sim("trace-cuda-sim");
    // Importing __cudaRegisterFunction, stripped or not, through the PLT or the GOT; and the
    // runtime that defines it.
    for f in [
        &sim.app,
        &sim.stripped_app,
        &sim.stripped_noplt_app,
        &sim.static_app,
        &sim.dir.join("libcudart.so.12"),
    ] {
        assert!(registers_kernels(f), "{}", f.display());
    }
    // The driver, a program with no kernels, a file that is not ELF, a file that is not there.
    let not_elf = sim.dir.join("not-elf.txt");
    fs::write(&not_elf, "x".repeat(100)).unwrap();
    for f in [
        sim.dir.join("libcuda.so.1"),
        std::path::PathBuf::from("/bin/true"),
        not_elf,
        sim.dir.join("missing.so"),
    ] {
        assert!(!registers_kernels(&f), "{}", f.display());
    }
}
