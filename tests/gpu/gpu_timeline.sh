#!/usr/bin/env bash
# The GPU timeline on the H200 (CUDA, through CUPTI), side by side in one run:
# - tests/gpu/train_step.py's 4-layer transformer training step (forward, backward, AdamW),
#   STEPS steps, run plain, under `kreplay trace --no-gpu`, under `kreplay trace --gpu`, and under
#   torch.profiler with CUDA activity only and with CPU+CUDA (tests/gpu/timeline_step.py);
# - the cost per launch: tests/gpu/torch_loop.py's LAUNCHES tiny kernels plain, under
#   `trace --no-gpu`, `trace --gpu` and torch.profiler (CUDA only), ROUNDS interleaved rounds.
# Run from the repository root there, binaries in .gpu-carry/ (tests/gpu/run.sh's conventions):
#   bash tests/gpu/gpu_timeline.sh
# Prints `RESULT name value` lines and `PASS`/`FAIL name` checks (exit status 1 when one fails):
# the trace's GPU kernel slices (dispatches) equal the launches its API slices show; every kernel
# and copy has its flow; the top 10 kernels' GPU totals under kreplay agree with torch.profiler's
# (CUDA only, the same steps) within 5%. Leaves the merged trace in $OUT/gt2.pftrace for
# tests/gpu/timeline_order.py (run where the Perfetto protos are: decode_trace.py first).
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp}
PY=${PY:-/opt/torch/.venv/bin/python3}
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-3}
LAUNCHES=${LAUNCHES:-30000}
# More flags for the checked `trace --gpu` run (e.g. --cupti-launches).
GPU_FLAGS=${GPU_FLAGS:-}
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
export KREPLAY_TOOL_LIB=$PWD/$C/libkreplay_tool.so
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH

# Step times: each arm once, STEPS steps.
echo "== plain"
$PY tests/gpu/train_step.py $STEPS > $OUT/plain.out 2>&1
echo "== kreplay trace --no-gpu"
$K trace --no-gpu -q -o $OUT/ng.pftrace -- $PY tests/gpu/train_step.py $STEPS > $OUT/ng.out 2> $OUT/ng.err
rm -f $OUT/ng.pftrace
echo "== kreplay trace --gpu $GPU_FLAGS"
# shellcheck disable=SC2086 # GPU_FLAGS is a list of flags
$K trace --gpu $GPU_FLAGS -q --keep-streams -o $OUT/gt.pftrace -- $PY tests/gpu/train_step.py $STEPS > $OUT/kr.out 2> $OUT/kr.err
rc=$?
grep -E "CUPTI|error|warning|dropped|wrote" $OUT/kr.err | head -5
check trace_exit "$rc" 0
$K merge $OUT/gt.pftrace.streams -o $OUT/gt2.pftrace > $OUT/merge.out 2> $OUT/merge.err
tail -1 $OUT/merge.err
rm -rf $OUT/gt.pftrace $OUT/gt.pftrace.streams
echo "== torch.profiler (CUDA only)"
$PY tests/gpu/timeline_step.py $STEPS --cuda-only > $OUT/tpc.out 2>&1
echo "== torch.profiler (CPU+CUDA)"
$PY tests/gpu/timeline_step.py $STEPS > $OUT/tp.out 2>&1
# Cost per launch: tests/gpu/torch_loop.py's tiny kernels, the arms interleaved, ROUNDS rounds.
for r in $(seq $ROUNDS); do
  for arm in plain no_gpu gpu torch_cuda; do
    case $arm in
      plain) $PY tests/gpu/torch_loop.py $LAUNCHES ;;
      no_gpu) $K trace --no-gpu -q -o $OUT/l.pftrace -- $PY tests/gpu/torch_loop.py $LAUNCHES 2> /dev/null ;;
      gpu) $K trace --gpu -q -o $OUT/l.pftrace -- $PY tests/gpu/torch_loop.py $LAUNCHES 2> /dev/null ;;
      torch_cuda) $PY tests/gpu/torch_loop.py $LAUNCHES --profiler-cuda ;;
    esac | awk -v r=$r -v a=$arm '/us_per_launch/{print "LOOP", r, a, $2}'
    rm -rf $OUT/l.pftrace
  done
done > $OUT/loop.txt
cat $OUT/loop.txt

$PY - "$OUT" <<'PYEOF'
import re, sys
out = sys.argv[1]
err = open(f"{out}/kr.err").read()
merge = open(f"{out}/merge.err").read()
def steps(path):
    m = re.search(r"step_ms: (.*)", open(path).read())
    return [float(x) for x in m.group(1).split(",")] if m else []
