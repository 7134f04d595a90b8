/* Injection target: worker threads compute checksums while the main thread blocks in
 * read(0); with a second argument `spin` the main thread first computes a checksum of its own
 * (a thread busy in user code when it is stopped); with `idle` it does the same while one more
 * thread sleeps in pthread_cond_wait (futex) until the line is read. The output depends only on the iteration
 * count and the line read, so an injected run must print exactly what a bare run prints. A
 * read that fails (EINTR from a botched syscall restart) exits 3. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 3

static uint64_t sums[WORKERS];
static uint64_t iters;

static uint64_t checksum(uint64_t seed) {
    uint64_t x = seed + 1, s = 0;
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        s += x >> 17;
    }
    return s;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *idle(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!done)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *work(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    sums[id] = checksum(id);
    return NULL;
}

int main(int argc, char **argv) {
    iters = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000ULL;
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i);
    int with_idle = argc > 2 && strcmp(argv[2], "idle") == 0;
    pthread_t sleeper;
    if (with_idle)
        pthread_create(&sleeper, NULL, idle, NULL);
    printf("ready\n");
    fflush(stdout);
    if (argc > 2 && (strcmp(argv[2], "spin") == 0 || with_idle))
        printf("main checksum %llu\n", (unsigned long long)checksum(WORKERS));
    char buf[256];
    ssize_t n = read(0, buf, sizeof buf - 1);
    if (n < 0) {
        printf("read failed: %s\n", strerror(errno));
        return 3;
    }
    buf[n] = 0;
    printf("read %zd bytes: %s", n, buf);
    if (with_idle) {
        pthread_mutex_lock(&mu);
        done = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        pthread_join(sleeper, NULL);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        printf("worker %d checksum %llu\n", i, (unsigned long long)sums[i]);
    }
    return 0;
}
