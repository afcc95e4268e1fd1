"""Where a torch opening's host time goes, step by step (2026-11-26).

The CUDA engine's counterpart of 2026-11-26-opening-step-costs.py: chunked.decrypt of
distinct 1 GiB messages (twelve, sealed under their own salts; output=), N calls, the
first 24 left out; each wrapped function's exclusive time, median per call, µs. "read"
holds the header's round trip and the wait for the kernel (the verdict's read).

    N=64 python3 2026-11-26-opening-step-costs-torch.py
"""
import functools
import os
import statistics
import time
from collections import defaultdict

import torch

from aescl import chunked, chunkformat, ghash
from aescl.engines import device_chunks
from aescl.engines.cuda import arrays, workers

SIZE = int(os.environ.get("SIZE", 1 << 30))
message = torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device="cuda")
key = os.urandom(32)
sealed = [chunked.encrypt(key, message) for _ in range(12)]
opened = chunked.decrypt(key, sealed[0])
assert torch.equal(opened, message)
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


for owner, name in (
        (chunked, "device_array_kind"), (chunked, "device_nbytes"), (chunked, "_open_header"),
        (chunked, "_array_chunks"), (chunked, "team"), (chunked, "array_device_rule"),
        (arrays, "cuda_bytes"), (arrays.CudaArrayChunks, "_run"), (arrays, "_chunked_output"),
        (arrays, "_on_gpu"), (arrays, "as_kind_of"), (arrays.CudaArrayChunks, "read"),
        (workers.CudaGhash, "read"), (ghash, "hash_subkey"), (device_chunks, "open_sealed"),
        (device_chunks, "_full_chunks"), (device_chunks, "_Batch"), (workers, "launch_kernel"),
        (workers, "launch_position_tables"), (device_chunks, "_empty_chunk_tag"),
        (workers.CudaChunkKernels, "verdict"), (workers.CudaChunkKernels, "read_verdict"),
        (workers.CudaChunkKernels, "crypt_and_tags"), (workers.CudaChunkKernels, "release_all"),
        (workers.CudaChunkKernels, "scratch"), (workers, "cuda_device"),
        (workers.keyschedule, "kernel_key_argument"), (chunkformat, "derive")):
    wrap(owner, name)
wrap(workers.CudaChunkKernels, "__init__", "CudaChunkKernels")
per_call, totals = defaultdict(list), []
for number in range(int(os.environ.get("N", 64))):
    exclusive.clear()
    start = time.perf_counter()
    chunked.decrypt(key, sealed[number % 12], output=opened)
    total = time.perf_counter() - start
    if number >= 24:
        totals.append(total * 1e6)
        for label, spent in exclusive.items():
            per_call[label].append(spent * 1e6)
        per_call["(unwrapped)"].append(1e6 * (total - sum(exclusive.values())))
print(f"torch: call median {statistics.median(totals):.0f} us")
for label, spent in sorted(per_call.items(), key=lambda item: -statistics.median(item[1])):
    print(f"  {label:34s} {statistics.median(spent):7.1f}")
