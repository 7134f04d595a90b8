#!/usr/bin/env bash
# `kreplay trace -p PID --gpu` attached to a running PyTorch training loop
# (tests/gpu/train_loop.py): kreplay-tool loaded into the running process, CUPTI activity for
# 5 s, detached; then a second attach (the tool found loaded); `kreplay replay -p --kernel gemm
# --passes 5 --max-dispatches 20` (CUPTI launch callbacks); then a kreplay killed with SIGKILL
# mid-trace. Checks the loss sequence equals a bare run's bit for bit, that GPU
# records arrived, and prints the time from kreplay's start to the first GPU record (target
# <= 1 s), the pause of the injection (target <= 50 ms) and the step time before, while and
# after each attach. Run from the repository root on the GPU machine, with the binaries carried
# in .gpu-carry/ (`cargo xtask gpu-test --build-only`; `libkreplay_tool.so` beside `kreplay`),
# as root. Prints `RESULT name value` lines and `PASS`/`FAIL name`.
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp/attach}
PY=${PY:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3 )}
STEPS=${STEPS:-6000}
# FIRST_FLAGS: more flags for the first attach (e.g. --keep-streams, to look at its streams).
WARM=${WARM:-200}
mkdir -p "$OUT"
rm -rf "$OUT"/*.streams
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
steps_done() { local n; n=$(grep -c '^step ' "$1" 2>/dev/null); echo "${n:-0}"; }
# The median of the `ms` field over steps [from, to).
median_ms() { awk -v a="$2" -v b="$3" '$1=="step" && $2>=a && $2<b {print $8}' "$1" | sort -n |
  awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "none"}'; }

# 1. The bare run: the loss sequence to match.
"$PY" -u tests/gpu/train_loop.py "$STEPS" > "$OUT/bare.out" 2> "$OUT/bare.err" || { echo "FAIL bare run"; tail "$OUT/bare.err"; exit 1; }

# 2. The same loop with three kreplays attached one after another.
# SEGV_REPORT: a crash reporter to preload into the loop (tests/gpu/segv_report.c).
LD_PRELOAD=${SEGV_REPORT:-} "$PY" -u tests/gpu/train_loop.py "$STEPS" > "$OUT/attached.out" 2> "$OUT/attached.err" &
TP=$!
wait_steps() { for _ in $(seq 1 3000); do [ "$(steps_done "$OUT/attached.out")" -ge "$1" ] && return 0; kill -0 $TP 2>/dev/null || return 1; sleep 0.05; done; return 1; }
wait_steps "$WARM" || { echo "FAIL train_loop did not start"; tail "$OUT/attached.err"; exit 1; }

# Attach for 5 s; the step index at its start and end bounds the "while" window.
a0=$(steps_done "$OUT/attached.out")
"$K" trace --gpu -p $TP --duration 5s --no-summary ${FIRST_FLAGS:-} -o "$OUT/first.pftrace" 2> "$OUT/first.err"
krc=$?
a1=$(steps_done "$OUT/attached.out")
cat "$OUT/first.err"
check first_attach_exit "$krc" 0
held=$(grep -o 'its thread held [0-9.]* ms' "$OUT/first.err" | awk '{print $4}')
ready=$(grep -o 'ready after [0-9.]* ms' "$OUT/first.err" | awk '{print $3}')
first=$(grep -o 'the first [0-9]* ms after kreplay started' "$OUT/first.err" | awk '{print $3}')
records=$(grep -o 'GPU timeline off: [0-9]* GPU records' "$OUT/first.err" | awk '{print $4}')
echo "RESULT injection_pause_ms ${held:-none}"
echo "RESULT timeline_ready_ms ${ready:-none}"
echo "RESULT first_gpu_record_ms ${first:-none}"
echo "RESULT gpu_records ${records:-0}"
grep -q 'kreplay-tool loaded' "$OUT/first.err"; check first_attach_loaded_the_tool $? 0
[ "${records:-0}" -gt 0 ]; check gpu_records_present $? 0
awk -v f="${first:-99999}" 'BEGIN {exit !(f <= 1000)}'; check first_gpu_record_within_1s $? 0
awk -v h="${held:-99999}" 'BEGIN {exit !(h <= 50)}'; check injection_pause_within_50ms $? 0

# A pause, then a second attach: the tool is found loaded and serves a new session.
wait_steps $((a1 + 100))
"$K" trace --gpu -p $TP --duration 3s --no-summary -o "$OUT/second.pftrace" 2> "$OUT/second.err"
check second_attach_exit $? 0
grep -q 'kreplay-tool already loaded' "$OUT/second.err"; check second_attach_reused_the_tool $? 0
grep 'GPU timeline' "$OUT/second.err"

# Replay in the running loop: 20 launches of kernels whose name holds "gemm", 5 passes each; the
# session ends by itself once the 20th replay is written. Then the steps go on as before.
wait_steps $(( $(steps_done "$OUT/attached.out") + 100 ))
r0=$(steps_done "$OUT/attached.out")
"$K" replay -p $TP --kernel gemm --passes 5 --max-dispatches 20 -o "$OUT/replay.pftrace" > "$OUT/replay.out" 2> "$OUT/replay.err"
check replay_exit $? 0
r1=$(steps_done "$OUT/attached.out")
cat "$OUT/replay.err"
sed -n '/^kernel /,/^$/p' "$OUT/replay.out"
grep -q 'dispatches replayed (--max-dispatches)' "$OUT/replay.err"; check replay_ended_at_its_limit $? 0
# The closing line: `kreplay: N dispatches replayed (P passes); ...`.
read -r replayed passes <<< "$(cat "$OUT/replay.out" "$OUT/replay.err" |
  sed -n 's/^kreplay: \([0-9]*\) dispatches replayed (\([0-9]*\) passes).*/\1 \2/p' | head -1)"
