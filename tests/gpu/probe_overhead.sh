#!/bin/bash
# probe_overhead.sh - issue 4's probe-overhead comparison on a machine without cargo (the GPU
# machine), with the kreplay binary carried in .gpu-carry/ (`cargo xtask gpu-test --build-only`).
# It takes the simulated runtime and the two loops from .gpu-carry/sim/ (or, without it, builds
# them, which needs Debian's ROCm headers), then runs what `cargo xtask bench --only probe` runs (xtask/src/bench.rs, xtask/src/paired.rs):
#   separate runs: ROUNDS rounds, interleaved, of `callloop 1 CALLS` unprobed, under
#     `kreplay probe --bare` and under `kreplay trace`;
#   paired runs: `pairloop` with `kreplay probe --bare` on the twin library's arm B and an empty
#     probe pair (calibration) or `kreplay trace -p` on arm A.
# KREPLAY_BENCH_CPU=N pins both loops to CPU N (tests/bench/pin.h); ROUNDS, CALLS, PAIRS, CHUNK
# and TRACE_RUNS size the runs. Prints every raw figure, then the ratios. Run as root from the
# repository root.
set -euo pipefail
ROUNDS=${ROUNDS:-9}
CALLS=${CALLS:-200000}
PAIRS=${PAIRS:-200}
CHUNK=${CHUNK:-1000}
TRACE_RUNS=${TRACE_RUNS:-5}
ROOT=$(pwd)
K=${KREPLAY:-$ROOT/.gpu-carry/kreplay}
W=$(mktemp -d /tmp/kreplay-probe-overhead.XXXXXX)
trap 'rm -rf "$W"' EXIT
[ -x "$K" ] || { echo "no $K: run cargo xtask gpu-test --build-only first" >&2; exit 2; }
if [ -d "$ROOT/.gpu-carry/sim" ]; then
  # Built where Debian's ROCm headers are (`cargo xtask gpu-test --build-only`): the simulated
  # runtime and both loops build against them.
  SIMLIB=$ROOT/.gpu-carry/sim
  cp "$SIMLIB/callloop" "$SIMLIB/pairloop" "$W/"
  export LD_LIBRARY_PATH=$SIMLIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  SIM=$ROOT/tests/rocm-sim
  make -s -C "$SIM" -j8 hsa hip >/dev/null
  SIMLIB=$SIM/build
  for p in callloop pairloop; do
    cc -std=gnu11 -O1 -pthread -rdynamic -I"$SIM/include" -I"$SIM/workloads" -o "$W/$p" \
      "$ROOT/tests/bench/$p.c" -L"$SIMLIB" -l:libamdhip64.so.6 -l:libhsa-runtime64.so.1 \
      -Wl,-rpath,"$SIMLIB" -ldl
  done
fi
HIP=$SIMLIB/libamdhip64.so.6
cp "$HIP" "$W/libkrtwin.so"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"

field() { awk -v k="$1" '$1 == k { print $2 }'; }

sep_round() { # MODE -> "wall cpu"
  local out
  case $1 in
    plain) out=$("$W/callloop" 1 "$CALLS") ;;
    bare) out=$("$K" probe --bare --lib "$HIP" --symbol hipStreamSynchronize -- "$W/callloop" 1 "$CALLS" 2>/dev/null) ;;
    trace) out=$("$K" trace -q -o "$W/sep.pftrace" -- "$W/callloop" 1 "$CALLS" 2>/dev/null) ;;
  esac
  echo "$(echo "$out" | field ns_per_call:) $(echo "$out" | field cpu_ns_per_call:)"
}

