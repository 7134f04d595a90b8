"""A small, deterministic 4-layer transformer training step, for kreplay's replay-cost runs.

Usage: train_step.py STEPS [--bf16] [--list-kernels] [--d-model D] [--batch B] [--seq S] [--vocab V]

Builds a pre-norm decoder-style transformer by hand (embedding, 4 blocks of causal multi-head
attention with 6 heads and a GELU MLP, final norm, tied output head; defaults d_model 384,
batch 8, sequence 128, vocabulary 4096: about 9M parameters, a few hundred MB on the device with
AdamW's state), fixed seed, no dropout, fp32 without TF32 (--bf16: autocast), and runs STEPS
AdamW steps on one fixed random batch. Every matrix product is a cuBLAS GEMM (linear layers,
batched attention products), so `kreplay replay --kernel <gemm regex>` replays dozens per step.
Attention is written out (no SDPA / flash kernels) and `torch.use_deterministic_algorithms` is
on, so two runs print the same losses bit for bit; `kreplay replay` must not change them.

Prints, one line each: `step N loss L` (L with repr precision, and its float32 bits as hex),
then `steps: N`, `step_ms: first,others...`, `wall_s: X` (from the first step's start to the
end, the CUDA context and the model already made) and `setup_s: Y` (import, context, model).
With --list-kernels it also prints, after a profiled extra step, every CUDA kernel the step
launched and how many times (`kernel COUNT NAME`), from torch.profiler (names as CUPTI gives
them: demangled).
"""
import os
import struct
import sys
import time

# cuBLAS needs a fixed workspace configuration for deterministic results.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

T_START = time.perf_counter()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def arg(name, default, cast=int):
    if name in sys.argv:
        return cast(sys.argv[sys.argv.index(name) + 1])
    return default


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


class Model(nn.Module):
    def __init__(self, vocab, d, heads, ff, layers, seq):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads, ff) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.register_buffer(
            "mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1), persistent=False
        )

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for blk in self.blocks:
            x = blk(x, self.mask[: tokens.shape[1], : tokens.shape[1]])
        return self.ln(x) @ self.emb.weight.t()


def main():
    steps = int(sys.argv[1])
    bf16 = "--bf16" in sys.argv
    d = arg("--d-model", 384)
    batch = arg("--batch", 8)
    seq = arg("--seq", 128)
    vocab = arg("--vocab", 4096)
    heads, layers = 6, 4
    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device("cuda")
    model = Model(vocab, d, heads, 4 * d, layers, seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    g = torch.Generator(device="cpu").manual_seed(99)
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=g).to(dev)
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - T_START

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(inp)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    times = []
    t0 = time.perf_counter()
    for i in range(steps):
        ts = time.perf_counter()
        loss = step().item()
        times.append((time.perf_counter() - ts) * 1e3)
        bits = struct.unpack("<I", struct.pack("<f", loss))[0]
        print(f"step {i} loss {loss!r} bits {bits:08x}", flush=True)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    print(f"steps: {steps}")
    print("step_ms: " + ",".join(f"{t:.1f}" for t in times))
    print(f"wall_s: {wall:.3f}")
    print(f"setup_s: {setup_s:.3f}")
    print(f"cuda_allocated_mb: {torch.cuda.memory_allocated() / 2**20:.1f} "
          f"reserved_mb: {torch.cuda.memory_reserved() / 2**20:.1f}", flush=True)
    if "--list-kernels" in sys.argv:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step().item()
            torch.cuda.synchronize()
        counts = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                counts[e.name] = counts.get(e.name, 0) + 1
        for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"kernel {n} {name}")
        print(f"kernels_per_step: {sum(counts.values())}", flush=True)


if __name__ == "__main__":
    main()
