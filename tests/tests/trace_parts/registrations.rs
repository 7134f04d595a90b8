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
