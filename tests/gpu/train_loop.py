"""A long-running training loop for attaching to: tests/gpu/train_step.py's model and batch,
deterministic, one line per step.

Usage: train_loop.py STEPS [--bf16]

Prints `ready` once the model is on the device, then per step `step N loss L bits B ms T` (L
with repr precision, B its float32 bits in hex, T the step's wall time in ms, the loss read
back each step), and `loop done` at the end. Two runs print the same `step N loss L bits B`
bit for bit; a tool attached meanwhile must not change them.
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from train_step import Model, arg  # noqa: E402


def main():
    steps = int(sys.argv[1])
    bf16 = "--bf16" in sys.argv
    d, batch, seq, vocab = arg("--d-model", 384), arg("--batch", 8), arg("--seq", 128), arg("--vocab", 4096)
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device("cuda")
    model = Model(vocab, d, 6, 4 * d, 4, seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(99)
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=g).to(dev)
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    torch.cuda.synchronize()
    print("ready", flush=True)
    for i in range(steps):
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(inp)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt.reshape(-1))
        loss.backward()
        opt.step()
        value = loss.item()
        ms = (time.perf_counter() - ts) * 1e3
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        print(f"step {i} loss {value!r} bits {bits:08x} ms {ms:.3f}", flush=True)
    print("loop done", flush=True)


if __name__ == "__main__":
    main()
