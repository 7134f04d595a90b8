/* signals.c - HSA signals (value, waits with timeout) and the async-handler thread. */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

/* Waiting on one signal: a futex on its 32-bit change counter `seq` (bumped after every
 * value change, woken only when someone waits on that signal). Waiting for "any signal"
 * (copy engine, handler thread, barrier packets): one process-wide mutex/condvar, touched by
 * modifiers only while such a waiter exists. Both use the same ordering argument: the
 * modifier updates the value then checks the waiter count (seq_cst); a waiter registers, then
 * re-reads the value before sleeping. */
static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sig_cv;
static _Atomic int g_sig_waiters;
static _Atomic int g_idle_waiters; /* sim_signal_wait_idle: woken by kicks and watched signals */
static pthread_once_t g_sig_once = PTHREAD_ONCE_INIT;

static void sig_init_cv(void) {
  pthread_condattr_t at;
  pthread_condattr_init(&at);
  pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
  pthread_cond_init(&g_sig_cv, &at);
  pthread_condattr_destroy(&at);
}

static void broadcast(void) {
  pthread_once(&g_sig_once, sig_init_cv);
  pthread_mutex_lock(&g_sig_mu);
  pthread_cond_broadcast(&g_sig_cv);
  pthread_mutex_unlock(&g_sig_mu);
}

void sim_signal_notify(void) {
  if (atomic_load(&g_sig_waiters) != 0) broadcast();
}

void sim_signal_kick(void) {
  if (atomic_load(&g_sig_waiters) != 0 || atomic_load(&g_idle_waiters) != 0) broadcast();
}

