"""Where a pyopencl opening into a new array spends the time that one into ``output=``
does not (2026-11-26): each step of the call wrapped in a stopwatch (the header's read,
the commitment's check and HKDF, the call's objects, pyopencl's ``cl_array.empty``, the
engine's kernels object, the format's opening with its launches and wait), medians of
15 calls on a 1 GiB message in a MemoryPool, ``output=`` and new arrays in turn, three
rounds.

    python3 2026-11-26-opening-new-array-stamps.py      (SIZE=..., VENDOR=pocl here)
"""
import os
import statistics
import time
from collections import defaultdict

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
import aescl.chunked as chunked_module
from aescl.engines import device_chunks
from aescl.engines.opencl import arrays as opencl_arrays

SIZE = int(os.environ.get("SIZE", 1 << 30))
VENDOR = os.environ.get("VENDOR", "nvidia")
device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == VENDOR)
queue = cl.CommandQueue(cl.Context([device.cl_device]))
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
opened = aescl.chunked.decrypt(key, sealed)
queue.finish()
stamps = defaultdict(list)


def wrap(owner, name, label):
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            stamps[label].append(time.perf_counter() - start)
    setattr(owner, name, timed)


wrap(cl_array, "empty", "empty")
wrap(device_chunks, "open_sealed", "open_sealed")
wrap(opencl_arrays, "_let_go_of_parked", "let_go")
wrap(opencl_arrays.OpenclArrayChunks, "_kernels", "kernels")
wrap(cl, "enqueue_barrier", "barrier")
wrap(chunked_module, "_open_header", "open_header")
wrap(chunked_module, "_array_chunks", "array_chunks")
wrap(opencl_arrays.OpenclArrayChunks, "read", "header_read")
wrap(opencl_arrays, "_span", "span")
calls = {"out": lambda: aescl.chunked.decrypt(key, sealed, output=opened) or opened,
         "new": lambda: aescl.chunked.decrypt(key, sealed)}
for number in range(3):
    for name, call in calls.items():
        last = call()
        stamps.clear()
        total = []
        for _ in range(15):
            start = time.perf_counter()
            result = call()
            total.append(time.perf_counter() - start)
            last = result
        print(f"round {number} {name}: call {1e6 * statistics.median(total):.0f} us; " + ", ".join(
            f"{k} {1e6 * statistics.median(v):.1f}" for k, v in stamps.items()), flush=True)
