/* hsa_tools: HSA_TOOLS_LIB loading. A refusing tool is unloaded and reported to the next one;
 * the accepted tool's table wrappers see the application's calls (exported functions dispatch
 * through the table); its intercept queue forwards packets that then execute; OnUnload runs at
 * the last hsa_shut_down and the tool is unloaded. */
#include <dlfcn.h>
#include <libgen.h>
#include <unistd.h>

#include "hsa_test_util.h"

void __krsim_kernel_inc(const krsim_dispatch* d, void* kernarg) {
  (void)d;
  __atomic_fetch_add((int*)kernarg, 1, __ATOMIC_SEQ_CST);
}

int main(int argc, char** argv) {
  (void)argc;
  char dir[4096], tool[4200], refuse[4200], out[4200];
  snprintf(dir, sizeof dir, "%s", argv[0]);
  char* d = dirname(dir);
  snprintf(tool, sizeof tool, "%s/hsa_test_tool.so", d);
  snprintf(refuse, sizeof refuse, "%s/hsa_test_tool_refuse.so", d);
  snprintf(out, sizeof out, "/tmp/krsim-tool-%d.txt", (int)getpid());
  char libs[8500];
  snprintf(libs, sizeof libs, "%s %s", refuse, tool);
  setenv("HSA_TOOLS_LIB", libs, 1);
  setenv("KRSIM_TEST_TOOL_OUT", out, 1);
  CHECK_OK(hsa_init());
  void* h = dlopen(tool, RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL);
  CHECK(dlopen(refuse, RTLD_NOW | RTLD_NOLOAD) == NULL); /* refused: unloaded */
  int (*allocs)(void) = (int (*)(void))dlsym(h, "test_tool_allocs");
  int (*packets)(void) = (int (*)(void))dlsym(h, "test_tool_packets");
  CHECK(allocs && packets);
  dlclose(h); /* drop our reference */

  agents_t ag = get_agents();
  hsa_amd_memory_pool_t dev = find_pool(ag.gpu[0], COARSE);
  void* p[3];
  for (int i = 0; i < 3; i++) CHECK_OK(hsa_amd_memory_pool_allocate(dev, 4096, 0, &p[i]));
  CHECK_EQ(allocs(), 3);

  static struct { krsim_code_object h; krsim_co_entry e[1]; } co = {
      .h = {.magic = KRSIM_CO_MAGIC, .version = 1, .count = 1},
      .e = {{.kind = 1, .size = 8, .name = "inc"}}};
  hsa_executable_t e = load_co(&co.h, sizeof co, ag.gpu[0]);
  hsa_queue_t* q;
  CHECK_OK(hsa_queue_create(ag.gpu[0], 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0, &q));
  int counter = 0;
  hsa_signal_t done;
  CHECK_OK(hsa_signal_create(3, 0, NULL, &done));
  for (int i = 0; i < 3; i++) dispatch_kernel(q, kernel_object(e, "inc", ag.gpu[0]), &counter, 64, 64, 1, done);
  CHECK_EQ(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, 5000000000ull, HSA_WAIT_STATE_BLOCKED), 0);
  CHECK_EQ(counter, 3);
  CHECK_EQ(packets(), 3);
  CHECK_EQ(hsa_queue_load_read_index_scacquire(q), 3); /* the application's ring was drained */

  CHECK_OK(hsa_queue_destroy(q));
  CHECK_OK(hsa_executable_destroy(e));
  for (int i = 0; i < 3; i++) CHECK_OK(hsa_amd_memory_pool_free(p[i]));
  CHECK_OK(hsa_signal_destroy(done));
  CHECK_OK(hsa_init()); /* nested: OnUnload waits for the last shut_down */
  CHECK_OK(hsa_shut_down());
  CHECK(access(out, F_OK) != 0);
  CHECK_OK(hsa_shut_down());
  CHECK(dlopen(tool, RTLD_NOW | RTLD_NOLOAD) == NULL); /* unloaded */
  FILE* f = fopen(out, "r");
  CHECK(f != NULL);
  char line[512] = {0};
  CHECK(fgets(line, sizeof line, f) != NULL);
  fclose(f);
  unlink(out);
  CHECK(strcmp(line, "rtv=3 allocs=3 packets=3 next_index=3 gaps=0 versions_ok=1 failed=1 failed_name=hsa_test_tool_refuse.so\n") == 0);
  /* After unload the table is the runtime's own again: calls still work. */
  CHECK_OK(hsa_init());
  void* x;
  CHECK_OK(hsa_amd_memory_pool_allocate(find_pool(get_agents().gpu[0], COARSE), 64, 0, &x));
  CHECK_OK(hsa_amd_memory_pool_free(x));
  unsetenv("HSA_TOOLS_LIB");
  CHECK_OK(hsa_shut_down());
  printf("hsa_tools: PASS\n");
  return 0;
}