check replayed_dispatches "${replayed:-0}" 20
check replay_passes "${passes:-0}" 100
echo "RESULT replay_session_steps $((r1 - r0))"
wait_steps $((r1 + 150))
r2=$(steps_done "$OUT/attached.out")

# A replay session killed with SIGKILL (no --max-dispatches): the tool stops replaying alone;
# the loss check below shows the steps it replayed computed what they compute without it.
"$K" replay -p $TP --kernel gemm --passes 3 -o "$OUT/replay-killed.pftrace" > /dev/null 2> "$OUT/replay-killed.err" &
KP=$!
for _ in $(seq 1 600); do grep -q 'replaying' "$OUT/replay-killed.err" 2>/dev/null && break; sleep 0.05; done
sleep 1
kill -KILL $KP; wait $KP 2>/dev/null
rm -rf "$OUT"/replay-killed.pftrace.streams

# A kreplay killed with SIGKILL mid-trace: the tool sees its socket close and stops alone.
b0=$(steps_done "$OUT/attached.out")
"$K" trace --gpu -p $TP --no-summary -o "$OUT/killed.pftrace" 2> "$OUT/killed.err" &
KP=$!
for _ in $(seq 1 600); do grep -q 'kreplay: tracing pid' "$OUT/killed.err" 2>/dev/null && break; sleep 0.05; done
sleep 2
kill -KILL $KP; wait $KP 2>/dev/null
# A third attach works only if the killed session ended (else: another kreplay is attached).
wait_steps $(( $(steps_done "$OUT/attached.out") + 50 ))
"$K" trace --gpu -p $TP --duration 2s --no-summary -o "$OUT/after-kill.pftrace" 2> "$OUT/after-kill.err"
grep -q 'GPU timeline on' "$OUT/after-kill.err"; check attach_after_sigkill $? 0
c1=$(steps_done "$OUT/attached.out")
wait $TP; check train_loop_exit $? 0

# The loss sequence, bit for bit; the step times before, while and after the first attach.
cut -d' ' -f1-6 "$OUT/bare.out" | grep '^step ' > "$OUT/bare.loss"
cut -d' ' -f1-6 "$OUT/attached.out" | grep '^step ' > "$OUT/attached.loss"
check loss_steps "$(wc -l < "$OUT/attached.loss")" "$STEPS"
if cmp -s "$OUT/bare.loss" "$OUT/attached.loss"; then echo "PASS loss_bits_identical"; else echo "FAIL loss_bits_identical"; diff "$OUT/bare.loss" "$OUT/attached.loss" | head -5; fails=$((fails+1)); fi
# Each window side by side with the bare run's same steps: the machine's drift over a run
# (clocks, other tenants) shows in both, what kreplay leaves behind only in the attached one.
window() {
  local a b
  a=$(median_ms "$OUT/attached.out" "$2" "$3"); b=$(median_ms "$OUT/bare.out" "$2" "$3")
  echo "RESULT step_ms_$1 attached $a bare $b ratio $(awk -v a="$a" -v b="$b" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "none"}') steps $2-$3"
}
echo "RESULT step_ms_bare $(median_ms "$OUT/bare.out" "$WARM" "$STEPS")"
window before 50 "$a0"
window while "$((a0 + 5))" "$a1"
window after "$((a1 + 5))" "$((a1 + 100))"
window while_replay "$r0" "$r1"
window after_replay "$((r1 + 20))" "$r2"
window end "$c1" "$STEPS"
echo "RESULT steps_while_attached $((a1 - a0))"
rm -rf "$OUT"/killed.pftrace.streams
echo "failures: $fails"
exit $fails
