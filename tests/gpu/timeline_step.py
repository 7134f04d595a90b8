"""tests/gpu/train_step.py's training step under torch.profiler (CPU and CUDA activities), for
the GPU timeline's comparison: prints `step_ms: ...` like train_step.py, then one line per
kernel with its count and total GPU time over all STEPS steps, from the profiler's CUDA events:
`kernel_total COUNT TOTAL_US NAME`.

Usage: timeline_step.py STEPS
"""
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
    d, batch, seq, vocab, heads, layers = 384, 8, 128, 4096, 6, 4
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device("cuda")
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
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            ts = time.perf_counter()
            loss = step().item()
            times.append((time.perf_counter() - ts) * 1e3)
            print(f"step {i} loss {loss!r}", flush=True)
        torch.cuda.synchronize()
    print("step_ms: " + ",".join(f"{t:.1f}" for t in times))
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name.find("Memcpy") < 0 \
                and e.name.find("Memset") < 0:
            n, us = totals.get(e.name, (0, 0.0))
            totals[e.name] = (n + 1, us + e.device_time)
    for name, (n, us) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"kernel_total {n} {us:.1f} {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
