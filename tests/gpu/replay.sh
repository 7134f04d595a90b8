#!/usr/bin/env bash
# kreplay replay on a real NVIDIA GPU: the replay issue's scenarios with CUDA programs built here
# by nvcc, run plain and under `kreplay replay --passes 5`; the outputs must be identical and the
# summary must show the passes (or the decline) each scenario calls for. Binaries come from
# .gpu-carry/ (`cargo xtask gpu-test --build-only`). Prints PASS/FAIL lines and RESULT numbers.
set -u
C=.gpu-carry
K=${KREPLAY_BIN:-$C/kreplay}
OUT=${OUT:-/tmp}
# Scratch (binaries, per-scenario outputs) stays out of $OUT; $OUT gets the log's fixtures.
W=$(mktemp -d)
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $(nvcc --version | tail -1), $(date -u)"
B=$W/bin
mkdir -p $B
nvcc -O2 -arch=sm_90 -o $B/replay_cases tests/gpu/replay_cases.cu || exit 1
nvcc -O2 -arch=sm_90 -o $B/driver_api tests/gpu/driver_api.cu -lcuda || exit 1
for f in cubin ptx fatbin; do
  nvcc -arch=sm_90 -$f -o $W/module_vars.$f tests/gpu/module_vars.cu || exit 1
  cp $W/module_vars.$f $OUT/ 2>/dev/null
done

# column NAME of the summary row for KERNEL (found by the table's header); declines are the tail.
row() { awk -v k="$2" '$1==k' "$1"; }
col() {
  local c; c=$(head -1 "$1" | awk -v n="$3" '{for (i = 1; i <= NF; i++) if ($i == n) print i}')
  row "$1" "$2" | awk -v c="$c" '{print $c}'
}

scenario() { # name expected_kernel expected_passes decline_substring cmd...
  local name=$1 kernel=$2 passes=$3 decl=$4; shift 4
  "$@" > $W/$name.plain 2> $W/$name.plain.err
  KREPLAY_LOG=${KREPLAY_LOG:-warn} $K replay --passes 5 ${REPLAY_FLAGS:-} -o $W/$name.pftrace -- "$@" > $W/$name.all 2> $W/$name.err
  # kreplay prints its per-kernel table on stdout after the program's own output.
  sed '/^kernel  *dispatches/,$d' $W/$name.all > $W/$name.replay
  sed -n '/^kernel  *dispatches/,/^$/p' $W/$name.all > $W/$name.table
  echo "--- $name"; cat $W/$name.all; grep -v "^ *$" $W/$name.err | tail -6
  check "${name}_output_identical" "$(cat $W/$name.replay)" "$(cat $W/$name.plain)"
  check "${name}_passes" "$(col $W/$name.table "$kernel" passes)" "$passes"
  if [ -n "$decl" ]; then
    check "${name}_declined" "$(row $W/$name.table "$kernel" | grep -c -- "$decl")" 1
  fi
}

# In-place accumulation: five passes, y keeps its one-pass value (the program checks it).
scenario inplace axpy_inplace 5 "" $B/replay_cases inplace
check inplace_wrong_values "$(awk '$1=="wrong"{print $2}' $W/inplace.replay)" 0
check inplace_deterministic "$(col $W/inplace.table axpy_inplace nondet)" 0
scenario buffers three_buffers 5 "" $B/replay_cases buffers
# A __device__ counter bumped by every thread: one pass's count, not five.
scenario devicevar count_hits 5 "" $B/replay_cases devicevar
check devicevar_hits "$(awk '$1=="hits"{print $2}' $W/devicevar.replay)" 1048576
# Graph launches: not replayed, run once.
scenario graph "(cuGraphLaunch)" - "graph launch" $B/replay_cases graph
# Memory from the async pool is not snapshotted: replay declines, the program runs once.
scenario async axpy_inplace - "cuMemAllocAsync" $B/replay_cases async
# Driver API, linked against libcuda: the module given as PTX, cubin and fat binary; `bumps`
# is a __device__ variable found by name in each image.
for f in ptx cubin fatbin; do
  scenario drv_$f bump 5 "" $B/driver_api $W/module_vars.$f
  check drv_${f}_bumps "$(awk '$1=="bumps"{print $2}' $W/drv_$f.replay)" 65536
  # `bump` races on ns::scoped on purpose: kreplay's determinism check must say so.
  check drv_${f}_nondeterministic "$(col $W/drv_$f.table bump nondet)" 1
done

# PyTorch (shared libcudart, libcuda dlopened): ten in-place `add_` launches replayed three
# times each; torch_loop.py asserts x == 200 + N at the end, so a pass leaking into the next
# fails it.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  KREPLAY_LOG=warn,kreplay_tool::cuda=debug $K replay --passes 3 --max-dispatches 10 -o $W/torch.pftrace -- python3 tests/gpu/torch_loop.py 100 > $W/torch.all 2> $W/torch.err
  rc=$?
  echo "--- torch"; cat $W/torch.all; grep -E "variable|declined|WARN" $W/torch.err | sort | uniq -c | sort -rn | head -12 | cut -c1-400
  check torch_replay_exit "$rc" 0
  check torch_replay_launches "$(awk '$1=="launches:"{print $2}' $W/torch.all)" 100
  # Ten dispatches replayed, three passes each (the table's replayed and passes columns).
  check torch_replay_dispatches "$(sed -n '/^kernel  *dispatches/,/^$/p' $W/torch.all | awk 'NR>1{s+=$3} END{print s}')" 10
  check torch_replay_passes_each "$(sed -n '/^kernel  *dispatches/,/^$/p' $W/torch.all | awk 'NR>1 && NF{print $4}' | sort -u)" 3
else
  echo "SKIPPED torch replay: no PyTorch with CUDA"
fi

# A large footprint with 1% of its pages written, restored through the default device-side
# check: the same output as without replay. Restore costs: tests/gpu/restore_matrix.sh.
scenario fp_1024_10 touch_strided 5 "" $B/replay_cases footprint 1024 10
check fp_1024_10_sum "$(awk '$1=="sum"{print $2}' $W/fp_1024_10.replay)" 2622
# Three snapshots of different sets of buffers in one process (3, 2, then 1 live buffers): the
# device-side restore gets a new job table twice. Four dispatches (the three of touch_strided
# and the final sum_words) are restored 4 times each: only the first restore of each runs the
# graph readied with the snapshot over every region and publishes its counters through mapped
# memory; the three after it restore only the pieces that first restore found changed (a
# table new with every dispatch, launched directly when it is not empty). None falls back from
# a graph to copying, and a's sum is three launches' worth.
KREPLAY_LOG=kreplay_tool=debug scenario tables touch_strided 5 "" $B/replay_cases tables
check tables_sum "$(awk '$1=="sum"{print $2}' $W/tables.replay)" 123
check tables_counters_published "$(grep -c 'graph, mapped' $W/tables.err)" 4
check tables_counters_never_copied "$(grep -c 'were not published' $W/tables.err)" 0
echo "failures: $fails"
exit $fails
