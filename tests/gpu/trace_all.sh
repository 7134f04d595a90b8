#!/usr/bin/env bash
# `kreplay trace --all` on the H200: a PyTorch training step started after kreplay, whose CUDA
# runtime comes from the virtualenv's `nvidia` wheel (a place no process has mapped), must be
# traced from its first call: its per-API call counts equal those of `kreplay trace -- CMD`,
# which probes the command from its first instruction. Also measures what discovery costs:
# kreplay's own CPU while the host idles (with and without 2000 more processes), a process
# start bare and traced, the holds, and the mapping check's time per `mmap`. Run from the
# repository root, binaries in .gpu-carry/. Prints `RESULT name value` and `PASS`/`FAIL name`.
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
OUT=${OUT:-/tmp/trace_all}
PY=${VENV:-/opt/torch/.venv}/bin/python
mkdir -p "$OUT"
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(ls /proc | grep -c '^[0-9]') processes, $(date -u)"
STEP="tests/gpu/train_step.py 2"
# The API rows of a summary (name calls), CUDA only.
rows() { awk '$1 ~ /^cu/ && $2 ~ /^[0-9]+$/ {print $1, $2}' "$1" | sort; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
execs() { local t0; t0=$(date +%s%N); for _ in $(seq 300); do /bin/true; done; echo $(( ($(date +%s%N) - t0) / 300000 )); }

# Reference: the same step under `-- CMD`.
$K trace -o "$OUT/cmd.pftrace" -- $PY $STEP > "$OUT/cmd.out" 2> "$OUT/cmd.err"
rows "$OUT/cmd.err" > "$OUT/cmd.rows"
rm -rf "$OUT/cmd.pftrace"

measure_all() { # $1: label
  local label=$1 k t0 c0
  echo "RESULT ${label}_exec_bare_us $(execs)"
  $K trace --all --bpf-stats -o "$OUT/all.pftrace" > "$OUT/$label.out" 2> "$OUT/$label.err" &
  k=$!
  t0=$(date +%s)
  until grep -q "kreplay: tracing" "$OUT/$label.err"; do sleep 0.1; [ $(( $(date +%s) - t0 )) -gt 60 ] && break; done
  grep "kreplay: tracing" "$OUT/$label.err"
  sleep 1
  c0=$(cpu $k); sleep 10
  echo "RESULT ${label}_kreplay_idle_cpu_pct $(( ($(cpu $k) - c0) * 100 / $(getconf CLK_TCK) / 10 ))"
  echo "RESULT ${label}_exec_traced_us $(execs)"
  if [ "$label" = quiet ]; then
    t0=$(date +%s%N)
    $PY $STEP > "$OUT/step.out" 2> "$OUT/step.err"
    echo "RESULT step_under_all_s $(( ($(date +%s%N) - t0) / 1000000 ))e-3"
  fi
  kill -INT $k; wait $k
  grep -E "new runtime library files|bpf program time: map_hook|warning|error" "$OUT/$label.err"
  rm -rf "$OUT/all.pftrace"
}
measure_all quiet
rows "$OUT/quiet.err" > "$OUT/all.rows"
echo "--- per-API calls: -- CMD | --all"
join -a1 -a2 -e- -o 0,1.2,2.2 "$OUT/cmd.rows" "$OUT/all.rows"
check same_counts_as_cmd "$(diff -q "$OUT/cmd.rows" "$OUT/all.rows" > /dev/null && echo same || echo different)" same
check launches_seen "$(grep -c . "$OUT/all.rows" | awk '{print ($1 > 5) ? "yes" : "no"}')" yes
for _ in $(seq 2000); do sleep 3600 & done 2> /dev/null
sleep 2
measure_all crowd
kill $(jobs -p) 2> /dev/null
echo "failures: $fails"
