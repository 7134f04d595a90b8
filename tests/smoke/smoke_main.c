/* Calls krsmoke_add(i, 2*i) for i in [0, N) and prints the sum, so a probe test can check
 * every argument and return value exactly. With a second argument "wait" it first prints
 * "ready" and waits for a line on stdin (for attach-by-pid tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long krsmoke_add(long a, long b);

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 10;
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 2;
    }
    long sum = 0;
    for (long i = 0; i < n; i++) sum += krsmoke_add(i, 2 * i);
    printf("sum %ld\n", sum);
    return 0;
}
