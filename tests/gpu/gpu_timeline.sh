#!/usr/bin/env bash
# The GPU timeline on the H200 (CUDA, through CUPTI): tests/gpu/train_step.py's 4-layer
# transformer training step (forward, backward, AdamW), STEPS steps each, run plain, under
# `kreplay trace --gpu`, and under torch.profiler with CPU and CUDA activities
# (tests/gpu/timeline_step.py), one after the other in one run.
# Run from the repository root there, binaries in .gpu-carry/ (tests/gpu/run.sh's conventions):
#   bash tests/gpu/gpu_timeline.sh
# Prints each arm's step times, then `RESULT name value` lines and `PASS`/`FAIL name` checks
# (exit status 1 when one fails):
# the trace's GPU kernel slices (dispatches) equal the launches its API slices show; every
# dispatch has its flow; the top 10 kernels' GPU totals under kreplay agree with torch.profiler's
# within 5% (names as each prints them: kreplay demangles CUPTI's name itself).
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp}
PY=${PY:-/opt/torch/.venv/bin/python3}
STEPS=${STEPS:-5}
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"
export KREPLAY_TOOL_LIB=$PWD/$C/libkreplay_tool.so
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH

echo "== plain"
$PY tests/gpu/train_step.py $STEPS > $OUT/plain.out 2>&1
grep -E "step_ms|wall_s" $OUT/plain.out

echo "== kreplay trace --gpu"
$K trace --gpu -q --keep-streams -o $OUT/gt.pftrace -- $PY tests/gpu/train_step.py $STEPS > $OUT/kr.out 2> $OUT/kr.err
rc=$?
grep -E "step_ms|wall_s" $OUT/kr.out
grep -E "CUPTI|error|warning|dropped|wrote" $OUT/kr.err | head -5
check trace_exit "$rc" 0
$K merge $OUT/gt.pftrace.streams -o $OUT/gt2.pftrace > $OUT/merge.out 2> $OUT/merge.err
tail -1 $OUT/merge.err

echo "== torch.profiler (CPU+CUDA)"
$PY tests/gpu/timeline_step.py $STEPS > $OUT/tp.out 2>&1
grep -E "step_ms" $OUT/tp.out

$PY - "$OUT" <<'PYEOF'
import re, sys
out = sys.argv[1]
err = open(f"{out}/kr.err").read()
merge = open(f"{out}/merge.err").read()
def steps(path):
    m = re.search(r"step_ms: (.*)", open(path).read())
    return [float(x) for x in m.group(1).split(",")] if m else []
for arm, p in [("plain", "plain.out"), ("kreplay", "kr.out"), ("torch_profiler", "tp.out")]:
    s = steps(f"{out}/{p}")
    later = sorted(s[1:]) if len(s) > 1 else s
    med = later[len(later) // 2] if later else float("nan")
    print(f"RESULT step_ms_median_after_first_{arm} {med:.2f}")
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
# Per-kernel totals: kreplay's table (µs) against torch.profiler's.
kr = {}
for line in err.splitlines():
    m = re.match(r"\s+[\d.]+%\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(.*)$", line)
    if m:
        kr[" ".join(m.group(3).split())] = (int(m.group(1)), float(m.group(2)))
tp = {}
for line in open(f"{out}/tp.out"):
    m = re.match(r"kernel_total (\d+) ([\d.]+) (.*)$", line.rstrip("\n"))
    if m:
        tp[" ".join(m.group(3).split())] = (int(m.group(1)), float(m.group(2)))
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
