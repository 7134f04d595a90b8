//! The CLI's reading of a mapped file's symbols (any file a traced process maps).
#![no_main]

use kreplay_cli::probes::elf::SymbolTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = SymbolTable::parse(data) {
        let _ = (t.len(), t.offset("cuLaunchKernel"), t.name_at(0x1000));
    }
});
