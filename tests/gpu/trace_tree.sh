#!/usr/bin/env bash
# Process trees on the H200: `kreplay trace -- torchrun --nproc_per_node 2` (two PyTorch
# processes on one GPU, started by torchrun's own Python process) must trace both workers from
# their first call, each with its launches; `kreplay replay` through torchrun must reach both
# workers and say which process each replayed kernel belongs to. Run from the repository root,
# binaries in .gpu-carry/. Prints `RESULT name value` and `PASS`/`FAIL name` lines.
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
OUT=${OUT:-/tmp/trace_tree}
VENV=${VENV:-/opt/torch/.venv}
mkdir -p "$OUT"
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
N=1000
TR="$VENV/bin/torchrun --standalone --nproc_per_node 2"

# Bare, for the launch count each worker makes.
t0=$(date +%s%N)
$TR tests/gpu/torch_loop.py $N > "$OUT/bare.out" 2> "$OUT/bare.err"
echo "RESULT bare_s $(( ($(date +%s%N) - t0) / 1000000 ))e-3"
grep -c "^launches: $N" "$OUT/bare.out" | sed 's/^/RESULT bare_workers_done /'

t0=$(date +%s%N)
$K trace -o "$OUT/tree.pftrace" -- $TR tests/gpu/torch_loop.py $N > "$OUT/tree.out" 2> "$OUT/tree.err"
echo "RESULT traced_s $(( ($(date +%s%N) - t0) / 1000000 ))e-3"
grep -E "tracing|^cu|^cuda|loader hook|dropped|wrote|warning|error" "$OUT/tree.err" | head -40
check tree_workers_done "$(grep -c "^launches: $N" "$OUT/tree.out")" 2
# Launches per process: decode $OUT/tree.pftrace where the Perfetto protos are installed
# (tests/python/decode_trace.py); the GPU machine has none.
# Replay through torchrun: both workers get the tool.
$K replay --passes 2 --max-dispatches 20 -o "$OUT/replay.pftrace" -- $TR tests/gpu/torch_loop.py 200 > "$OUT/replay.out" 2> "$OUT/replay.err"
check replay_workers_done "$(grep -c '^launches: 200' "$OUT/replay.out")" 2
grep -E "\[pid [0-9]+\]|dispatches replayed" "$OUT/replay.out" | head -12
check replay_processes "$(grep -oE '\[pid [0-9]+\]' "$OUT/replay.out" | sort -u | wc -l)" 2
echo "failures: $fails"
