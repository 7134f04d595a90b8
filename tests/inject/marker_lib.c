/* The library injected by the tests: its constructor appends one line naming the process to
 * the file MARKER (a compile-time path), after sleeping SLEEP_MS milliseconds when that is
 * defined, and it exports krinject_triple_plus_one. */
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void krinject_loaded(void) {
#ifdef SLEEP_MS
    usleep(SLEEP_MS * 1000);
#endif
    FILE *f = fopen(MARKER, "a");
    if (f) {
        fprintf(f, "loaded in %d\n", (int)getpid());
        fclose(f);
    }
}

int krinject_triple_plus_one(int x) { return 3 * x + 1; }
