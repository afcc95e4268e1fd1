"""Where a pyopencl opening's host time goes, step by step (2026-11-26).

chunked.decrypt of distinct messages (twelve, sealed under their own salts; output=, a
MemoryPool in the script's own context), N calls, the first 24 left out. Each wrapped
function's and OpenCL call's exclusive time (its own, less the wrapped calls inside
it), median per call, µs; "(unwrapped)" is the rest of the call. The blocking reads
(enqueue_copy) hold the header's round trip and the wait for the kernel. Each wrapper
costs about a microsecond.

    VENDOR=nvidia SIZE=1073741824 N=64 python3 2026-11-26-opening-step-costs.py
    python3 2026-11-26-opening-step-costs.py     (PoCL, 64 KiB)
"""
import functools
import os
import statistics
import time
from collections import defaultdict

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
from aescl import chunked, chunkformat, ghash
from aescl.engines import device_chunks
from aescl.engines.opencl import arrays, gcm, kernels

device = next(d for d in aescl.devices()
              if d.is_opencl and d.vendor == os.environ.get("VENDOR", "pocl"))
context = cl.Context([device.cl_device])
queue = cl.CommandQueue(context)
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
SIZE = int(os.environ.get("SIZE", 1 << 16))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = [chunked.encrypt(key, message) for _ in range(12)]
opened = chunked.decrypt(key, sealed[0])
depth, exclusive = [], defaultdict(float)  # time spent in wrapped calls, per open wrapper


def wrap(owner, name, label=None):
    original, label = getattr(owner, name), label or name

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        depth.append(0.0)
        try:
            return original(*args, **kwargs)
        finally:
            spent, inner = time.perf_counter() - start, depth.pop()
            exclusive[label] += spent - inner
            if depth:
                depth[-1] += spent
    setattr(owner, name, timed)


for command in ("enqueue_nd_range_kernel", "enqueue_copy", "enqueue_fill_buffer",
                "enqueue_marker", "enqueue_barrier"):
    wrap(cl, command, "cl." + command)
for owner, name in (
        (chunked, "device_array_kind"), (chunked, "device_nbytes"), (chunked, "_open_header"),
        (chunked, "_array_chunks"), (chunked, "team"), (chunked, "array_device_rule"),
        (arrays, "read_array"), (arrays.OpenclArrayChunks, "_run"), (arrays, "_span"),
        (arrays, "_device_within"), (arrays, "_chunked_output"),
        (arrays, "_let_go_of_parked"), (arrays.OpenclArrayChunks, "_kernels"),
        (ghash, "hash_subkey"), (device_chunks, "open_sealed"),
        (device_chunks, "_full_chunks"), (device_chunks, "_Batch"),
        (arrays._QueueChunkKernels, "verdict"), (arrays._QueueChunkKernels, "crypt_and_tags"),
        (gcm.GcmEngine, "enqueue_crypt_hash"), (gcm.GcmEngine, "_positions_of"),
        (arrays._QueueChunkKernels, "read_verdict"), (device_chunks, "_empty_chunk_tag"),
        (kernels, "key_argument"), (gcm, "launch_config"), (chunkformat, "derive")):
    wrap(owner, name)
wrap(gcm.GcmEngine, "__init__", "GcmEngine")
wrap(arrays._QueueChunkKernels, "__init__", "_QueueChunkKernels")
wrap(gcm, "key_argument", "gcm.key_argument")
per_call, totals = defaultdict(list), []
for number in range(int(os.environ.get("N", 200))):
    exclusive.clear()
    start = time.perf_counter()
    chunked.decrypt(key, sealed[number % 12], output=opened)
    total = time.perf_counter() - start
    if number >= 24:
        totals.append(total * 1e6)
        for label, spent in exclusive.items():
            per_call[label].append(spent * 1e6)
        per_call["(unwrapped)"].append(1e6 * (total - sum(exclusive.values())))
print(f"{device.name}: call median {statistics.median(totals):.0f} us")
for label, spent in sorted(per_call.items(), key=lambda item: -statistics.median(item[1])):
    print(f"  {label:34s} {statistics.median(spent):7.1f}")
