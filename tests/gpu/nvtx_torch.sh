#!/usr/bin/env bash
# NVTX annotations of a PyTorch training step under `kreplay trace --` on the GPU machine: a
# small MLP's steps under torch.autograd.profiler.emit_nvtx(), each wrapped in explicit
# torch.cuda.nvtx.range_push/pop ranges ("step N" > "forward", "backward"). kreplay-tool is
# the process's NVTX injection library (kreplay trace sets NVTX_INJECTION64_PATH).
# Run from the repository root there, binaries in .gpu-carry/ (tests/gpu/run.sh's conventions):
#   bash tests/gpu/nvtx_torch.sh
# Prints the number of NVTX ranges and marks in the trace, the most frequent names, one
# `RESULT name value` line per count and `PASS`/`FAIL name` per check. Decoding needs the
# `perfetto` Python package (tests/python/requirements.txt) in $PY or python3; without it the
# trace is left in $OUT for `python3 tests/python/decode_trace.py` elsewhere.
set -u
C=.gpu-carry
K=$C/kreplay
OUT=${OUT:-/tmp}
PY=${PY:-/opt/torch/.venv/bin/python3}
STEPS=${STEPS:-3}
fails=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1 ($2)"; else echo "FAIL $1: got '$2' want '$3'"; fails=$((fails+1)); fi; }
echo "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), kernel $(uname -r), $(date -u)"

cat > $OUT/nvtx_step.py <<'EOF'
import sys

import torch
import torch.nn as nn

steps = int(sys.argv[1])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
with torch.autograd.profiler.emit_nvtx():
    for i in range(steps):
        torch.cuda.nvtx.range_push(f"step {i}")
        torch.cuda.nvtx.range_push("forward")
        loss = nn.functional.cross_entropy(model(x), y)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        opt.zero_grad()
        loss.backward()
        torch.cuda.nvtx.range_pop()
        opt.step()
        torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"steps: {steps} loss: {loss.item():.6f}")
EOF

unset NVTX_INJECTION64_PATH
$K trace -q -o $OUT/nvtx_torch.pftrace -- $PY $OUT/nvtx_step.py $STEPS > $OUT/nvtx_torch.out 2> $OUT/nvtx_torch.err
rc=$?
cat $OUT/nvtx_torch.out
grep -E "dropped|wrote|error|warning" $OUT/nvtx_torch.err
check nvtx_torch_trace_exit "$rc" 0

DPY=""
for p in "$PY" python3; do
  if "$p" -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" 2>/dev/null; then DPY=$p; break; fi
done
if [ -z "$DPY" ]; then
  echo "no python with the perfetto package: decode $OUT/nvtx_torch.pftrace with tests/python/decode_trace.py elsewhere"
  exit 1
fi
"$DPY" tests/python/decode_trace.py $OUT/nvtx_torch.pftrace > $OUT/nvtx_torch.json
"$DPY" - $OUT/nvtx_torch.json $STEPS > $OUT/nvtx_torch.summary <<'EOF'
import collections
import json
import sys

d = json.load(open(sys.argv[1]))
steps = int(sys.argv[2])
ranges, marks = collections.Counter(), collections.Counter()
nested_calls = 0
for uuid, sl in d["slices"].items():
    stack = []  # (end, is NVTX) of the slices enclosing the current one
    for s in sorted(sl, key=lambda s: (s["ts"], -s["dur"])):
        while stack and stack[-1][0] <= s["ts"]:
            stack.pop()
        is_nvtx = s["args"].get("source", {}).get("string") == "NVTX"
        if is_nvtx:
            ranges[s["name"]] += 1
        elif s["name"].startswith("cu") and any(n for _, n in stack):
            nested_calls += 1
        stack.append((s["ts"] + s["dur"], is_nvtx))
for uuid, ins in d["instants"].items():
    for s in ins:
        if s["args"].get("source", {}).get("string") == "NVTX":
            marks[s["name"]] += 1
print(f"RESULT nvtx_ranges {sum(ranges.values())}")
print(f"RESULT nvtx_marks {sum(marks.values())}")
print(f"RESULT nvtx_distinct_names {len(ranges)}")
print(f"RESULT cuda_calls_inside_nvtx_ranges {nested_calls}")
print(f"RESULT decoder_errors {len(d['errors'])}")
steps_seen = sum(n for k, n in ranges.items() if k.startswith("step "))
print(f"CHECK steps {steps_seen} {steps}")
print(f"CHECK forward {ranges['forward']} {steps}")
print(f"CHECK backward {ranges['backward']} {steps}")
print(f"CHECK errors {len(d['errors'])} 0")
aten = sum(n for k, n in ranges.items() if k.startswith("aten::"))
print(f"CHECK emit_nvtx_ranges_present {int(aten > 0)} 1")
for name, n in ranges.most_common(12):
    print(f"  {n:6d}  {name}")
EOF
grep -v '^CHECK' $OUT/nvtx_torch.summary
while read -r _ name got want; do check "nvtx_torch_$name" "$got" "$want"; done < <(grep '^CHECK' $OUT/nvtx_torch.summary)
echo "failures: $fails"
exit $fails
