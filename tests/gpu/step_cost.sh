#!/usr/bin/env bash
# What a PyTorch training step costs under each way of tracing it, side by side: ROUNDS rounds
# of tests/gpu/train_step.py STEPS (the 4-layer transformer: forward, backward, AdamW), the
# arms interleaved within each round, each arm's median step (after the first) over the
# round's plain median. Arms (ARMS, space-separated; default all):
#   plain          the step alone
#   no_gpu         under `kreplay trace --no-gpu` (the probes)
#   gpu            under `kreplay trace --gpu` (the probes and kreplay-tool's CUPTI timeline)
#   gpu_cupti      under `kreplay trace --gpu --cupti-launches` (launch calls from CUPTI)
#   torch_cuda     under torch.profiler, CUDA activity only (tests/gpu/timeline_step.py)
#   torch_cpu_cuda under torch.profiler, CPU and CUDA activity
# MODEL (default empty: train_step.py's small default, whose step is bound by the host's
# launches) is passed to both programs, e.g. MODEL="--d-model 1536 --batch 16 --seq 512" for a
# step the GPU's work bounds.
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
ARMS=${ARMS:-plain no_gpu gpu gpu_cupti torch_cuda torch_cpu_cuda}
MODEL=${MODEL:-}
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
echo "steps per run: $STEPS, rounds: $ROUNDS, arms: $ARMS, model: ${MODEL:-default}"
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
export KREPLAY_TOOL_LIB=$PWD/$C/libkreplay_tool.so
# shellcheck disable=SC2086 # MODEL is a list of flags
run_arm() {
  case $1 in
    plain) "$PY" tests/gpu/train_step.py "$STEPS" $MODEL ;;
    no_gpu) "$K" trace --no-gpu -q -o "$OUT/s.pftrace" -- "$PY" tests/gpu/train_step.py "$STEPS" $MODEL 2> /dev/null ;;
    gpu) "$K" trace --gpu -q -o "$OUT/s.pftrace" -- "$PY" tests/gpu/train_step.py "$STEPS" $MODEL 2> /dev/null ;;
    gpu_cupti) "$K" trace --gpu --cupti-launches -q -o "$OUT/s.pftrace" -- "$PY" tests/gpu/train_step.py "$STEPS" $MODEL 2> /dev/null ;;
    torch_cuda) "$PY" tests/gpu/timeline_step.py "$STEPS" --cuda-only $MODEL ;;
    torch_cpu_cuda) "$PY" tests/gpu/timeline_step.py "$STEPS" $MODEL ;;
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
for arm in arms:
    ratios = [rnd[arm] / rnd["plain"] for rnd in v.values() if arm in rnd and "plain" in rnd]
    if not ratios:
        continue
    med = statistics.median(ratios)
    print(f"RESULT step_ratio_{arm} {med:.3f} min {min(ratios):.3f} max {max(ratios):.3f} rounds {len(ratios)}")
    if arm in ("gpu", "gpu_cupti"):
        print(f"TARGET step_ratio_{arm} <= 1.10: {'met' if med <= 1.10 else 'missed'}")
PYEOF
