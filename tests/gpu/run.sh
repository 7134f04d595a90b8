#!/usr/bin/env bash
# kreplay on the GPU machine. Run from the repository root there, with the binaries built here
# and carried in .gpu-carry/ (`cargo xtask gpu-test --build-only` puts them there).
# Prints one `RESULT name value` line per measurement and `PASS`/`FAIL name` per check.
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp}
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"

# 1. The seed's contention benchmark on 16 cores (issue 6).
if [ -x $C/contention ]; then
  $C/contention 2>&1 | tee $OUT/contention.txt
fi

# 2. kreplay trace on PyTorch: -- CMD and -p PID; cuLaunchKernel count = launches made.
N=2000
count() { awk '$1=="cuLaunchKernel"{print $2}' "$1"; }
for n in $N $((N + 1000)); do
  $K trace -q -o $OUT/torch_cmd_$n.pftrace -- python3 tests/gpu/torch_loop.py $n > $OUT/torch_cmd_$n.out 2> $OUT/torch_cmd_$n.err
  cat $OUT/torch_cmd_$n.out; grep -E "^cu|dropped|wrote|error" $OUT/torch_cmd_$n.err
done
# Start-up launches (tensor fills, warm-up) are traced too, from the first instruction; the
# difference between two runs is exactly the launches the loop added.
a=$(count $OUT/torch_cmd_$N.err); b=$(count $OUT/torch_cmd_$((N + 1000)).err)
echo "RESULT torch_trace_cmd_cuLaunchKernel_N${N} ${a:-0}"
check torch_trace_cmd_cuLaunchKernel_difference "$(( ${b:-0} - ${a:-0} ))" 1000

mkfifo $OUT/go 2>/dev/null
python3 tests/gpu/torch_loop.py $N --wait < $OUT/go > $OUT/torch_pid.out &
TP=$!
exec 7> $OUT/go
for i in $(seq 1 120); do grep -q ready $OUT/torch_pid.out 2>/dev/null && break; sleep 0.5; done
$K trace -q -o $OUT/torch_pid.pftrace -p $TP 2> $OUT/torch_pid.err &
KP=$!
sleep 3
echo go >&7
exec 7>&-
wait $TP; wait $KP
grep -E "^cu|dropped|wrote" $OUT/torch_pid.err
got=$(awk '$1=="cuLaunchKernel"{print $2}' $OUT/torch_pid.err)
check torch_trace_pid_cuLaunchKernel "${got:-0}" "$N"

# 3. Per-launch overhead on the same loop: plain, kreplay trace, torch.profiler; 3 rounds.
for r in 1 2 3; do
  echo "RESULT plain_us_per_launch $(python3 tests/gpu/torch_loop.py 20000 | awk '/us_per_launch/{print $2}')"
  echo "RESULT kreplay_trace_us_per_launch $($K trace -q -o $OUT/ovh.pftrace -- python3 tests/gpu/torch_loop.py 20000 2>/dev/null | awk '/us_per_launch/{print $2}')"
  echo "RESULT torch_profiler_us_per_launch $(python3 tests/gpu/torch_loop.py 20000 --profiler 2>/dev/null | awk '/us_per_launch/{print $2}')"
done
echo "failures: $fails"
exit $fails
