//! Cubins (ELF64): the module-variable symbol table, and the image length found from the
//! headers alone (what kreplay reads when the driver gets a bare pointer).
#![no_main]

use kreplay_tool::cuda::elf::{globals, image_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = globals(data);
    let read = |off: usize, len: usize| data.get(off..off.checked_add(len)?).map(<[u8]>::to_vec);
    let _ = image_len(&read);
});
