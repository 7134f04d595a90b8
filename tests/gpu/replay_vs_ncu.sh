#!/usr/bin/env bash
# kreplay replay beside Nsight Compute's kernel replay on the same PyTorch training step
# (tests/gpu/train_step.py), in one run: the step bare, then N cuBLAS GEMM launches profiled by
# each. ncu with one metric (one pass per kernel) against `kreplay replay --passes 2`, and ncu's
# `--set full` (its save/restore replay over many passes) against `kreplay replay --passes 38`.
# Per profiled launch: (wall - bare wall) / N. The losses must equal the bare run's every time.
#   tests/gpu/replay_vs_ncu.sh [N]   (default 20; the full-set pair uses N/4)
# Binaries from $C (default .gpu-carry, `cargo xtask gpu-test --build-only`).
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
PY=${PY:-/opt/torch/.venv/bin/python3}
N=${1:-20}
NF=$(( N / 4 > 0 ? N / 4 : 1 ))
GEMM=${GEMM:-gemm|xmma|cutlass}
NCU=${NCU:-$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
W=$(mktemp -d)
losses() { grep '^step ' "$1" | awk '{print $2, $4, $6}'; }
run() { # name cmd...: wall seconds, losses compared with the bare run's
  local name=$1; shift
  local s e; s=$(date +%s.%N); "$@" > $W/$name.out 2> $W/$name.err; local rc=$?; e=$(date +%s.%N)
  local same=FAIL; [ "$(losses $W/$name.out)" = "$(losses $W/bare.out 2>/dev/null)" ] && same=PASS
  echo "TIME $name rc $rc wall_s $(awk -v a=$s -v b=$e 'BEGIN{printf "%.2f", b-a}') losses_identical $same"
}
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), ncu $($NCU --version 2>/dev/null | tail -1), $(date -u)"
run bare $PY tests/gpu/train_step.py 3
run bare2 $PY tests/gpu/train_step.py 3
run kreplay_p2 $K replay --passes 2 --kernel "$GEMM" --max-dispatches $N -o $W/p2.pftrace -- $PY tests/gpu/train_step.py 3
sed -n '/^kernel  *dispatches/,$p' $W/kreplay_p2.out | cut -c1-200
run ncu_1metric $NCU --target-processes all -k "regex:$GEMM" -c $N --metrics gpu__time_duration.sum $PY tests/gpu/train_step.py 3
run kreplay_p38 $K replay --passes 38 --kernel "$GEMM" --max-dispatches $NF -o $W/p38.pftrace -- $PY tests/gpu/train_step.py 3
sed -n '/^kernel  *dispatches/,$p' $W/kreplay_p38.out | cut -c1-200
run ncu_full $NCU --target-processes all -k "regex:$GEMM" -c $NF --set full $PY tests/gpu/train_step.py 3
grep -E '^==PROF==|passes' $W/ncu_full.err $W/ncu_full.out 2>/dev/null | head -5
echo "per-launch overheads use N=$N (1 pass) and N/4=$NF (full set / 38 passes)"
rm -rf "$W"
