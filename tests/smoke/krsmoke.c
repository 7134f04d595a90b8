/* The smallest probe target: a shared library with one exported function.
 * Built with frame pointers so the function starts with `push %rbp`, an instruction the
 * kernel emulates (FACTS.md §1: about 1 µs per hit instead of 8 µs single-stepped). */
__attribute__((noinline, visibility("default"))) long krsmoke_add(long a, long b) {
    return a + b;
}
