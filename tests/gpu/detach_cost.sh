#!/usr/bin/env bash
# What a finished attach leaves in a running CUDA process, measured where host overhead shows:
# tests/gpu/launch_windows.py's tiny-kernel loop reports µs per launch per window; kreplay
# joins it with `trace -p --gpu` (3 s), again, then `replay -p --kernel add --passes 2
# --max-dispatches 50`, with WAIT windows between. The same loop then runs once more with no
# kreplay (the control: the machine's drift over the same windows). Prints, per phase, the
# median µs per launch of the attached run and of the control over the same windows, and
# their ratio: a tool that leaves cost behind shows as "after" ratios above "before"'s.
# Run from the repository root on the GPU machine, binaries in .gpu-carry/, as root.
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/detach}
PY=${PY:-/opt/torch/.venv/bin/python3}
PER=${PER:-20000}
WAIT=${WAIT:-60}
WINDOWS=${WINDOWS:-$((WAIT * 5))}
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
done_w() { local n; n=$(grep -c '^window ' "$1" 2>/dev/null); echo "${n:-0}"; }
"$PY" -u tests/gpu/launch_windows.py "$WINDOWS" "$PER" > "$OUT/attached.out" 2> "$OUT/attached.err" &
TP=$!
upto() { while [ "$(done_w "$OUT/attached.out")" -lt "$1" ]; do kill -0 $TP 2>/dev/null || return 1; sleep 0.05; done; }
upto "$WAIT" || { echo "FAIL loop did not run"; tail "$OUT/attached.err"; exit 1; }
p1=$(done_w "$OUT/attached.out")
"$K" trace --gpu -p $TP --duration 3s --no-summary -o "$OUT/t1.pftrace" 2> "$OUT/t1.err" || echo "FAIL first trace"
p2=$(done_w "$OUT/attached.out")
upto $((p2 + WAIT))
"$K" trace --gpu -p $TP --duration 3s --no-summary -o "$OUT/t2.pftrace" 2> "$OUT/t2.err" || echo "FAIL second trace"
p3=$(done_w "$OUT/attached.out")
upto $((p3 + WAIT))
"$K" replay -p $TP --kernel add --passes 2 --max-dispatches 50 -o "$OUT/r.pftrace" > "$OUT/r.out" 2> "$OUT/r.err" || echo "FAIL replay"
p4=$(done_w "$OUT/attached.out")
wait $TP || echo "FAIL attached loop exit"
grep -q '^done' "$OUT/attached.out" && echo "PASS attached_loop_sum"
"$PY" -u tests/gpu/launch_windows.py "$WINDOWS" "$PER" > "$OUT/control.out" 2> "$OUT/control.err" || echo "FAIL control"
grep -E 'GPU timeline (on|off)|replayed' "$OUT"/t1.err "$OUT"/t2.err "$OUT"/r.err
med() { awk -v a="$2" -v b="$3" '$1=="window" && $2>=a && $2<b {print $4}' "$1" | sort -n |
  awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "none"}'; }
phase() {
  local a c
  a=$(med "$OUT/attached.out" "$2" "$3"); c=$(med "$OUT/control.out" "$2" "$3")
  echo "RESULT us_per_launch_$1 attached $a control $c ratio $(awk -v a="$a" -v c="$c" 'BEGIN {if (c > 0) printf "%.3f", a / c; else print "none"}') windows $2-$3"
}
phase before 5 "$p1"
phase after_trace1 "$((p2 + 2))" "$((p2 + WAIT))"
phase after_trace2 "$((p3 + 2))" "$((p3 + WAIT))"
phase after_replay "$((p4 + 2))" "$WINDOWS"
