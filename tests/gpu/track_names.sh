#!/usr/bin/env bash
# The GPU timeline's track names on the H200 (CUDA, through CUPTI): `kreplay trace --gpu` on
# tests/gpu/train_step.py, then `kreplay trace -p PID --gpu` twice on a running
# tests/gpu/train_loop.py (the second session's stream file must describe the device again).
# Each trace must have one GPU group, `GPU 0: <the name nvidia-smi gives GPU 0> (python3 PID)`,
# holding `stream N` and `stream N copies` tracks and the busy counter (tests/gpu/track_names.py,
# which reads the trace's wire format: no Perfetto package needed). The device's name comes
# from the driver's cuDeviceGetName, asked on a thread of kreplay-tool's own while cuInit may
# still be running (never inside a CUPTI callback); every run is under `timeout`, so a hang
# shows as a FAIL, not a stuck machine, and a name the driver did not give in time as one.
# Run from the repository root there, binaries in .gpu-carry/ (tests/gpu/run.sh's conventions):
#   bash tests/gpu/track_names.sh
# Prints `RESULT name value` lines and `PASS`/`FAIL name` checks (exit status 1 when one fails).
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/track_names}
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
export KREPLAY_TOOL_LIB=$PWD/$C/libkreplay_tool.so
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
echo "RESULT nvidia_smi_name $NAME"
names() { python3 tests/gpu/track_names.py "$1" "$NAME" || fails=$((fails+1)); }

# 1. A started command.
rm -f "$OUT/cmd.pftrace"
timeout 300 "$K" trace --gpu -q -o "$OUT/cmd.pftrace" -- "$PY" tests/gpu/train_step.py 2 > "$OUT/cmd.out" 2> "$OUT/cmd.err"
check cmd_trace_exit "$?" 0
grep -E "CUPTI|error|warning" "$OUT/cmd.err" | head -5
names "$OUT/cmd.pftrace"

# 2. A running training loop, attached twice.
"$PY" -u tests/gpu/train_loop.py 100000 > "$OUT/loop.out" 2> "$OUT/loop.err" &
TP=$!
for _ in $(seq 1 1200); do grep -q '^step 50 ' "$OUT/loop.out" && break; kill -0 $TP 2>/dev/null || break; sleep 0.1; done
for s in first second; do
  rm -f "$OUT/$s.pftrace"
  timeout 120 "$K" trace --gpu -q -p $TP --duration 3s -o "$OUT/$s.pftrace" 2> "$OUT/$s.err"
  check "attach_${s}_exit" "$?" 0
  grep -E "GPU timeline|CUPTI|error" "$OUT/$s.err" | head -3
  names "$OUT/$s.pftrace"
done
kill $TP 2>/dev/null; wait $TP 2>/dev/null

if [ $fails -eq 0 ]; then echo "PASS track_names_all"; else echo "FAIL track_names_all ($fails)"; exit 1; fi
