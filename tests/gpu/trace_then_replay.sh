#!/usr/bin/env bash
# The sequence that crashed processes inside CUPTI 13 before the tool primed CUPTI's callbacks
# (docs/attach.md): RUNS times, tests/gpu/launch_windows.py's tiny-kernel loop gets
# `kreplay trace -p --gpu` for 2 s, then `kreplay replay -p --kernel add --passes 2
# --max-dispatches 50`; the loop must end on its own with its sum checked, and the replay must
# reach its limit. A crash prints its backtrace when SEGV_REPORT names tests/gpu/segv_report.c's
# build. Run from the repository root on the GPU machine, binaries in .gpu-carry/, as root.
# Prints one line per run and `PASS`/`FAIL trace_then_replay`.
set -u
K=.gpu-carry/kreplay
OUT=${OUT:-/tmp/trace-then-replay}
PY=${PY:-/opt/torch/.venv/bin/python3}
RUNS=${RUNS:-5}
mkdir -p "$OUT"
windows() { grep -c '^window' "$OUT/loop.out" 2>/dev/null; }
upto() { while [ "$(windows)" -lt "$1" ]; do kill -0 "$2" 2>/dev/null || return 1; sleep 0.1; done; }
bad=0
for r in $(seq "$RUNS"); do
  LD_PRELOAD=${SEGV_REPORT:-} "$PY" -u tests/gpu/launch_windows.py 60 20000 > "$OUT/loop.out" 2> "$OUT/loop.err" &
  TP=$!
  upto 8 $TP && "$K" trace --gpu -p $TP --duration 2s --no-summary -o "$OUT/t.pftrace" 2> "$OUT/t.err"
  upto 30 $TP && timeout 60 "$K" replay -p $TP --kernel add --passes 2 --max-dispatches 50 -o "$OUT/r.pftrace" > "$OUT/r.out" 2> "$OUT/r.err"
  wait $TP; rc=$?
  replayed=$(grep -o '[0-9]* dispatches replayed' "$OUT/r.err" | head -1 | cut -d' ' -f1)
  echo "run $r: loop exit $rc, replayed ${replayed:-0}, $(grep -m1 'segv_report: signal' "$OUT/loop.err")"
  { [ $rc = 0 ] && grep -q '^done' "$OUT/loop.out" && [ "${replayed:-0}" = 50 ]; } || bad=$((bad + 1))
done
if [ $bad = 0 ]; then echo "PASS trace_then_replay ($RUNS runs)"; else echo "FAIL trace_then_replay ($bad of $RUNS runs)"; fi
exit $bad