med = {}
for arm, p in [("plain", "plain.out"), ("kreplay_no_gpu", "ng.out"), ("kreplay_gpu", "kr.out"),
               ("torch_profiler_cuda", "tpc.out"), ("torch_profiler_cpu_cuda", "tp.out")]:
    s = steps(f"{out}/{p}")
    later = sorted(s[1:]) if len(s) > 1 else s
    med[arm] = later[len(later) // 2] if later else float("nan")
    print(f"RESULT step_ms_median_after_first_{arm} {med[arm]:.2f}")
for arm in list(med)[1:]:
    print(f"RESULT step_ratio_{arm} {med[arm] / med['plain']:.3f}")
# Per launch: each arm's added µs over plain in the same round, median over rounds.
rounds = {}
for line in open(f"{out}/loop.txt"):
    _, r, arm, us = line.split()
    rounds.setdefault(r, {})[arm] = float(us)
for arm in ("no_gpu", "gpu", "torch_cuda"):
    added = sorted(v[arm] - v["plain"] for v in rounds.values() if arm in v and "plain" in v)
    if added:
        print(f"RESULT launch_added_us_{arm} {added[len(added) // 2]:.2f} (rounds: {', '.join(f'{a:.2f}' for a in added)})")
timeline = sorted(v["gpu"] - v["no_gpu"] for v in rounds.values() if "gpu" in v and "no_gpu" in v)
if timeline:
    print(f"RESULT launch_added_us_gpu_over_no_gpu {timeline[len(timeline) // 2]:.2f}")
# Launches the probes saw: the trace summary's per-kernel launch table.
launches = 0
sect = re.search(r"\nkernel +launches\n(.*?)\n(?:events dropped|still allocated|GPU time)", err, re.S)
if sect:
    for line in sect.group(1).splitlines():
        m = re.search(r"(\d+)\s*$", line)
        if m:
            launches += int(m.group(1))
m = re.search(r"(\d+) dispatches, (\d+) copies, (\d+) flows", merge)
disp, copies, flows = (int(x) for x in m.groups()) if m else (-1, -1, -1)
print(f"RESULT launches {launches}")
print(f"RESULT dispatches {disp}")
print(f"RESULT copies {copies}")
print(f"RESULT flows {flows}")
ok = disp == launches
print(f"{'PASS' if ok else 'FAIL'} dispatches_equal_launches ({disp} vs {launches})")
linked = flows == disp + copies
ok = ok and linked
print(f"{'PASS' if linked else 'FAIL'} every_gpu_record_has_its_flow ({flows} flows, {disp + copies} GPU records)")
# Per-kernel totals: kreplay's table (µs) against torch.profiler's. Demanglers print integer
# template arguments differently (`(unsigned long)1` here, `1ul` in CUPTI's names): compare
# names with both spellings reduced to the number.
def norm(s):
    s = re.sub(r"\((?:unsigned |signed )?(?:long long|long|int|short|char)\)(-?\d+)", r"\1", s)
    s = re.sub(r"\b(\d+)(?:ull|ll|ul|u|l)\b", r"\1", s)
    return " ".join(s.split())
kr = {}
for line in err.splitlines():
    m = re.match(r"\s+[\d.]+%\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(.*)$", line)
    if m:
        kr[norm(m.group(3))] = (int(m.group(1)), float(m.group(2)))
tp = {}
for line in open(f"{out}/tpc.out"):
    m = re.match(r"kernel_total (\d+) ([\d.]+) (.*)$", line.rstrip("\n"))
    if m:
        tp[norm(m.group(3))] = (int(m.group(1)), float(m.group(2)))
top = sorted(tp.items(), key=lambda kv: -kv[1][1])[:10]
worst, missing = 0.0, 0
for name, (n, us) in top:
    k = kr.get(name)
    if k is None:
        # Demanglers differ in details: fall back to the unique kreplay name with the same
        # qualified function name (before its template or argument list).
        base = lambda s: re.split(r"[<(]", s.replace("void ", "", 1), 1)[0].strip()
        cands = [v for kn, v in kr.items() if base(kn) == base(name)]
        k = cands[0] if len(cands) == 1 else None
    if k is None:
        missing += 1
        print(f"TOP missing in kreplay: {name[:100]}")
        continue
    dev = abs(k[1] - us) / us * 100 if us else 0.0
    worst = max(worst, dev)
    print(f"TOP {n:5d}/{k[0]:5d} torch {us:10.1f} us kreplay {k[1]:10.1f} us ({dev:4.1f}%) {name[:90]}")
print(f"RESULT top10_missing {missing}")
print(f"RESULT top10_worst_deviation_pct {worst:.2f}")
within = missing == 0 and worst <= 5.0
print(f"{'PASS' if within else 'FAIL'} top10_within_5pct")
sys.exit(0 if ok and within else 1)
PYEOF
[ $? -eq 0 ] || fails=$((fails+1))
echo "failures: $fails"
[ $fails -eq 0 ]
