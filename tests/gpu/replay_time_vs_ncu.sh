#!/usr/bin/env bash
# The kernel time `kreplay replay` reports beside Nsight Compute's `gpu__time_duration` for the
# same launches of tests/gpu/train_step.py, in one run: the first N launches matching GEMM,
# kreplay with --passes 5 (each pass timed on the GPU by events, and by the host), ncu once with
# its defaults (clocks locked to base, caches flushed before each kernel) and once with
# `--clock-control none --cache-control all` and `none`. Per kernel (mangled name): launches,
# kreplay's median GPU and host pass time, ncu's median, and kreplay GPU / ncu.
#   tests/gpu/replay_time_vs_ncu.sh [N]   (default 20)
# Binaries from $C (default .gpu-carry). Prints `ROW` lines, `RESULT` lines and
# `PASS`/`FAIL losses_identical` (the replayed run's losses equal a bare run's; exit 1 on FAIL).
set -u
C=${C:-.gpu-carry}
K=$C/kreplay
PY=${PY:-/opt/torch/.venv/bin/python3}
N=${1:-20}
GEMM=${GEMM:-gemm|xmma|cutlass}
NCU=${NCU:-$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
W=${OUT:-$(mktemp -d)}
mkdir -p "$W"
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), ncu $($NCU --version 2>/dev/null | tail -1), $(date -u)"
losses() { grep '^step ' "$1" | awk '{print $2, $4, $6}'; }
$PY tests/gpu/train_step.py 3 > "$W/bare.out" 2>&1
$K replay --passes 5 --kernel "$GEMM" --max-dispatches "$N" --json "$W/kr.json" -o "$W/kr.pftrace" -- \
  $PY tests/gpu/train_step.py 3 > "$W/kr.out" 2> "$W/kr.err"
rc=$?
echo "kreplay exit $rc"
ok=1
if [ $rc = 0 ] && [ "$(losses "$W/kr.out")" = "$(losses "$W/bare.out")" ] && [ -n "$(losses "$W/bare.out")" ]; then
  echo "PASS losses_identical"
else
  echo "FAIL losses_identical"
  ok=0
fi
sed -n '/^kernel  *dispatches/,/^$/p' "$W/kr.out" | cut -c1-160
ncu_run() { # name flags...
  local name=$1; shift
  $NCU --target-processes all -k "regex:$GEMM" -c "$N" --metrics gpu__time_duration.sum \
    --print-kernel-base mangled --print-units base --csv --log-file "$W/$name.csv" "$@" \
    $PY tests/gpu/train_step.py 3 > "$W/$name.out" 2> "$W/$name.err"
  echo "ncu $name exit $?"
}
ncu_run ncu_default
ncu_run ncu_boost --clock-control none --cache-control all
ncu_run ncu_warm --clock-control none --cache-control none
$PY - "$W" <<'PYEOF'
import csv, json, statistics, sys
w = sys.argv[1]
kr = {}
for line in open(f"{w}/kr.json"):
    o = json.loads(line)
    if o.get("kind") == "kernel" and o.get("pass_gpu_ns"):
        kr[o["mangled"]] = o
def ncu(name):
    rows = {}
    # ncu writes its CSV to --log-file; a build that keeps it on stdout is read there.
    lines = []
    for path in (f"{w}/{name}.csv", f"{w}/{name}.out"):
        try:
            lines = [l for l in open(path) if l.startswith('"')]
        except OSError:
            continue
        if lines:
            break
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        v *= {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(unit, 1)
        rows.setdefault(r["Kernel Name"], []).append(v)
    return rows
runs = {n: ncu(n) for n in ("ncu_default", "ncu_boost", "ncu_warm")}
ratios = {n: [] for n in runs}
host_over_gpu = []
print("ROW launches kreplay_gpu_us kreplay_host_us ncu_default_us ncu_boost_us ncu_warm_us kernel")
for m, o in sorted(kr.items()):
    gpu = o["pass_gpu_ns"]["median"] / 1e3
    host = o["pass_ns"]["median"] / 1e3
    host_over_gpu.append(host / gpu)
    cols = []
    for n, rows in runs.items():
        if m in rows:
            med = statistics.median(rows[m]) / 1e3
            ratios[n].append(gpu / med)
            cols.append(f"{med:.1f}")
        else:
            cols.append("-")
    print(f"ROW {o['replayed']} {gpu:.1f} {host:.1f} {' '.join(cols)} {m[:70]}")
for n, r in ratios.items():
    if r:
        print(f"RESULT kreplay_gpu_over_{n} median {statistics.median(r):.3f} min {min(r):.3f} max {max(r):.3f} kernels {len(r)}")
if host_over_gpu:
    print(f"RESULT kreplay_host_over_gpu median {statistics.median(host_over_gpu):.3f} kernels {len(host_over_gpu)}")
PYEOF
rm -f "$W"/*.pftrace
[ $ok = 1 ]
