#!/usr/bin/env bash
# Where kreplay's fixed cost per replayed dispatch goes on a real PyTorch workload: the 4-layer
# transformer training step of tests/gpu/train_step.py (fp32, 91 cuBLAS GEMMs a step), its
# GEMMs replayed at 1 (replay is off at 1 pass: the tool is only preloaded), 2 and 10 passes,
# then with each suspect turned off (the determinism check: KREPLAY_CHECK_DETERMINISM=0; the
# dirty check and its snapshot-time hashing: --restore full). Two debug-log runs (KREPLAY_LOG):
# a short one at 10 passes, and the whole run at 2 passes, reduced on the machine to the regions
# each determinism hash walks against the module variables loaded so far and the last
# dispatch's region sizes; then tests/gpu/dispatch_cost.cu over those sizes (the engine's call
# patterns against batched ones, and a 600-variable cubin for cuModuleGetGlobal).
# Binaries from $C (default .gpu-carry, `cargo xtask gpu-test --build-only`). Everything goes to
# $W; at the end $W is packed into $OUT/replay_cost.tgz. Per-phase times per dispatch: decode the
# traces with tests/gpu/replay_phases.py (needs the perfetto package, so run it where that is).
#
#   tests/gpu/replay_cost.sh [STEPS]        (default 3)
# Env: C (binaries), GEMM (kernel regex, default 'gemm|nvjet|xmma|cutlass'), ONLY (a regex of
# run names to do: kernels bare p10_debug p2_debugall bench p1 p2 p10 p10_nodet p2_nodet p1_full
# p10_nodet_full p10_full), BUDGET_S (skip the runs left once this many seconds have passed,
# default 420), REPS (dispatch_cost repetitions).
# All runs take about 250 s on an H200 (BUDGET_S=360).
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
OUT=${OUT:-/tmp/replay_cost_out}
W=${W:-/tmp/replay_cost}
STEPS=${1:-3}
GEMM=${GEMM:-gemm|nvjet|xmma|cutlass}
ONLY=${ONLY:-.}
BUDGET_S=${BUDGET_S:-420}
PY=${PY:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3 )}
rm -rf "$W"; mkdir -p "$W" "$OUT"
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}'; }
want() { [[ $1 =~ $ONLY ]] || return 1; if [ "$(elapsed)" -gt "$BUDGET_S" ]; then echo "SKIP $1 (time budget)"; return 1; fi; }
wall() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
losses() { grep '^step ' "$1" | awk '{print $2, $4, $6}'; }

echo "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null); $(uname -r); $(nproc) cpus; $(date -u)"
$PY -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
echo "kreplay: $($K --version 2>&1)"
$K replay --help > $W/replay_help.txt 2>&1

# The kernels one step launches (torch.profiler, demangled names).
if want kernels; then
  $PY tests/gpu/train_step.py 1 --list-kernels > $W/kernels.txt 2>&1
  echo "--- kernels of one step (matching /$GEMM/i marked *)"
  awk -v re="$GEMM" '$1=="kernel"{n=$2; $1="";$2=""; m=(tolower($0) ~ re)?"*":" "; print m, n, substr($0,1,150); if(m=="*") g+=n} END{print "gemm-matching launches per step:", g}' $W/kernels.txt
  grep -E '^(kernels_per_step|cuda_allocated)' $W/kernels.txt
fi

# Bare runs.
for i in 1 2; do
  want bare || break
  s=$(date +%s.%N); $PY tests/gpu/train_step.py $STEPS > $W/bare$i.out 2> $W/bare$i.err; rc=$?; e=$(date +%s.%N)
  echo "TIME bare$i rc $rc wall_s $(wall $s $e) $(grep -E '^(wall_s|setup_s|step_ms)' $W/bare$i.out | tr '\n' ' ')"
done
losses $W/bare1.out > $W/bare.losses
cat $W/bare1.out

# One replay run: name, env assignments (or -), kreplay flags...
replay() {
  local name=$1 envs=$2; shift 2
  want "$name" || return 0
  local s e rc
  s=$(date +%s.%N)
  if [ "$envs" = - ]; then envs=""; fi
  env $envs timeout 150 $K replay -o $W/$name.pftrace "$@" -- $PY tests/gpu/train_step.py $STEPS > $W/$name.out 2> $W/$name.err
  rc=$?; e=$(date +%s.%N)
  local same=FAIL
  [ "$(losses $W/$name.out)" = "$(cat $W/bare.losses)" ] && same=PASS
  [ -s $W/bare.losses ] || same=n/a
  echo "TIME $name rc $rc wall_s $(wall $s $e) losses_identical $same env '$envs' flags '$*' $(grep -E '^wall_s' $W/$name.out | tr '\n' ' ')"
  sed -n '/^kernel  *dispatches/,$p' $W/$name.out | cut -c1-220 | head -10
  grep -v '^ *$' $W/$name.err | grep -v DEBUG | sort | uniq -c | sort -rn | head -4 | cut -c1-300
}

