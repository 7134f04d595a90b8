"""Where a CUfunction keeps its kernel's name, read from this process's own memory.

A driver-only launch (cuLaunchKernel/cuLaunchKernelEx from cuBLAS, cuDNN, Triton) names its
kernel by a CUfunction, an opaque pointer into the driver's heap. This loads a one-kernel PTX
module through the module API and through the library API (cuLibraryGetKernel +
cuKernelGetFunction, which the CUDA 12+ runtime uses), and prints every 8-byte word of the first
1 KiB of each handle that points to a NUL-terminated string containing the kernel's name, and
pointer chains one level deeper. Usage: python3 cufunc_layout.py
"""
import ctypes
import os

NAME = b"_Z14kreplay_probe1Pf"
PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry _Z14kreplay_probe1Pf(.param .u64 p) { ret; }
"""

cuda = ctypes.CDLL("libcuda.so.1")
mem = os.open("/proc/self/mem", os.O_RDONLY)


def ck(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")


def read(addr, n):
    try:
        return os.pread(mem, n, addr)
    except OSError:
        return b""


def strings_near(base, label, depth=1):
    blob = read(base, 1024)
    for off in range(0, len(blob) - 7, 8):
        p = int.from_bytes(blob[off:off + 8], "little")
        if p < 0x10000 or p > 0x7fffffffffff:
            continue
        s = read(p, 256)
        text = s.split(b"\0")[0]
        if NAME in text:
            print(f"{label}+{off:#x} -> {p:#x}: {text[:80]!r}")
        elif depth > 0:
            inner = read(p, 256)
            for ioff in range(0, len(inner) - 7, 8):
                q = int.from_bytes(inner[ioff:ioff + 8], "little")
                if 0x10000 < q < 0x7fffffffffff and read(q, len(NAME)) == NAME:
                    print(f"{label}+{off:#x} -> +{ioff:#x} -> {q:#x}: name")


ck(cuda.cuInit(0), "cuInit")
dev = ctypes.c_int()
ck(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ck(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ck(cuda.cuCtxSetCurrent(ctx), "set")
mod = ctypes.c_void_p()
ck(cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)), "cuModuleLoadData")
fn = ctypes.c_void_p()
ck(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, NAME), "cuModuleGetFunction")
print(f"module CUfunction {fn.value:#x}")
strings_near(fn.value, "CUfunction(module)")
lib = ctypes.c_void_p()
ck(cuda.cuLibraryLoadData(ctypes.byref(lib), ctypes.c_char_p(PTX), None, None, 0, None, None, 0), "cuLibraryLoadData")
k = ctypes.c_void_p()
ck(cuda.cuLibraryGetKernel(ctypes.byref(k), lib, NAME), "cuLibraryGetKernel")
print(f"CUkernel {k.value:#x}")
strings_near(k.value, "CUkernel")
f2 = ctypes.c_void_p()
ck(cuda.cuKernelGetFunction(ctypes.byref(f2), k), "cuKernelGetFunction")
print(f"library CUfunction {f2.value:#x}")
strings_near(f2.value, "CUfunction(library)")
nm = ctypes.c_char_p()
if hasattr(cuda, "cuFuncGetName") and cuda.cuFuncGetName(ctypes.byref(nm), fn) == 0:
    print(f"cuFuncGetName: {nm.value!r} at {ctypes.cast(nm, ctypes.c_void_p).value:#x}")
