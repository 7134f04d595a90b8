/* The smallest probe target: a shared library with one exported function.
 * Built with frame pointers so the function starts with `push %rbp`, an instruction the
 * kernel emulates instead of single-stepping it, several times cheaper per hit
 * (docs/platform.md, "Uprobes"). */
__attribute__((noinline, visibility("default"))) long krsmoke_add(long a, long b) {
    return a + b;
}
