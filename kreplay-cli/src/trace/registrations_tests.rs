//! Tests of the registration scan on hand-assembled x86-64 code.
use super::*;

const BASE: u64 = 0x1000;
/// `__cudaRegisterFunction@plt`.
const PLT: u64 = 0x5000;
/// Its GOT slot.
const SLOT: u64 = 0x9000;
const STUB_A: u64 = 0x1800;
const STUB_B: u64 = 0x1840;
const NAME_A: u64 = 0x7000;
const NAME_B: u64 = 0x7020;

/// Code assembled at [`BASE`].
#[derive(Default)]
struct Asm(Vec<u8>);

impl Asm {
    fn here(&self) -> u64 {
        BASE + self.0.len() as u64
    }
    fn rel(&self, len: u64, target: u64) -> [u8; 4] {
        (target.wrapping_sub(self.here() + len) as i64 as i32).to_le_bytes()
    }
    fn lea(mut self, modrm: u8, target: u64) -> Self {
        let d = self.rel(7, target);
        self.0.extend([0x48, 0x8d, modrm]);
        self.0.extend(d);
        self
    }
    fn lea_rsi(self, t: u64) -> Self {
        self.lea(0x35, t)
    }
    fn lea_rdx(self, t: u64) -> Self {
        self.lea(0x15, t)
    }
    fn lea_rcx(self, t: u64) -> Self {
        self.lea(0x0d, t)
    }
    fn call(mut self, target: u64) -> Self {
        let d = self.rel(5, target);
        self.0.push(0xe8);
        self.0.extend(d);
        self
    }
    fn call_slot(mut self, slot: u64) -> Self {
        let d = self.rel(6, slot);
        self.0.extend([0xff, 0x15]);
        self.0.extend(d);
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend(b);
        self
    }
}

fn targets(direct: &[u64], slots: &[u64]) -> CallTargets {
    CallTargets {
        direct: direct.to_vec(),
        slots: slots.to_vec(),
        code: vec![(BASE, BASE + 0x1000), (PLT, PLT + 0x10)],
    }
}

fn reg(stub: u64, name: u64) -> Registration {
    Registration { stub, name }
}

/// What gcc makes of nvcc's registration callback: the name into `rcx` then copied to `rdx`,
/// the four stack arguments pushed, `thread_limit` -1 and `tid` 0; then a second kernel with
/// the name loaded into `rdx`.
fn nvcc_like(call: impl Fn(Asm) -> Asm) -> Vec<u8> {
    let a = Asm::default()
        .raw(&[0x48, 0x89, 0xc3]) // mov rbx, rax (the handle)
        .lea_rcx(NAME_A)
        .lea_rsi(STUB_A)
        .raw(&[0x48, 0x89, 0xdf]) // mov rdi, rbx
        .raw(&[0x6a, 0x00, 0x6a, 0x00, 0x6a, 0x00, 0x6a, 0x00]) // push 0 ×4
        .raw(&[0x48, 0x89, 0xca]) // mov rdx, rcx
        .raw(&[0x45, 0x31, 0xc9]) // xor r9d, r9d
        .raw(&[0x41, 0xb8, 0xff, 0xff, 0xff, 0xff]); // mov r8d, -1
    let a = call(a).raw(&[0x48, 0x83, 0xc4, 0x20]); // add rsp, 32
    let a = a
        .lea_rdx(NAME_B)
        .lea_rsi(STUB_B)
        .raw(&[0x48, 0x89, 0xd1]) // mov rcx, rdx
        .raw(&[0x48, 0x89, 0xdf]);
    call(a).raw(&[0xc3]).0
}

#[test]
fn plt_calls_name_each_stub() {
    let code = nvcc_like(|a| a.call(PLT));
    assert_eq!(
        scan_code(&code, BASE, &targets(&[PLT], &[SLOT])),
        [reg(STUB_A, NAME_A), reg(STUB_B, NAME_B)]
    );
    // Calls elsewhere are not registrations.
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT + 0x10], &[])), []);
}

#[test]
fn no_plt_calls_through_the_got_slot_name_each_stub() {
    let code = nvcc_like(|a| a.call_slot(SLOT));
    assert_eq!(
        scan_code(&code, BASE, &targets(&[PLT], &[SLOT])),
        [reg(STUB_A, NAME_A), reg(STUB_B, NAME_B)]
    );
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[SLOT + 8])), []);
}