void sim_signal_changed(sim_signal* s) {
  atomic_fetch_add(&s->seq, 1);
  if (atomic_load(&s->waiters) != 0)
    syscall(SYS_futex, (uint32_t*)&s->seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
  if (atomic_load(&g_sig_waiters) != 0 ||
      (atomic_load(&s->watched) != 0 && atomic_load(&g_idle_waiters) != 0))
    broadcast();
}

void sim_signal_sub(sim_signal* s, int64_t v) {
  atomic_fetch_sub(&s->value, v);
  sim_signal_changed(s);
}

void sim_signal_wait_seq(sim_signal* s, uint32_t seq0, uint64_t timeout_ns) {
  struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
  atomic_fetch_add(&s->waiters, 1);
  if (atomic_load(&s->seq) == seq0)
    syscall(SYS_futex, (uint32_t*)&s->seq, FUTEX_WAIT_PRIVATE, seq0, &ts, NULL, 0);
  atomic_fetch_sub(&s->waiters, 1);
}

sim_signal* sim_signal_from(hsa_signal_t s) {
  sim_signal* p = (sim_signal*)(uintptr_t)s.handle;
  if (!p || p->magic != SIM_SIGNAL_MAGIC) return NULL;
  return p;
}

bool sim_signal_satisfied(int64_t v, hsa_signal_condition_t c, int64_t cmp) {
  switch (c) {
    case HSA_SIGNAL_CONDITION_EQ: return v == cmp;
    case HSA_SIGNAL_CONDITION_NE: return v != cmp;
    case HSA_SIGNAL_CONDITION_LT: return v < cmp;
    case HSA_SIGNAL_CONDITION_GTE: return v >= cmp;
  }
  return false;
}

static struct timespec deadline_after(uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t total = (uint64_t)ts.tv_nsec + ns % 1000000000ull;
  ts.tv_sec += (time_t)(ns / 1000000000ull + total / 1000000000ull);
  ts.tv_nsec = (long)(total % 1000000000ull);
  return ts;
}

/* Sleeps on the global condvar, at most timeout_ns, counted in `waiters` meanwhile. */
static void wait_global(_Atomic int* waiters, uint64_t timeout_ns) {
  pthread_once(&g_sig_once, sig_init_cv);
  struct timespec dl = deadline_after(timeout_ns);
  pthread_mutex_lock(&g_sig_mu);
  atomic_fetch_add(waiters, 1);
  pthread_cond_timedwait(&g_sig_cv, &g_sig_mu, &dl);
  atomic_fetch_sub(waiters, 1);
  pthread_mutex_unlock(&g_sig_mu);
}

/* Waits for any signal change, at most timeout_ns. */
void sim_signal_wait_any_change(uint64_t timeout_ns) { wait_global(&g_sig_waiters, timeout_ns); }

void sim_signal_wait_idle(uint64_t timeout_ns) { wait_global(&g_idle_waiters, timeout_ns); }

int64_t sim_signal_wait(sim_signal* s, hsa_signal_condition_t c, int64_t cmp, uint64_t timeout_ns,
                        bool* satisfied) {
  uint64_t start = 0;
  for (;;) {
    uint32_t seq0 = atomic_load(&s->seq);
    int64_t v = atomic_load(&s->value);
    if (sim_signal_satisfied(v, c, cmp)) {
      if (satisfied) *satisfied = true;
      return v;
    }
    if (s->magic != SIM_SIGNAL_MAGIC) { /* destroyed while we waited */
      if (satisfied) *satisfied = false;
      return v;
    }
    uint64_t now = sim_now_ns();
    if (start == 0) start = now;
    if (timeout_ns != UINT64_MAX && now - start >= timeout_ns) {
      if (satisfied) *satisfied = false;
      return v;
    }
    /* Bounded sleeps also catch values written without the API (raw value pointers). */
    uint64_t left = timeout_ns == UINT64_MAX ? 50000000ull : timeout_ns - (now - start);
    sim_signal_wait_seq(s, seq0, left < 50000000ull ? left : 50000000ull);
  }
}

/* ------------------------------------------------------------------- create/destroy */

/* Signal objects are recycled, never freed: a late write through a destroyed handle (a
 * completion arriving after the application destroyed its signal) lands in a dead or reused
 * signal object, as on hardware, instead of in freed heap memory. */
static pthread_mutex_t g_free_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_signal** g_free_signals;
static size_t g_nfree, g_free_cap;

static hsa_status_t signal_create(hsa_signal_value_t v, hsa_signal_t* out) {
  SIM_CHECK_INIT();
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_signal* s = NULL;
  pthread_mutex_lock(&g_free_mu);
  if (g_nfree) s = g_free_signals[--g_nfree];
  pthread_mutex_unlock(&g_free_mu);
  if (!s) {
    s = aligned_alloc(64, 64);
    if (!s) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    memset(s, 0, 64);
  }
  s->kind = 1; /* AMD_SIGNAL_KIND_USER */
  atomic_store(&s->start_ns, 0);
  atomic_store(&s->end_ns, 0);
  atomic_store(&s->value, v);
  s->magic = SIM_SIGNAL_MAGIC;
  out->handle = (uint64_t)(uintptr_t)s;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_signal_create(hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c,
                                   hsa_signal_t* out) {
  if (n > 0 && !c) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return signal_create(v, out);
}

hsa_status_t sim_hsa_amd_signal_create(hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c,
                                       uint64_t attr, hsa_signal_t* out) {
  (void)attr;
  if (n > 0 && !c) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return signal_create(v, out);
}

hsa_status_t sim_hsa_signal_destroy(hsa_signal_t sig) {
  SIM_CHECK_INIT();
  sim_signal* s = sim_signal_from(sig);
  if (!s) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  s->magic = 0;
  sim_signal_changed(s); /* wake anyone still waiting: they return the last value */
  pthread_mutex_lock(&g_free_mu);
  if (g_nfree == g_free_cap) {
    size_t cap = g_free_cap ? g_free_cap * 2 : 1024;
    sim_signal** n = realloc(g_free_signals, cap * sizeof *n);
    if (n) g_free_signals = n, g_free_cap = cap;
  }
  /* If even that failed the object is leaked: never freed, still safe to write. */
  if (g_nfree < g_free_cap) g_free_signals[g_nfree++] = s;
  pthread_mutex_unlock(&g_free_mu);
  return HSA_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ operations */

#define SIG_OR_RET(sig, ret) \
  sim_signal* s = sim_signal_from(sig); \
  if (!s) return ret

hsa_signal_value_t sim_hsa_signal_load_relaxed(hsa_signal_t sig) {
  SIG_OR_RET(sig, 0);
  return atomic_load_explicit(&s->value, memory_order_relaxed);
}
hsa_signal_value_t sim_hsa_signal_load_scacquire(hsa_signal_t sig) {
  SIG_OR_RET(sig, 0);
  return atomic_load(&s->value);
}

static void sig_store(hsa_signal_t sig, hsa_signal_value_t v, bool notify) {
  SIG_OR_RET(sig, );
  atomic_store(&s->value, v);
  if (notify) sim_signal_changed(s);
}
void sim_hsa_signal_store_relaxed(hsa_signal_t s, hsa_signal_value_t v) { sig_store(s, v, true); }
void sim_hsa_signal_store_screlease(hsa_signal_t s, hsa_signal_value_t v) { sig_store(s, v, true); }
void sim_hsa_signal_silent_store_relaxed(hsa_signal_t s, hsa_signal_value_t v) { sig_store(s, v, false); }
void sim_hsa_signal_silent_store_screlease(hsa_signal_t s, hsa_signal_value_t v) { sig_store(s, v, false); }

#define SIG_RMW_V(op, expr)                                                   \
  static void sig_##op(hsa_signal_t sig, hsa_signal_value_t v) {              \
    SIG_OR_RET(sig, );                                                        \
    expr;                                                                     \
    sim_signal_changed(s);                                                    \
  }                                                                           \
  void sim_hsa_signal_##op##_relaxed(hsa_signal_t s, hsa_signal_value_t v) { sig_##op(s, v); }     \
  void sim_hsa_signal_##op##_scacquire(hsa_signal_t s, hsa_signal_value_t v) { sig_##op(s, v); }   \
  void sim_hsa_signal_##op##_screlease(hsa_signal_t s, hsa_signal_value_t v) { sig_##op(s, v); }   \
  void sim_hsa_signal_##op##_scacq_screl(hsa_signal_t s, hsa_signal_value_t v) { sig_##op(s, v); }

SIG_RMW_V(and, atomic_fetch_and(&s->value, v))
SIG_RMW_V(or, atomic_fetch_or(&s->value, v))
SIG_RMW_V(xor, atomic_fetch_xor(&s->value, v))
SIG_RMW_V(add, atomic_fetch_add(&s->value, v))
SIG_RMW_V(subtract, atomic_fetch_sub(&s->value, v))

static hsa_signal_value_t sig_exchange(hsa_signal_t sig, hsa_signal_value_t v) {
  SIG_OR_RET(sig, 0);
  hsa_signal_value_t old = atomic_exchange(&s->value, v);
  sim_signal_changed(s);
  return old;
}
static hsa_signal_value_t sig_cas(hsa_signal_t sig, hsa_signal_value_t e, hsa_signal_value_t v) {
  SIG_OR_RET(sig, 0);
  int64_t exp = e;
  atomic_compare_exchange_strong(&s->value, &exp, v);
  sim_signal_changed(s);
  return exp;
}
#define SIG_ORDERS(op, params, args)                                              \
  hsa_signal_value_t sim_hsa_signal_##op##_relaxed params { return sig_##op args; }   \
  hsa_signal_value_t sim_hsa_signal_##op##_scacquire params { return sig_##op args; } \
  hsa_signal_value_t sim_hsa_signal_##op##_screlease params { return sig_##op args; } \
  hsa_signal_value_t sim_hsa_signal_##op##_scacq_screl params { return sig_##op args; }
SIG_ORDERS(exchange, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
SIG_ORDERS(cas, (hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v), (s, e, v))

/* timeout_hint is in HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY units: nanoseconds here. */
static hsa_signal_value_t sig_wait(hsa_signal_t sig, hsa_signal_condition_t c,
                                   hsa_signal_value_t cmp, uint64_t timeout) {
  SIG_OR_RET(sig, 0);
  return sim_signal_wait(s, c, cmp, timeout, NULL);
}
hsa_signal_value_t sim_hsa_signal_wait_relaxed(hsa_signal_t s, hsa_signal_condition_t c,
                                               hsa_signal_value_t v, uint64_t t, hsa_wait_state_t w) {
  (void)w;
  return sig_wait(s, c, v, t);
}
hsa_signal_value_t sim_hsa_signal_wait_scacquire(hsa_signal_t s, hsa_signal_condition_t c,
                                                 hsa_signal_value_t v, uint64_t t, hsa_wait_state_t w) {
  (void)w;
  return sig_wait(s, c, v, t);
}

hsa_status_t sim_hsa_amd_signal_wait_any(uint32_t n, hsa_signal_t* sigs, hsa_signal_condition_t* conds,
                                         hsa_signal_value_t* values, uint64_t timeout,
                                         hsa_wait_state_t w, hsa_signal_value_t* out) {
  (void)w;
  if (!sim_is_initialized() || !n || !sigs || !conds || !values) return (hsa_status_t)UINT32_MAX;
  uint64_t start = sim_now_ns();
  for (;;) {
    for (uint32_t i = 0; i < n; i++) {
      sim_signal* s = sim_signal_from(sigs[i]);
      if (!s) continue;
      int64_t v = atomic_load(&s->value);
      if (sim_signal_satisfied(v, conds[i], values[i])) {
        if (out) *out = v;
        return (hsa_status_t)i; /* returns the index of the satisfying signal */
      }
    }
    uint64_t el = sim_now_ns() - start;
    if (timeout != UINT64_MAX && el >= timeout) return (hsa_status_t)UINT32_MAX;
    uint64_t left = timeout == UINT64_MAX ? 10000000ull : timeout - el;
    sim_signal_wait_any_change(left < 10000000ull ? left : 10000000ull);
  }
}

/* ------------------------------------------------------------------- async handlers */

typedef struct sim_handler {
  hsa_signal_t sig; /* handle 0: an async function */
  hsa_signal_condition_t cond;
  hsa_signal_value_t value;
  hsa_amd_signal_handler handler;
  void (*func)(void*);
  void* arg;
  int64_t value_seen; /* the value that satisfied it, passed to the handler */
  struct sim_handler* next;
} sim_handler;

static pthread_mutex_t g_h_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_handler *g_handlers, *g_h_tail; /* in registration order */
static pthread_t g_h_thread;
static _Atomic bool g_h_running, g_h_stop;

static void unwatch(const sim_handler* h) {
  /* The object is never freed (signals are recycled), so a late decrement is harmless. */
  sim_signal* s = h->func ? NULL : (sim_signal*)(uintptr_t)h->sig.handle;
  if (s) atomic_fetch_sub(&s->watched, 1);
}

static void append_locked(sim_handler* h) {
  h->next = NULL;
  if (g_h_tail) g_h_tail->next = h;
  else g_handlers = h;
  g_h_tail = h;
}

/* One pass: unlinks every handler whose signal satisfies its condition (and every async
 * function), runs them in registration order, and puts back those that ask to stay. Returns
 * how many ran. */
static int run_ready(void) {
  sim_handler *ready = NULL, **rtail = &ready;
  pthread_mutex_lock(&g_h_mu);
  sim_handler** pp = &g_handlers;
  sim_handler* last = NULL;
  while (*pp) {
    sim_handler* h = *pp;
    sim_signal* s = h->func ? NULL : sim_signal_from(h->sig);
    int64_t v = s ? atomic_load(&s->value) : 0;
    if (h->func || (s && sim_signal_satisfied(v, h->cond, h->value))) {
      *pp = h->next;
      h->next = NULL;
      h->value_seen = v;
      *rtail = h;
      rtail = &h->next;
      continue;
    }
    last = h;
    pp = &h->next;
  }
  g_h_tail = last;
  pthread_mutex_unlock(&g_h_mu);
  int n = 0;
  while (ready) {
    sim_handler* h = ready;
    ready = h->next;
    n++;
    bool keep = false;
    if (h->func) h->func(h->arg);
    else keep = h->handler(h->value_seen, h->arg);
    if (keep && sim_signal_from(h->sig)) {
      pthread_mutex_lock(&g_h_mu);
      append_locked(h);
      pthread_mutex_unlock(&g_h_mu);
    } else {
      unwatch(h);
      free(h);
    }
  }
  return n;
}

static void* handler_main(void* unused) {
  (void)unused;
  sim_mark_runtime_thread();
  while (!atomic_load(&g_h_stop))
    if (run_ready() == 0) sim_signal_wait_idle(5000000ull);
  return NULL;
}

void sim_handlers_start(void) {
  atomic_store(&g_h_stop, false);
  if (pthread_create(&g_h_thread, NULL, handler_main, NULL) == 0) atomic_store(&g_h_running, true);
}

void sim_handlers_stop(void) {
  if (!atomic_load(&g_h_running)) return;
  atomic_store(&g_h_stop, true);
  sim_signal_kick();
  pthread_join(g_h_thread, NULL);
  atomic_store(&g_h_running, false);
  pthread_mutex_lock(&g_h_mu);
  while (g_handlers) {
    sim_handler* h = g_handlers;
    g_handlers = h->next;
    unwatch(h);
    free(h);
  }
  g_h_tail = NULL;
  pthread_mutex_unlock(&g_h_mu);
}

static hsa_status_t add_handler(sim_handler* h) {
  if (!h->func) atomic_fetch_add(&((sim_signal*)(uintptr_t)h->sig.handle)->watched, 1);
  pthread_mutex_lock(&g_h_mu);
  append_locked(h);
  pthread_mutex_unlock(&g_h_mu);
  sim_signal_kick();
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sim_hsa_amd_signal_async_handler(hsa_signal_t sig, hsa_signal_condition_t c,
                                              hsa_signal_value_t v, hsa_amd_signal_handler handler,
                                              void* arg) {
  SIM_CHECK_INIT();
  if (!sim_signal_from(sig)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (!handler) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_handler* h = calloc(1, sizeof *h);
  if (!h) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  h->sig = sig, h->cond = c, h->value = v, h->handler = handler, h->arg = arg;
  pthread_once(&g_sig_once, sig_init_cv);
  return add_handler(h);
}

hsa_status_t sim_hsa_amd_async_function(void (*cb)(void*), void* arg) {
  SIM_CHECK_INIT();
  if (!cb) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_handler* h = calloc(1, sizeof *h);
  if (!h) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  h->func = cb, h->arg = arg;
  pthread_once(&g_sig_once, sig_init_cv);
  return add_handler(h);
}
