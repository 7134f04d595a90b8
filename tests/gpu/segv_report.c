// A crash reporter to LD_PRELOAD into a process under test on the GPU machine (no debugger
// there): on SIGSEGV, SIGBUS, SIGILL or SIGABRT it writes the thread, the faulting address and
// the native backtrace (each frame as module+offset, with the nearest exported symbol) to
// stderr, then lets the signal kill the process as before (SIGALRM kills it if the report
// itself blocks). Built here and carried:
//   cc -O1 -g -shared -fPIC -o .gpu-carry/segv_report.so tests/gpu/segv_report.c
// Used by tests/gpu/attach.sh when SEGV_REPORT=path is set.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static void say(const char *s) { (void)!write(2, s, strlen(s)); }

static void frame(void *pc) {
  Dl_info d;
  char line[512];
  if (dladdr(pc, &d) && d.dli_fname) {
    snprintf(line, sizeof line, "  %p %s+0x%lx (%s+0x%lx)\n", pc, d.dli_fname,
             (unsigned long)((char *)pc - (char *)d.dli_fbase), d.dli_sname ? d.dli_sname : "?",
             d.dli_saddr ? (unsigned long)((char *)pc - (char *)d.dli_saddr) : 0ul);
  } else {
    snprintf(line, sizeof line, "  %p ?\n", pc);
  }
  say(line);
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
  char line[256];
  // Whatever happens below (a lock the faulting thread held), the process dies within 3 s.
  alarm(3);
  ucontext_t *u = uc;
  snprintf(line, sizeof line, "segv_report: signal %d in thread %ld, fault address %p, pc:\n", sig,
           (long)syscall(SYS_gettid), si->si_addr);
  say(line);
  frame((void *)u->uc_mcontext.gregs[REG_RIP]);
  say("segv_report: backtrace:\n");
  void *pcs[64];
  int n = backtrace(pcs, 64);
  for (int i = 0; i < n; i++) frame(pcs[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  // The first backtrace() loads the unwinder (a dlopen): done here, never in the handler.
  void *warm[2];
  backtrace(warm, 2);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGABRT };
  for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, 0);
}
