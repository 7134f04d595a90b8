//! Rebuild the BPF object when the bpf-linker binary changes (it is an undeclared dependency).
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => println!("cargo:warning=bpf-linker not found on PATH; run `cargo xtask setup`"),
    }
}
