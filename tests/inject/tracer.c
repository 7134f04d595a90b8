/* Holds a process under ptrace (PTRACE_SEIZE, no stop) until killed: a stand-in for a
 * debugger already attached, whose presence denies kreplay's own attach. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    if (ptrace(PTRACE_SEIZE, atoi(argv[1]), NULL, NULL) != 0) {
        perror("PTRACE_SEIZE");
        return 1;
    }
    printf("seized\n");
    fflush(stdout);
    for (;;)
        pause();
}
