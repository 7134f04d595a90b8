#!/usr/bin/env bash
# `kreplay trace -p` attached to a warmed-up PyTorch training step (tests/gpu/train_step.py):
# the share of launches whose kernel is named (target: at least 99%), the calls per runtime
# layer, and the time from kreplay's start to its probes being attached. Run from the
# repository root on the GPU machine, with the binaries carried in .gpu-carry/ (`cargo xtask
# gpu-test --build-only`), as root. Prints `RESULT name value` lines and `PASS`/`FAIL name`.
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/cudart_attach}
PY=${PY:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3 )}
WARM_STEPS=${WARM_STEPS:-20}
mkdir -p "$OUT"
fails=0
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"

# The training loop, unbuffered so its step lines show its progress; far more steps than the
# trace lasts, stopped once the trace is written.
"$PY" -u tests/gpu/train_step.py 100000 > "$OUT/train.out" 2> "$OUT/train.err" &
TP=$!
for _ in $(seq 1 600); do
  [ "$(grep -c '^step ' "$OUT/train.out" 2>/dev/null)" -ge "$WARM_STEPS" ] && break
  kill -0 $TP 2>/dev/null || break
  sleep 0.2
done
if ! kill -0 $TP 2>/dev/null; then
  echo "FAIL train_step did not start"; cat "$OUT/train.err"; exit 1
fi
echo "warmed up: $(grep -c '^step ' "$OUT/train.out") steps; libcudart mapped from: $(grep -o '/[^ ]*libcudart[^ ]*' /proc/$TP/maps | sort -u | tr '\n' ' ')"

# The attach, 5 s of trace; the status line (no -q) says when the probes are attached.
t0=$(date +%s%N)
"$K" trace -o "$OUT/attach.pftrace" -p $TP --duration 5s 2> "$OUT/attach.err" &
KP=$!
attached_ms=""
for _ in $(seq 1 3000); do
  if grep -q "kreplay: tracing pid" "$OUT/attach.err" 2>/dev/null; then
    attached_ms=$(( ($(date +%s%N) - t0) / 1000000 )); break
  fi
  kill -0 $KP 2>/dev/null || break
  sleep 0.01
done
wait $KP; krc=$?
kill $TP 2>/dev/null; wait $TP 2>/dev/null
echo "RESULT attach_ms ${attached_ms:-none}"
[ $krc -eq 0 ] || { echo "FAIL kreplay exited $krc"; tail -20 "$OUT/attach.err"; fails=$((fails+1)); }

# Calls per layer: the summary's API rows (name, calls, ...).
awk '$1 ~ /^cuda/ && $2 ~ /^[0-9]+$/ {rt+=$2} $1 ~ /^cu[A-Z]/ && $2 ~ /^[0-9]+$/ {drv+=$2}
     END {printf "RESULT calls_cuda_runtime %d\nRESULT calls_cuda_driver %d\n", rt, drv}' "$OUT/attach.err"
for api in cudaLaunchKernel cudaLaunchKernelExC cudaLaunchCooperativeKernel cudaGraphLaunch cuLaunchKernel cuLaunchKernelEx cuGraphLaunch; do
  echo "RESULT calls_$api $(awk -v a=$api '$1==a {print $2}' "$OUT/attach.err" | head -1)"
done

# The per-kernel table: rows after the `kernel ... launches` header, the count last.
awk '/^kernel +launches$/ {on=1; next} /^events dropped/ {on=0} on {n=$NF; total+=n; if ($0 ~ /^\(kernel not resolved\)/) un+=n}
     END {printf "RESULT launches %d\nRESULT launches_unnamed %d\n", total, un;
          if (total > 0) printf "RESULT launches_named_pct %.2f\n", 100 * (total - un) / total}' "$OUT/attach.err" | tee "$OUT/share.txt"
pct=$(awk '/launches_named_pct/ {print $3}' "$OUT/share.txt")
if awk -v p="${pct:-0}" 'BEGIN {exit !(p >= 99)}'; then echo "PASS launches_named_pct ($pct >= 99)"; else echo "FAIL launches_named_pct: ${pct:-none} < 99"; fails=$((fails+1)); fi
echo "the five most launched kernels:"
awk '/^kernel +launches$/ {on=1; next} /^events dropped/ {on=0} on' "$OUT/attach.err" | head -5
grep -E "^events dropped|wrote" "$OUT/attach.err"
echo "failures: $fails"
exit $fails
