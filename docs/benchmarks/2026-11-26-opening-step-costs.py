"""Where an opening's host time goes, step by step (2026-11-26).

chunked.decrypt of distinct messages (twelve, sealed under their own salts; output=), N
calls, the first 24 left out: pyopencl arrays from a MemoryPool in the script's own
context (ARRAYS=pyopencl, the default; VENDOR picks the OpenCL device), or torch tensors
through the CUDA engine (ARRAYS=torch). Each wrapped function's and OpenCL call's
exclusive time (its own, less the wrapped calls inside it), median per call, µs;
"(unwrapped)" is the rest of the call. The blocking reads (pyopencl's enqueue_copy, the
CUDA engine's read) hold the header's round trip and the wait for the kernel. Each
wrapper costs about a microsecond.

    VENDOR=nvidia SIZE=1073741824 N=64 python3 2026-11-26-opening-step-costs.py
    ARRAYS=torch SIZE=1073741824 N=64 python3 2026-11-26-opening-step-costs.py
    python3 2026-11-26-opening-step-costs.py     (PoCL, 64 KiB)
"""
import functools
import os
import statistics
import time
from collections import defaultdict

import numpy as np

import aescl
from aescl import chunked, chunkformat, ghash
from aescl.engines import device_chunks

SIZE = int(os.environ.get("SIZE", 1 << 16))
ARRAYS = os.environ.get("ARRAYS", "pyopencl")
if ARRAYS == "torch":
    import torch

    from aescl.engines.cuda import arrays, workers

    label = torch.cuda.get_device_name(0)
    message = torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device="cuda")
    steps = (
        (arrays, "cuda_bytes"), (arrays.CudaArrayChunks, "_run"), (arrays, "_chunked_output"),
        (arrays, "_on_gpu"), (arrays, "as_kind_of"), (arrays.CudaArrayChunks, "read"),
        (workers.CudaGhash, "read"), (workers, "launch_kernel"),
        (workers, "launch_position_tables"), (workers.CudaChunkKernels, "verdict"),
        (workers.CudaChunkKernels, "read_verdict"), (workers.CudaChunkKernels, "crypt_and_tags"),
        (workers.CudaChunkKernels, "release_all"), (workers.CudaChunkKernels, "scratch"),
        (workers, "cuda_device"), (workers.keyschedule, "kernel_key_argument"),
        (workers.CudaChunkKernels, "__init__", "CudaChunkKernels"))
else:
    import pyopencl as cl
    import pyopencl.array as cl_array
    import pyopencl.tools as cl_tools

    from aescl.engines.opencl import arrays, gcm, kernels

    device = next(d for d in aescl.devices()
                  if d.is_opencl and d.vendor == os.environ.get("VENDOR", "pocl"))
    label = device.name
    queue = cl.CommandQueue(cl.Context([device.cl_device]))
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8),
                                 allocator=pool)
    steps = (
        *((cl, command, "cl." + command) for command in (
            "enqueue_nd_range_kernel", "enqueue_copy", "enqueue_fill_buffer",
            "enqueue_marker", "enqueue_barrier")),
        (arrays, "read_array"), (arrays.OpenclArrayChunks, "_run"), (arrays, "_span"),
        (arrays, "_device_within"), (arrays, "_chunked_output"),
        (arrays, "_let_go_of_parked"), (arrays.OpenclArrayChunks, "_kernels"),
        (arrays._QueueChunkKernels, "verdict"), (arrays._QueueChunkKernels, "crypt_and_tags"),
        (gcm.GcmEngine, "enqueue_crypt_hash"), (gcm.GcmEngine, "_positions_of"),
        (arrays._QueueChunkKernels, "read_verdict"), (kernels, "key_argument"),
        (gcm, "launch_config"), (gcm.GcmEngine, "__init__", "GcmEngine"),
        (arrays._QueueChunkKernels, "__init__", "_QueueChunkKernels"),
        (gcm, "key_argument", "gcm.key_argument"))
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


for step in (
        (chunked, "device_array_kind"), (chunked, "device_nbytes"), (chunked, "_open_header"),
        (chunked, "_array_chunks"), (chunked, "team"), (chunked, "array_device_rule"),
        (ghash, "hash_subkey"), (device_chunks, "open_sealed"), (device_chunks, "_full_chunks"),
        (device_chunks, "_Batch"), (device_chunks, "_empty_chunk_tag"),
        (chunkformat, "derive"), *steps):
    wrap(*step)
per_call, totals = defaultdict(list), []
for number in range(int(os.environ.get("N", 200))):
    exclusive.clear()
    start = time.perf_counter()
    chunked.decrypt(key, sealed[number % 12], output=opened)
    total = time.perf_counter() - start
    if number >= 24:
        totals.append(total * 1e6)
        for step_label, spent in exclusive.items():
            per_call[step_label].append(spent * 1e6)
        per_call["(unwrapped)"].append(1e6 * (total - sum(exclusive.values())))
print(f"{label} ({ARRAYS}): call median {statistics.median(totals):.0f} us")
for step_label, spent in sorted(per_call.items(), key=lambda item: -statistics.median(item[1])):
    print(f"  {step_label:34s} {statistics.median(spent):7.1f}")