#[test]
fn direct_calls_to_a_linked_in_runtime_name_each_stub() {
    let definition = BASE + 0x900;
    let code = nvcc_like(|a| a.call(definition));
    assert_eq!(
        scan_code(&code, BASE, &targets(&[definition], &[])),
        [reg(STUB_A, NAME_A), reg(STUB_B, NAME_B)]
    );
}

#[test]
fn loads_before_another_call_do_not_count() {
    // memcpy@plt between the loads and the registration: its arguments, not the registration's.
    let code = Asm::default()
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .call(PLT + 0x8)
        .call(PLT)
        .0;
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[])), []);
    // The same through another function's GOT slot (`-fno-plt`).
    let code = Asm::default()
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .call_slot(SLOT + 8)
        .call_slot(SLOT)
        .0;
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[SLOT])), []);
    // A stub loaded after the other call, the name before it: no name.
    let code = Asm::default()
        .lea_rdx(NAME_A)
        .call(PLT + 0x8)
        .lea_rsi(STUB_A)
        .call(PLT)
        .0;
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[])), []);
}

#[test]
fn loads_beyond_the_window_do_not_count() {
    let far = Asm::default()
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .raw(&[0x90; 83])
        .call(PLT)
        .0;
    // 14 bytes of loads and 83 of nops: the rdx load starts 97 bytes before the call.
    assert_eq!(scan_code(&far, BASE, &targets(&[PLT], &[])), []);
    let near = Asm::default()
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .raw(&[0x90; 82])
        .call(PLT)
        .0;
    assert_eq!(
        scan_code(&near, BASE, &targets(&[PLT], &[])),
        [reg(STUB_A, NAME_A)]
    );
}

#[test]
fn loads_into_other_registers_do_not_count() {
    // lea rdi, [stub]: the stub is not in rsi.
    let code = Asm::default().lea_rdx(NAME_A).lea(0x3d, STUB_A).call(PLT).0;
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[])), []);
    // lea r8 ([rip] with REX.R): no name.
    let code = Asm::default()
        .raw(&[0x4c, 0x8d, 0x05, 0, 0, 0, 0])
        .lea_rsi(STUB_A)
        .call(PLT)
        .0;
    assert_eq!(scan_code(&code, BASE, &targets(&[PLT], &[])), []);
    // The last load into a register wins.
    let code = Asm::default()
        .lea_rsi(STUB_B)
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .call(PLT)
        .0;
    assert_eq!(
        scan_code(&code, BASE, &targets(&[PLT], &[])),
        [reg(STUB_A, NAME_A)]
    );
}

#[test]
fn truncated_code_never_panics_and_finds_only_whole_calls() {
    let code = nvcc_like(|a| a.call(PLT));
    let t = targets(&[PLT], &[SLOT]);
    // The first call ends at byte 45 (3 + 7 + 7 + 3 + 8 + 3 + 3 + 6 + 5), the second at 74.
    for len in 0..=code.len() {
        let found = scan_code(&code[..len], BASE, &t);
        let want = match len {
            0..45 => 0,
            45..74 => 1,
            _ => 2,
        };
        assert_eq!(found.len(), want, "prefix of {len} bytes");
    }
    // Code that ends inside a call or a load, at an address near the top.
    for tail in [
        &[0xe8, 1, 2][..],
        &[0xff, 0x15, 0],
        &[0x48, 0x8d, 0x35, 9],
        &[0xff],
    ] {
        assert_eq!(scan_code(tail, u64::MAX - 2, &t), []);
    }
}