# The short debug-log run first: its per-region hash calls give the region sizes for the bench.
replay p10_debug "KREPLAY_LOG=warn,kreplay_tool=debug" --passes 10 --kernel "$GEMM" --max-dispatches 6
if [ -f $W/p10_debug.err ]; then
  sed 's/\x1b\[[0-9;]*m//g' $W/p10_debug.err > $W/p10_debug.log
  # The lines between the first two one-pass restores are pass 1's determinism hash: one call
  # per region, 4 KiB blocks ("over N chunks").
  awk '/one-pass restore of/{ if (n > 0) exit; started = 1; next }
       started && /kreplay_hash_chunks\) over/{ for (i = 1; i <= NF; i++) if ($i == "over") print $(i+1) * 4096; n++ }' $W/p10_debug.log > $W/region_sizes.txt
  echo "regions in a pass's determinism hash: $(wc -l < $W/region_sizes.txt), bytes $(awk '{s+=$1} END{print s}' $W/region_sizes.txt)"
  grep -m3 'one-pass restore of' $W/p10_debug.log | cut -c1-250
  grep 'kreplay_hash_chunks) over' $W/p10_debug.log | sed -n '2,4p' | cut -c1-250
  grep -c 'kreplay_hash_chunks) over' $W/p10_debug.log | sed 's/^/hash_chunks_calls_logged /'
  grep -E 'variables|module' $W/p10_debug.log | sort | uniq -c | sort -rn | head -5 | cut -c1-250
fi

# The whole run at 2 passes with the debug log: per dispatch, the regions its determinism hash
# walks against the module variables loaded so far, and the last dispatch's region sizes.
replay p2_debugall "KREPLAY_LOG=warn,kreplay_tool=debug" --passes 2 --kernel "$GEMM"
if [ -f $W/p2_debugall.err ]; then
  sed 's/\x1b\[[0-9;]*m//g' $W/p2_debugall.err | awk -v sizes=$W/region_sizes_all.txt '
    / variables$/ { for (i = 1; i <= NF; i++) if ($i == "variables") vars += $(i-1); mods++ }
    /kreplay_hash_chunks\) over/ { for (i = 1; i <= NF; i++) if ($i == "over") c[n++] = $(i+1) }
    /one-pass restore of/ { d++; if (d % 40 == 1) printf "restore %d: pass-0 hash calls %d (incl. the warm-up call), module variables loaded %d in %d modules\n", d, n, vars, mods; n = 0 }
    END { printf "last restore %d: module variables loaded %d in %d modules; last pass hash calls %d\n", d, vars, mods, n;
          small = 0; for (i = 0; i < n; i++) { print c[i] * 4096 > sizes; if (c[i] == 1) small++ }
          printf "last pass: %d regions of 1 chunk (<= 4 KiB), %d larger\n", small, n - small }' | tee $W/p2_debugall.summary
  grep -E 'one-pass restore of' $W/p2_debugall.err | tail -1 | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-250
  sort -n $W/region_sizes_all.txt | uniq -c | sort -k2 -n | awk '$2 > 4096' | head -30
  rm -f $W/p2_debugall.err
fi

# The bench over the region sizes seen (else a synthetic stand-in).
if want bench; then
  $PY -c 'print("\n".join(f"__device__ unsigned long long kv{i};" for i in range(600)));
print("extern \"C\" __global__ void touch() {" + "".join(f" kv{i}++;" for i in range(600)) + " }")' > $W/vars.cu
  nvcc -cubin -arch=sm_90 -o $W/vars.cubin $W/vars.cu > $W/nvcc_vars.log 2>&1 || tail -5 $W/nvcc_vars.log
  if nvcc -O2 -arch=sm_90 -o $W/dispatch_cost tests/gpu/dispatch_cost.cu -lcuda > $W/nvcc.log 2>&1; then
    sizes=$W/region_sizes_all.txt
    [ -s "$sizes" ] || sizes=$W/region_sizes.txt
    [ -s "$sizes" ] || sizes=synthetic:300:1048576
    $W/dispatch_cost "$sizes" ${REPS:-20} $W/vars.cubin 600 2>&1 | tee $W/dispatch_cost.txt
  else
    echo "nvcc failed:"; tail -20 $W/nvcc.log
  fi
fi

replay p1 - --passes 1 --kernel "$GEMM"
replay p2 - --passes 2 --kernel "$GEMM"
replay p10 - --passes 10 --kernel "$GEMM"
replay p10_nodet "KREPLAY_CHECK_DETERMINISM=0" --passes 10 --kernel "$GEMM"
replay p2_nodet "KREPLAY_CHECK_DETERMINISM=0" --passes 2 --kernel "$GEMM"
replay p1_full - --passes 1 --kernel "$GEMM" --restore full
replay p10_nodet_full "KREPLAY_CHECK_DETERMINISM=0" --passes 10 --kernel "$GEMM" --restore full
replay p10_full - --passes 10 --kernel "$GEMM" --restore full

echo "elapsed_s $(elapsed)"
tar czf $OUT/replay_cost.tgz -C "$(dirname $W)" "$(basename $W)"
ls -la $OUT
