"""Host stamps through the opening of a 1 GiB device array into ``output=``: when each
piece of ``aescl.chunked.decrypt`` starts, from the call's start, and how long it takes,
medians of 20 calls, twice. ``torch``: a CUDA tensor (CUDA engine); ``opencl``: a
pyopencl array from a MemoryPool on the NVIDIA OpenCL device.

    python3 2026-11-26-opening-stamps.py torch
    python3 2026-11-26-opening-stamps.py opencl
"""
import functools
import os
import statistics
import sys
import time

import numpy as np

import aescl
from aescl import chunked
from aescl.engines import device_chunks

stamps: list[tuple[str, int, int]] = []


def stamped(owner, name, label):
    """Replace ``owner.name`` by the same function, stamped on entry and exit."""
    function = getattr(owner, name)
    static = isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.perf_counter_ns()
        result = function(*args, **kwargs)
        stamps.append((label, start, time.perf_counter_ns()))
        return result

    setattr(owner, name, staticmethod(wrapper) if static else wrapper)


def report(label, call, synchronize, calls=20):
    for _ in range(3):
        call()
    synchronize()
    pieces: dict[str, list[tuple[float, float]]] = {}
    totals = []
    for _ in range(calls):
        stamps.clear()
        start = time.perf_counter_ns()
        call()
        totals.append((time.perf_counter_ns() - start) / 1e3)
        seen: dict[str, int] = {}
        for piece, began, ended in stamps:
            seen[piece] = seen.get(piece, 0) + 1
            pieces.setdefault(f"{piece}#{seen[piece]}", []).append(
                ((began - start) / 1e3, (ended - began) / 1e3))
    print(f"== {label}: call {statistics.median(totals):.0f} us (min {min(totals):.0f})")
    for piece, times in sorted(pieces.items(),
                               key=lambda item: statistics.median(t[0] for t in item[1])):
        print(f"  {piece:40s} at {statistics.median(t[0] for t in times):8.1f}"
              f"  takes {statistics.median(t[1] for t in times):8.1f}")


stamped(chunked, "_open_header", "open_header (HKDF, commitment)")
stamped(device_chunks, "_open_checked", "_open_checked")
key = os.urandom(32)
if sys.argv[1] == "torch":
    import torch

    from aescl.engines.cuda import arrays, workers

    stamped(arrays.CudaArrayChunks, "read", "header read")
    stamped(workers, "launch_kernel", "launch")
    stamped(workers.CudaChunkKernels, "__init__", "CudaChunkKernels()")
    stamped(workers.CudaChunkKernels, "read_verdict", "read_verdict")
    stamped(arrays, "cuda_bytes", "cuda_bytes")
    message = torch.randint(0, 256, (1 << 30,), dtype=torch.uint8, device="cuda")
    sealed = aescl.chunked.encrypt(key, message)
    out = torch.empty_like(message)
    synchronize = torch.cuda.synchronize
else:
    import pyopencl as cl
    import pyopencl.array as cl_array
    import pyopencl.tools as cl_tools

    from aescl.engines.opencl import arrays, gcm

    stamped(arrays.OpenclArrayChunks, "read", "header read")
    stamped(cl, "enqueue_nd_range_kernel", "launch")
    stamped(gcm.GcmEngine, "__init__", "GcmEngine()")
    stamped(arrays._QueueChunkKernels, "read_verdict", "read_verdict")
    device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
    queue = cl.CommandQueue(cl.Context([device.cl_device]))
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    message = cl_array.to_device(queue, np.frombuffer(os.urandom(1 << 30), np.uint8),
                                 allocator=pool)
    sealed = aescl.chunked.encrypt(key, message)
    out = cl_array.empty(queue, 1 << 30, np.uint8, allocator=pool)
    synchronize = queue.finish
for _ in range(2):
    report(f"{sys.argv[1]} output=", lambda: aescl.chunked.decrypt(key, sealed, output=out),
           synchronize)