#[test]
fn plt_entries_are_found_by_the_slot_they_jump_through() {
    // .plt: `jmp [rip+slot]; push idx; jmp .plt0`, 16 bytes per entry.
    let mut plt = vec![0u8; 48];
    for (k, slot) in [(1u64, SLOT - 8), (2, SLOT)] {
        let at = 16 * k as usize;
        let d = (slot.wrapping_sub(0x4000 + 16 * k + 6) as i64 as i32).to_le_bytes();
        plt[at..at + 2].copy_from_slice(&[0xff, 0x25]);
        plt[at + 2..at + 6].copy_from_slice(&d);
    }
    assert_eq!(plt_stubs(&plt, 0x4000, &[SLOT]), [0x4020]);
    // .plt.sec with IBT: `endbr64; bnd jmp [rip+slot]; nop`.
    let mut sec = vec![0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25];
    sec.extend((SLOT.wrapping_sub(0x6000 + 11) as i64 as i32).to_le_bytes());
    sec.extend([0x0f, 0x1f, 0x44, 0x00, 0x00]);
    assert_eq!(plt_stubs(&sec, 0x6000, &[SLOT]), [0x6000]);
    assert_eq!(plt_stubs(&sec[..10], 0x6000, &[SLOT]), []);
}

#[test]
fn names_are_symbol_like_nul_terminated_strings_of_at_most_4_kib() {
    let mut data = b"xx_Z3addPf\0bad name\0".to_vec();
    assert_eq!(symbol_name_at(&data, 2).as_deref(), Some("_Z3addPf"));
    assert_eq!(symbol_name_at(&data, 11), None, "a space");
    assert_eq!(symbol_name_at(&data, 10), None, "empty");
    assert_eq!(symbol_name_at(&data, 99), None, "past the end");
    data.extend(b"9lives\0");
    assert_eq!(symbol_name_at(&data, 20), None, "a leading digit");
    let long = |n: usize| {
        let mut d = vec![b'k'; n];
        d.push(0);
        d
    };
    assert_eq!(symbol_name_at(&long(4096), 0).map(|s| s.len()), Some(4096));
    assert_eq!(symbol_name_at(&long(4097), 0), None);
    assert_eq!(symbol_name_at(b"unterminated", 0), None);
}

#[test]
fn files_without_the_registration_function_have_no_registrations() {
    // The CUDA sim's driver library: no __cudaRegisterFunction.
    let seed = include_bytes!("../../../fuzz/corpus/cli_elf/cuda_sim_libcuda.so.1");
    assert_eq!(registered_kernels(seed).unwrap(), HashMap::new());
    assert!(registered_kernels(b"not an elf").is_err());
    // Cut anywhere: an error or nothing, never a panic.
    for len in (0..seed.len()).step_by(97) {
        if let Ok(found) = registered_kernels(&seed[..len]) {
            assert_eq!(found, HashMap::new(), "{len} bytes");
        }
    }
}

#[test]
fn a_stripped_program_names_its_stubs_and_survives_being_cut() {
    // tests/cuda-sim's cudart_app linked with -s, calling through the PLT and (-fno-plt)
    // through the GOT: the offsets are those of the two host stubs in the unstripped builds.
    let plt = include_bytes!("../../../fuzz/corpus/registrations/cudart_app_stripped");
    let got = include_bytes!("../../../fuzz/corpus/registrations/cudart_app_stripped_noplt");
    for (data, axpy, hits) in [(&plt[..], 0x23c9, 0x248b), (&got[..], 0x2129, 0x21fe)] {
        let want = HashMap::from([
            (axpy, "_Z12axpy_inplacePfPKffi".to_string()),
            (hits, "_Z10count_hitsPfi".to_string()),
        ]);
        assert_eq!(registered_kernels(data).unwrap(), want);
        // Cut anywhere: an error, or a subset of the names at their offsets.
        for len in (0..data.len()).step_by(61) {
            if let Ok(found) = registered_kernels(&data[..len]) {
                assert!(found.iter().all(|(k, v)| want.get(k) == Some(v)), "{len}");
            }
        }
    }
}

#[test]
fn a_call_byte_ending_the_instruction_before_a_load_does_not_hide_it() {
    // `mov eax, 0xe8000000` then the loads: its last byte and the lea's first four read as a
    // call into the code, which must not swallow the lea.
    let code = Asm::default()
        .raw(&[0xb8, 0x00, 0x00, 0x00, 0xe8])
        .lea_rdx(NAME_A)
        .lea_rsi(STUB_A)
        .call(PLT)
        .0;
    let t = CallTargets {
        code: vec![(0, u64::MAX)],
        ..targets(&[PLT], &[])
    };
    assert_eq!(scan_code(&code, BASE, &t), [reg(STUB_A, NAME_A)]);
}
