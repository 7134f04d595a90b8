"""A PyTorch loop of tiny kernels, for kreplay's CUDA trace checks and overhead benchmarks.

Usage: torch_loop.py LAUNCHES [--profiler | --profiler-cuda] [--wait]
Warms up (not counted), then runs LAUNCHES in-place `add_` kernels on a small tensor and
prints `launches: N` (kernels launched in the timed loop, counted from the profiler-free
loop) and `us_per_launch: X`. With --profiler the loop runs under torch.profiler (CPU+CUDA
activities), with --profiler-cuda under its CUDA activity only. With --wait it prints `ready` after the warm-up and waits for a line on stdin
before the timed loop (for attach-by-pid).
"""
import sys
import time

import torch


def main():
    n = int(sys.argv[1])
    use_profiler = "--profiler" in sys.argv or "--profiler-cuda" in sys.argv
    wait = "--wait" in sys.argv
    x = torch.zeros(256, device="cuda")
    for _ in range(200):
        x.add_(1.0)
    torch.cuda.synchronize()
    if wait:
        print("ready", flush=True)
        sys.stdin.readline()
    ctx = None
    if use_profiler:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CUDA]
        if "--profiler" in sys.argv:
            activities.insert(0, ProfilerActivity.CPU)
        ctx = profile(activities=activities)
        ctx.__enter__()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if ctx is not None:
        ctx.__exit__(None, None, None)
    assert x[0].item() == 200 + n, x[0].item()
    print(f"launches: {n}")
    print(f"us_per_launch: {(t1 - t0) / n * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
