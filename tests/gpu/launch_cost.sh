#!/usr/bin/env bash
# What one kernel launch costs the launching thread under each way of tracing it, side by side:
# tests/gpu/torch_loop.py's LAUNCHES tiny kernels (in-place `add_` on 256 floats), ROUNDS
# rounds, the arms interleaved within each round, each arm's added µs per launch over the
# round's plain run. Arms (ARMS, space-separated; default all):
#   plain       the loop alone
#   torch_cuda  under torch.profiler, CUDA activity only
#   no_gpu      under `kreplay trace --no-gpu` (the probes)
#   gpu         under `kreplay trace --gpu` (the probes and kreplay-tool's CUPTI timeline)
#   gpu_cupti   under `kreplay trace --gpu --cupti-launches` (the launch calls from CUPTI's
#               API records, the other calls from the probes)
#   tool        kreplay-tool's CUPTI timeline alone (CUDA_INJECTION64_PATH, no probes)
#   gpu_base, tool_base   the same two with the tool at BASE_TOOL (an older build, for A/B)
# Run from the repository root on the GPU machine, binaries in .gpu-carry/ (tests/gpu/run.sh's
# conventions), as root:
#   bash tests/gpu/launch_cost.sh
# Prints `LOOP round arm us_per_launch` lines, then `RESULT added_us_per_launch_ARM median`
# (the median over rounds of the arm's µs per launch minus that round's plain one), and the
# tool's CUPTI setup line (how many quiet calls' API records CUPTI turned off).
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/launch_cost}
PY=${PY:-/opt/torch/.venv/bin/python3}
ROUNDS=${ROUNDS:-5}
LAUNCHES=${LAUNCHES:-100000}
TOOL=$PWD/$C/libkreplay_tool.so
BASE_TOOL=${BASE_TOOL:-}
ARMS=${ARMS:-plain torch_cuda no_gpu gpu gpu_cupti tool${BASE_TOOL:+ gpu_base tool_base}}
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
echo "launches per run: $LAUNCHES, rounds: $ROUNDS, arms: $ARMS"
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
loop() { "$PY" tests/gpu/torch_loop.py "$LAUNCHES" "$@"; }
# The tool alone: what `trace --gpu -- CMD` sets for it (trace/gpu_env.rs), without the probes.
tool_alone() {
  rm -rf "$OUT/tool.streams"; mkdir -p "$OUT/tool.streams"
  CUDA_INJECTION64_PATH=$1 KREPLAY_GPU_TIMELINE=1 KREPLAY_OUTPUT_DIR=$OUT/tool.streams loop
}
run_arm() {
  case $1 in
    plain) loop ;;
    torch_cuda) loop --profiler-cuda ;;
    no_gpu) "$K" trace --no-gpu -q -o "$OUT/l.pftrace" -- "$PY" tests/gpu/torch_loop.py "$LAUNCHES" 2> /dev/null ;;
    gpu) KREPLAY_TOOL_LIB=$TOOL "$K" trace --gpu -q -o "$OUT/l.pftrace" -- "$PY" tests/gpu/torch_loop.py "$LAUNCHES" 2> /dev/null ;;
    gpu_cupti) KREPLAY_TOOL_LIB=$TOOL "$K" trace --gpu --cupti-launches -q -o "$OUT/l.pftrace" -- "$PY" tests/gpu/torch_loop.py "$LAUNCHES" 2> /dev/null ;;
    gpu_base) KREPLAY_TOOL_LIB=$BASE_TOOL "$K" trace --gpu -q -o "$OUT/l.pftrace" -- "$PY" tests/gpu/torch_loop.py "$LAUNCHES" 2> /dev/null ;;
    tool) tool_alone "$TOOL" ;;
    tool_base) tool_alone "$BASE_TOOL" ;;
  esac
}
for r in $(seq "$ROUNDS"); do
  for arm in $ARMS; do
    run_arm "$arm" | awk -v r="$r" -v a="$arm" '/us_per_launch/{print "LOOP", r, a, $2}'
    rm -rf "$OUT/l.pftrace" "$OUT/l.pftrace.streams"
  done
done | tee "$OUT/loop.txt"
awk '$1=="LOOP" {v[$2" "$3]=$4; arms[$3]=1; rounds[$2]=1}
  END {
    for (a in arms) if (a != "plain") {
      n = 0
      for (r in rounds) if ((r" "a) in v && (r" plain") in v) d[++n] = v[r" "a] - v[r" plain"]
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (d[j] < d[i]) { t = d[i]; d[i] = d[j]; d[j] = t }
      if (n) printf "RESULT added_us_per_launch_%s %.2f\n", a, (n % 2) ? d[(n + 1) / 2] : (d[n / 2] + d[n / 2 + 1]) / 2
    }
  }' "$OUT/loop.txt" | sort
# How the tool set CUPTI up in this CUDA (debug log of one short run).
rm -rf "$OUT/tool.streams"; mkdir -p "$OUT/tool.streams"
CUDA_INJECTION64_PATH=$TOOL KREPLAY_GPU_TIMELINE=1 KREPLAY_OUTPUT_DIR=$OUT/tool.streams \
  KREPLAY_LOG=kreplay_tool::cupti=debug "$PY" tests/gpu/torch_loop.py 1000 2>&1 | grep -E "CUPTI (activity on|set up)" | head -2
