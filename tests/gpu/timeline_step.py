"""tests/gpu/train_step.py's training step under torch.profiler (CPU and CUDA activities, or
CUDA only with --cuda-only), for the GPU timeline's comparison: prints `step_ms: ...` like
train_step.py, then one line per kernel with its count and total GPU time over the whole program
(the profiler starts before the model is built),
from the profiler's kernel events (its Chrome trace's `kernel` category: user annotations that
the profiler also puts on the GPU's rows are not kernels): `kernel_total COUNT TOTAL_US NAME`.

Usage: timeline_step.py STEPS [--cuda-only] [--d-model D] [--batch B] [--seq S] [--vocab V]
"""
import json
import tempfile
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import train_step  # noqa: E402


def main():
    steps = int(sys.argv[1])
    # train_step.py's model and its flags.
    d = train_step.arg("--d-model", 384)
    batch = train_step.arg("--batch", 8)
    seq = train_step.arg("--seq", 128)
    vocab = train_step.arg("--vocab", 4096)
    heads, layers = 6, 4
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device("cuda")
    activities = [ProfilerActivity.CUDA]
    if "--cuda-only" not in sys.argv:
        activities.insert(0, ProfilerActivity.CPU)
    # From before the first CUDA work, so that the profiler sees every kernel the program runs,
    # as `kreplay trace` does.
    prof = profile(activities=activities)
    prof.__enter__()
    model = train_step.Model(vocab, d, heads, 4 * d, layers, seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(99)
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=g).to(dev)
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(inp)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    times = []
    for i in range(steps):
        ts = time.perf_counter()
        loss = step().item()
        times.append((time.perf_counter() - ts) * 1e3)
        print(f"step {i} loss {loss!r}", flush=True)
    torch.cuda.synchronize()
    prof.__exit__(None, None, None)
    print("step_ms: " + ",".join(f"{t:.1f}" for t in times))
    totals = {}
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name)).get("traceEvents", [])
    for e in events:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            n, us = totals.get(e["name"], (0, 0.0))
            totals[e["name"]] = (n + 1, us + float(e.get("dur", 0.0)))
    for name, (n, us) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"kernel_total {n} {us:.1f} {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
