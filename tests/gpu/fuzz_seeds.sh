#!/usr/bin/env bash
# Fuzz seeds from the GPU machine's real CUDA libraries, for fuzz/corpus/. Run from the
# repository root there: `OUT=/some/dir bash tests/gpu/fuzz_seeds.sh`. Writes under
# $OUT/fuzz-seeds/: fatbin/ (whole fat binaries from the `.nv_fatbin` sections of cuBLAS and
# libtorch_cuda, compressed entries and all), cubin/ and ptx/ (their uncompressed ELF and
# PTX entries), proc_maps/ (the maps of a process that initialized CUDA through PyTorch).
# Each seed is at most 1 MiB and all of them at most 8 MiB. Needs python3 only.
set -euo pipefail
OUT=${OUT:-/tmp}
VENV=${VENV:-/opt/torch/.venv}
PY=$VENV/bin/python3
[ -x "$PY" ] || PY=python3
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$OUT/fuzz-seeds"
libs=()
for l in "$SITE"/nvidia/cu13/lib/libcublas.so.* "$SITE"/nvidia/cu13/lib/libcublasLt.so.* \
  "$SITE"/torch/lib/libtorch_cuda.so; do
  [ -f "$l" ] && libs+=("$l")
done
echo "libraries: ${libs[*]:-none found under $SITE}"
python3 - "$OUT/fuzz-seeds" "${libs[@]}" <<'PY'
import os, struct, sys

out, libs = sys.argv[1], sys.argv[2:]
MAX_SEED, MAX_TOTAL, PER_KIND_PER_LIB = 1 << 20, 8 << 20, 4
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
ZSTD = b"\x28\xb5\x2f\xfd"
total = 0

def section(path, want):
    """The bytes of section `want` of an ELF64 little-endian file, read without loading it."""
    with open(path, "rb") as f:
        h = f.read(64)
        if h[:4] != b"\x7fELF" or h[4] != 2 or h[5] != 1:
            return b""
        shoff, = struct.unpack_from("<Q", h, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", h, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        secs = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        names = secs[shstrndx]
        f.seek(names[4]); strtab = f.read(names[5])
        for s in secs:
            name = strtab[s[0]:strtab.index(b"\0", s[0])].decode()
            if name == want:
                f.seek(s[4])
                return f.read(s[5])
    return b""

def save(kind, name, data):
    global total
    if len(data) > MAX_SEED or total + len(data) > MAX_TOTAL:
        return False
    os.makedirs(os.path.join(out, kind), exist_ok=True)
    with open(os.path.join(out, kind, name), "wb") as f:
        f.write(data)
    total += len(data)
    print(f"{kind}/{name}: {len(data)} bytes")
    return True

for lib in libs:
    base = os.path.basename(lib).split(".so")[0]
    sec = section(lib, ".nv_fatbin")
    print(f"{lib}: .nv_fatbin {len(sec)} bytes")
    counts = {"fatbin": 0, "cubin": 0, "ptx": 0}
    # Whole fat binaries, smallest first among the first few hundred, so small ones are kept.
    bins, off = [], sec.find(FATBIN_MAGIC)
    while off >= 0 and len(bins) < 400:
        header, = struct.unpack_from("<H", sec, off + 6)
        size, = struct.unpack_from("<Q", sec, off + 8)
        end = min(off + header + size, len(sec))
        bins.append((off, sec[off:end], header))
        off = sec.find(FATBIN_MAGIC, max(end, off + 4))
    for off, fb, header in sorted(bins, key=lambda b: len(b[1])):
        if counts["fatbin"] < PER_KIND_PER_LIB and len(fb) >= 256:
            if save("fatbin", f"{base}_{off:x}.fatbin", fb):
                counts["fatbin"] += 1
        # Its entries: kind u16 (1 PTX, 2 ELF), header size u32 at 4, payload size u64 at 8.
        e = header
        while e + 16 <= len(fb):
            kind, = struct.unpack_from("<H", fb, e)
            hsize, = struct.unpack_from("<I", fb, e + 4)
            psize, = struct.unpack_from("<Q", fb, e + 8)
            if hsize < 16:
                break
            payload = fb[e + hsize:e + hsize + psize]
            compressed = payload.startswith(ZSTD)
            if not compressed and payload.startswith(b"\x7fELF") and counts["cubin"] < PER_KIND_PER_LIB:
                if save("cubin", f"{base}_{off:x}_{e:x}.cubin", payload):
                    counts["cubin"] += 1
            elif not compressed and kind == 1 and counts["ptx"] < PER_KIND_PER_LIB:
                if save("ptx", f"{base}_{off:x}_{e:x}.ptx", payload.split(b"\0")[0]):
                    counts["ptx"] += 1
            e += hsize + psize
print(f"total {total} bytes")
PY
# The maps of a process that initialized CUDA through PyTorch (cuBLAS, cuDNN, the driver).
"$PY" - "$OUT/fuzz-seeds" <<'PY' || echo "no PyTorch process maps (PyTorch or the GPU unavailable)"
import os, sys, torch
torch.ones(4, device="cuda").sum().item()
os.makedirs(os.path.join(sys.argv[1], "proc_maps"), exist_ok=True)
with open("/proc/self/maps") as src, open(os.path.join(sys.argv[1], "proc_maps", "torch_cuda_maps.txt"), "w") as dst:
    text = src.read()[: 1 << 20]
    dst.write(text)
print(f"proc_maps/torch_cuda_maps.txt: {len(text)} bytes")
PY
find "$OUT/fuzz-seeds" -type f | sort
