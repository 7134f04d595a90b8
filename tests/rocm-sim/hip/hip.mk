# --- HIP ---
# Build rules of the simulated libamdhip64, its sample workloads and its C tests.
# Included by tests/rocm-sim/Makefile (`include hip/hip.mk`); also usable alone:
#   make -C tests/rocm-sim -f hip/hip.mk hip
# Needs $(KRSIM_BUILD)/libhsa-runtime64.so.1 (the HSA half's target).

KRSIM_ROOT ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
KRSIM_BUILD ?= $(if $(BUILD),$(abspath $(BUILD)),$(KRSIM_ROOT)/build)
HIP_CC ?= gcc
HIP_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread -I$(KRSIM_ROOT)/include
HIP_LIB_SRC := $(wildcard $(KRSIM_ROOT)/hip/*.c)
HIP_LIB_DEPS := $(HIP_LIB_SRC) $(wildcard $(KRSIM_ROOT)/hip/*.h) $(KRSIM_ROOT)/hip/libamdhip64.map \
	$(KRSIM_ROOT)/include/krsim.h $(KRSIM_ROOT)/include/krsim_hip.h
# The HSA library as the including Makefile names its target (make matches targets by name).
HIP_HSA_LIB := $(if $(HSA_LIB),$(HSA_LIB),$(KRSIM_BUILD)/libhsa-runtime64.so.1)
HIP_WORKLOADS := $(patsubst $(KRSIM_ROOT)/workloads/%.c,$(KRSIM_BUILD)/workloads/%,\
	$(wildcard $(KRSIM_ROOT)/workloads/*.c))
HIP_TESTS := $(patsubst $(KRSIM_ROOT)/tests/%.c,$(KRSIM_BUILD)/tests/%,\
	$(filter-out %/hip_compat_real.c %/hip_tool.c,$(wildcard $(KRSIM_ROOT)/tests/hip_*.c)))
# Built against Debian's REAL libamdhip64.so.5 (only where it is installed); run against ours.
HIP_REAL_LIB := $(wildcard /usr/lib/x86_64-linux-gnu/libamdhip64.so.5)
HIP_COMPAT := $(if $(HIP_REAL_LIB),$(patsubst $(KRSIM_ROOT)/tests/%.c,$(KRSIM_BUILD)/tests/%,\
	$(wildcard $(KRSIM_ROOT)/tests/hip_compat_real.c)))

.PHONY: hip
hip: $(KRSIM_BUILD)/libamdhip64.so.6 $(KRSIM_BUILD)/libamdhip64.so.5 $(KRSIM_BUILD)/libamdhip64.so \
	$(HIP_WORKLOADS) $(HIP_TESTS) $(HIP_COMPAT) $(KRSIM_BUILD)/tests/hip_tool.so

# One library, two sonames: ROCm 6's and ROCm 5's (with 5.2's per-function version nodes).
$(KRSIM_BUILD)/libamdhip64.so.%: $(HIP_LIB_DEPS) $(HIP_HSA_LIB)
	@mkdir -p $(KRSIM_BUILD)
	$(HIP_CC) $(HIP_CFLAGS) -fPIC -fvisibility=hidden -shared -o $@ $(HIP_LIB_SRC) \
		-Wl,-soname,libamdhip64.so.$* -Wl,--version-script=$(KRSIM_ROOT)/hip/libamdhip64.map \
		-Wl,-z,defs -L$(KRSIM_BUILD) -l:libhsa-runtime64.so.1 -Wl,-rpath,'$$ORIGIN'

$(KRSIM_BUILD)/libamdhip64.so: $(KRSIM_BUILD)/libamdhip64.so.6
	ln -sf libamdhip64.so.6 $@

$(KRSIM_BUILD)/workloads/%: $(KRSIM_ROOT)/workloads/%.c $(KRSIM_ROOT)/workloads/workload.h \
		$(KRSIM_ROOT)/include/krsim_hip.h \
		$(KRSIM_BUILD)/libamdhip64.so.6
	@mkdir -p $(dir $@)
	$(HIP_CC) $(HIP_CFLAGS) -rdynamic -o $@ $< -L$(KRSIM_BUILD) -l:libamdhip64.so.6 \
		-l:libhsa-runtime64.so.1 -Wl,-rpath,'$$ORIGIN/..'

$(KRSIM_BUILD)/tests/hip_%: $(KRSIM_ROOT)/tests/hip_%.c $(KRSIM_ROOT)/include/krsim_hip.h \
		$(wildcard $(KRSIM_ROOT)/tests/hip_check.h $(KRSIM_ROOT)/tests/hsa_test_util.h) $(KRSIM_BUILD)/libamdhip64.so.6
	@mkdir -p $(dir $@)
	$(HIP_CC) $(HIP_CFLAGS) -rdynamic -o $@ $< -L$(KRSIM_BUILD) -l:libamdhip64.so.6 \
		-l:libhsa-runtime64.so.1 -Wl,-rpath,'$$ORIGIN/..'

# Linked against the real ROCm 5.2 library: no rpath, so LD_LIBRARY_PATH picks the runtime.
$(KRSIM_BUILD)/tests/hip_compat_real: $(KRSIM_ROOT)/tests/hip_compat_real.c \
		$(KRSIM_ROOT)/include/krsim_hip.h $(wildcard $(KRSIM_ROOT)/tests/hip_check.h $(KRSIM_ROOT)/tests/hsa_test_util.h)
	@mkdir -p $(dir $@)
	$(HIP_CC) $(HIP_CFLAGS) -rdynamic -o $@ $< -L/usr/lib/x86_64-linux-gnu -l:libamdhip64.so.5

# An HSA_TOOLS_LIB tool counting what HIP asks of HSA (kernarg flags, vmem, queues, executables).
$(KRSIM_BUILD)/tests/hip_tool.so: $(KRSIM_ROOT)/tests/hip_tool.c $(KRSIM_ROOT)/hsa/api_table.h
	@mkdir -p $(dir $@)
	$(HIP_CC) $(HIP_CFLAGS) -I$(KRSIM_ROOT)/hsa -fPIC -shared -o $@ $<
