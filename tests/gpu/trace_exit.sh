#!/usr/bin/env bash
# How fast `kreplay trace` attaches and ends on the H200, with PyTorch: the time from the traced
# program's exit (its last act writes the time) to kreplay's exit, from Ctrl-C to exit, and
# from a --duration's end to exit, with uprobe-multi links (the default) beside one perf event
# per function (KREPLAY_UPROBE_MULTI=0); the number of probes and the attach time kreplay
# reports. Run from the repository root, binaries in .gpu-carry/ (C=DIR for another build).
# Prints `RESULT name value` lines.
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
OUT=${OUT:-/tmp}
mkdir -p "$OUT"
PY=${PY:-/opt/torch/.venv/bin/python3}
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
now_ns() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
# A short PyTorch program whose last act writes the wall-clock time in ns to $1.
prog="import sys, time, torch
x = torch.randn(1024, 1024, device='cuda'); y = x @ x; torch.cuda.synchronize()
open(sys.argv[1], 'w').write(str(time.time_ns()))"

# The program's own shutdown after its last line (CUDA context teardown) is in every
# exit_after_program figure: the bare runs measure it.
for round in 1 2 3; do
  t0=$(now_ns); $PY -c "$prog" $OUT/exit_bare.ns; t1=$(now_ns)
  echo "RESULT bare_run_s $(secs $t0 $t1)"
  echo "RESULT bare_exit_after_program_s $(secs $(cat $OUT/exit_bare.ns) $t1)"
done
for round in 1 2 3; do
  for mode in multi perf; do
    env=""; [ $mode = perf ] && env="KREPLAY_UPROBE_MULTI=0"
    t0=$(now_ns)
    env $env $K trace -o $OUT/exit_$mode.pftrace -- $PY -c "$prog" $OUT/exit_$mode.ns 2> $OUT/exit_$mode.err
    t1=$(now_ns)
    end=$(cat $OUT/exit_$mode.ns)
    line=$(grep "kreplay: tracing" $OUT/exit_$mode.err)
    echo "RESULT ${mode}_probes $(echo "$line" | sed -E 's/.*: ([0-9]+) probes attached in ([0-9]+) ms.*/\1/')"
    echo "RESULT ${mode}_attach_ms $(echo "$line" | sed -E 's/.*probes attached in ([0-9]+) ms.*/\1/')"
    echo "RESULT ${mode}_run_s $(secs $t0 $t1)"
    echo "RESULT ${mode}_exit_after_program_s $(secs $end $t1)"
  done
done

# Attached to a running PyTorch loop: Ctrl-C, then --duration.
mkfifo $OUT/exit_go 2>/dev/null
$PY tests/gpu/torch_loop.py 2000000 --wait < $OUT/exit_go > $OUT/exit_loop.out &
TP=$!
exec 7> $OUT/exit_go
for i in $(seq 1 120); do grep -q ready $OUT/exit_loop.out 2>/dev/null && break; sleep 0.5; done
echo go >&7
for mode in multi perf; do
  env=""; [ $mode = perf ] && env="KREPLAY_UPROBE_MULTI=0"
  env $env $K trace -o $OUT/exit_pid_$mode.pftrace -p $TP 2> $OUT/exit_pid_$mode.err &
  KP=$!
  for i in $(seq 1 200); do grep -q "kreplay: tracing" $OUT/exit_pid_$mode.err 2>/dev/null && break; sleep 0.05; done
  sleep 2
  t0=$(now_ns); kill -INT $KP; wait $KP; t1=$(now_ns)
  line=$(grep "kreplay: tracing" $OUT/exit_pid_$mode.err)
  echo "RESULT pid_${mode}_probes $(echo "$line" | sed -E 's/.*: ([0-9]+) probes attached in ([0-9]+) ms.*/\1/')"
  echo "RESULT pid_${mode}_attach_ms $(echo "$line" | sed -E 's/.*probes attached in ([0-9]+) ms.*/\1/')"
  echo "RESULT pid_${mode}_ctrl_c_exit_s $(secs $t0 $t1)"
  grep -E "^cuLaunchKernel|dropped" $OUT/exit_pid_$mode.err
  t0=$(now_ns)
  env $env $K trace -o $OUT/exit_dur_$mode.pftrace --duration 2s -p $TP 2> $OUT/exit_dur_$mode.err
  t1=$(now_ns)
  echo "RESULT pid_${mode}_duration_2s_run_s $(secs $t0 $t1)"
done
exec 7>&-
kill $TP 2>/dev/null; wait $TP 2>/dev/null
