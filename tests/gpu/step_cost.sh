#!/usr/bin/env bash
# What a PyTorch training step costs under each way of tracing it, side by side: ROUNDS rounds
# of tests/gpu/train_step.py STEPS (the 4-layer transformer: forward, backward, AdamW), the
# arms interleaved within each round, each arm's median step (after the first) over the
# round's plain median. Arms (ARMS, space-separated; default all):
#   plain          the step alone
#   no_gpu         under `kreplay trace --no-gpu` (the probes)
#   gpu            under `kreplay trace --gpu` (the probes and kreplay-tool's CUPTI timeline)
#   torch_cuda     under torch.profiler, CUDA activity only (tests/gpu/timeline_step.py)
#   torch_cpu_cuda under torch.profiler, CPU and CUDA activity
# Run from the repository root on the GPU machine, binaries in .gpu-carry/ (tests/gpu/run.sh's
# conventions), as root:
#   bash tests/gpu/step_cost.sh
# Prints `STEP round arm median_ms` lines, then `RESULT step_ratio_ARM median min max` (over
# rounds) and whether `gpu` meets the GPU timeline's target (at most 1.10 times plain).
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/step_cost}
PY=${PY:-/opt/torch/.venv/bin/python3}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-60}
ARMS=${ARMS:-plain no_gpu gpu torch_cuda torch_cpu_cuda}
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
echo "steps per run: $STEPS, rounds: $ROUNDS, arms: $ARMS"
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
export KREPLAY_TOOL_LIB=$PWD/$C/libkreplay_tool.so
run_arm() {
  case $1 in
    plain) "$PY" tests/gpu/train_step.py "$STEPS" ;;
    no_gpu) "$K" trace --no-gpu -q -o "$OUT/s.pftrace" -- "$PY" tests/gpu/train_step.py "$STEPS" 2> /dev/null ;;
    gpu) "$K" trace --gpu -q -o "$OUT/s.pftrace" -- "$PY" tests/gpu/train_step.py "$STEPS" 2> /dev/null ;;
    torch_cuda) "$PY" tests/gpu/timeline_step.py "$STEPS" --cuda-only ;;
    torch_cpu_cuda) "$PY" tests/gpu/timeline_step.py "$STEPS" ;;
  esac
}
# The median of a run's `step_ms: first,others...` line, the first step left out.
median_step() {
  awk -F'step_ms: ' 'NF > 1 {n = split($2, v, ","); for (i = 2; i <= n; i++) print v[i]}' |
    sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'
}
for r in $(seq "$ROUNDS"); do
  for arm in $ARMS; do
    ms=$(run_arm "$arm" 2>&1 | median_step)
    echo "STEP $r $arm ${ms:-none}"
    rm -rf "$OUT/s.pftrace" "$OUT/s.pftrace.streams"
  done
done | tee "$OUT/steps.txt"
"$PY" - "$OUT/steps.txt" <<'PYEOF'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    _, r, arm, ms = line.split()
    if ms != "none":
        v.setdefault(r, {})[arm] = float(ms)
arms = sorted({a for rnd in v.values() for a in rnd if a != "plain"})
met = None
for arm in arms:
    ratios = [rnd[arm] / rnd["plain"] for rnd in v.values() if arm in rnd and "plain" in rnd]
    if not ratios:
        continue
    med = statistics.median(ratios)
    print(f"RESULT step_ratio_{arm} {med:.3f} min {min(ratios):.3f} max {max(ratios):.3f} rounds {len(ratios)}")
    if arm == "gpu":
        met = med <= 1.10
if met is not None:
    print(f"TARGET step_ratio_gpu <= 1.10: {'met' if met else 'missed'}")
PYEOF