paired_run() { # ARM (bare|trace) -> pair lines on stdout
  local gate=$W/pair.gate
  rm -f "$gate" "$gate.pid" "$W/inner.err"
  "$K" probe --bare --lib "$W/libkrtwin.so" --symbol hipStreamSynchronize -- \
    "$W/pairloop" "$W/libkrtwin.so" "$PAIRS" "$CHUNK" "$gate" >"$W/pairs.txt" 2>/dev/null &
  local outer=$!
  for _ in $(seq 3000); do [ -s "$gate.pid" ] && break; sleep 0.01; done
  local pid
  pid=$(cat "$gate.pid")
  if [ "$1" = bare ]; then
    "$K" probe --bare --lib "$HIP" --symbol hipStreamSynchronize -p "$pid" >/dev/null 2>"$W/inner.err" &
  else
    "$K" trace -o "$W/paired.pftrace" -p "$pid" 2>"$W/inner.err" &
  fi
  local inner=$!
  for _ in $(seq 3000); do grep -q "; stop with Ctrl-C" "$W/inner.err" && break; sleep 0.01; done
  grep -q "; stop with Ctrl-C" "$W/inner.err" || { echo "arm A never attached" >&2; cat "$W/inner.err" >&2; exit 1; }
  touch "$gate"
  wait "$outer"
  wait "$inner"
  if [ "$1" = trace ]; then
    grep -E "^events dropped:|^reader cpu:" "$W/inner.err" | sed 's/^/  trace: /' >&2
  fi
  grep '^pair ' "$W/pairs.txt"
}

echo "== separate runs: $ROUNDS rounds of callloop 1 $CALLS (wall ns/call, CPU ns/call)"
for r in $(seq "$ROUNDS"); do
  for m in plain bare trace; do echo "sep $r $m $(sep_round $m)"; done
done | tee "$W/sep.txt"

echo "== paired runs: $PAIRS pairs of $CHUNK calls (A ns/call, B ns/call)"
"$W/pairloop" "$W/libkrtwin.so" "$PAIRS" "$CHUNK" | sed 's/^pair/plain 0 plain/' >"$W/paired.txt"
n=1
for arm in bare $(for _ in $(seq "$TRACE_RUNS"); do echo trace; done); do
  paired_run "$arm" | sed "s/^pair/paired $n $arm/" >>"$W/paired.txt"
  n=$((n + 1))
done
"$W/pairloop" "$W/libkrtwin.so" "$PAIRS" "$CHUNK" | sed 's/^pair/plain 99 plain/' >>"$W/paired.txt"
cat "$W/paired.txt"

python3 - "$W/sep.txt" "$W/paired.txt" <<'EOF'
import statistics as st, sys, collections
sep = collections.defaultdict(list)
for l in open(sys.argv[1]):
    _, r, m, w, c = l.split()
    sep[m].append((float(w), float(c)))
med = lambda v: st.median(v)
p, b, t = (med([x[0] for x in sep[m]]) for m in ("plain", "bare", "trace"))
pc, bc, tc = (med([x[1] for x in sep[m]]) for m in ("plain", "bare", "trace"))
print(f"separate runs (medians): unprobed {p:.0f}, bare {b:.0f}, trace {t:.0f} ns/call; "
      f"trace added / bare added: wall {(t - p) / (b - p):.3f}, CPU {(tc - pc) / (bc - pc):.3f}")
runs = collections.defaultdict(list)
plain = []
for l in open(sys.argv[2]):
    kind, n, arm, a, bb = l.split()
    if kind == "plain":
        plain.append((float(a), float(bb)))
    else:
        runs[(int(n), arm)].append((float(a), float(bb)))
pa, pb = med([x[0] for x in plain]), med([x[1] for x in plain])
print(f"paired: unprobed A {pa:.1f}, B {pb:.1f} ns/call")
traced = []
for (n, arm), v in sorted(runs.items()):
    r = sorted((a - pa) / (bb - pb) for a, bb in v)
    q = lambda f: r[int((len(r) - 1) * f)]
    print(f"paired run {n} ({arm} on A): A {med([x[0] for x in v]):.0f}, B {med([x[1] for x in v]):.0f} ns/call; "
          f"A added / B added median {q(0.5):.3f} (quartiles {q(0.25):.3f}-{q(0.75):.3f})")
    if arm == "trace":
        traced.append(q(0.5))
print(f"paired: tracing adds {med(traced):.3f}x the bare probe cost (runs {min(traced):.3f}-{max(traced):.3f})")
EOF
