"""A long PyTorch loop of tiny kernels that reports its launch cost per window, for measuring
what an attach leaves behind in a running process (tests/gpu/detach_cost.sh).

Usage: launch_windows.py WINDOWS LAUNCHES_PER_WINDOW
Warms up, then runs WINDOWS windows of LAUNCHES_PER_WINDOW in-place `add_` kernels, each
ending with a synchronize, and prints `window I us_per_launch X` after each. Checks the sum.
"""
import sys
import time

import torch


def main():
    windows, per = int(sys.argv[1]), int(sys.argv[2])
    x = torch.zeros(256, device="cuda")
    for _ in range(200):
        x.add_(1.0)
    torch.cuda.synchronize()
    for w in range(windows):
        t0 = time.perf_counter()
        for _ in range(per):
            x.add_(1.0)
        torch.cuda.synchronize()
        print(f"window {w} us_per_launch {(time.perf_counter() - t0) / per * 1e6:.3f}", flush=True)
    assert x[0].item() == 200 + windows * per, x[0].item()
    print("done", flush=True)


if __name__ == "__main__":
    main()
