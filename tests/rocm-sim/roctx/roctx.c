/* roctx.c - the simulated libroctx64: ROCm's annotation API (roctx.h) with its real names and
 * signatures. It keeps each thread's nesting level, hands out range ids, and reads each
 * message (its length, as a library that records it does), so the message's page is mapped
 * when kreplay's probe copies it at the call's return: the probe cannot fault a page in. */
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>

#define ROCTX_API __attribute__((visibility("default")))

typedef uint64_t roctx_range_id_t;

static __thread int depth;
static _Atomic uint64_t next_id = 1;
/* Message bytes seen (read, so the compiler keeps the reads). */
static _Atomic uint64_t message_bytes;

static void see(const char* message) {
  if (message) atomic_fetch_add(&message_bytes, strlen(message));
}

/* An instant. */
ROCTX_API void roctxMarkA(const char* message) { see(message); }

/* Opens a range on the calling thread; returns its 0-based nesting level. */
ROCTX_API int roctxRangePushA(const char* message) {
  see(message);
  return depth++;
}

/* Closes the calling thread's innermost range; returns its level, or -1 with none open. */
ROCTX_API int roctxRangePop(void) {
  if (depth == 0) return -1;
  return --depth;
}

/* Starts a range that any thread may stop; returns its id. */
ROCTX_API roctx_range_id_t roctxRangeStartA(const char* message) {
  see(message);
  return atomic_fetch_add(&next_id, 1);
}

/* Stops the range `id`. */
ROCTX_API void roctxRangeStop(roctx_range_id_t id) {
  (void)id;
  __asm__ volatile("" ::: "memory");
}

/* roctx.h's version queries. */
ROCTX_API uint32_t roctx_version_major(void) { return 4; }
ROCTX_API uint32_t roctx_version_minor(void) { return 1; }
