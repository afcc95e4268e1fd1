"""The chunked format through the public API on 1 GiB device arrays, both engines in one
process (2026-11-25, H100): torch tensors (CUDA engine; synchronized at the end of each
round) and pyopencl arrays on NVIDIA's OpenCL, from a MemoryPool and from pyopencl's
default allocator (each round until the last result's events are complete: aescl
works on a queue of its own, which finishing the caller's does not wait for). Best of
three rounds of 5 calls, GB/s of plaintext; each figure twice or three times. Prints
JSON."""
import json
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools
import torch

import aescl

SIZE = 1 << 30


def rate(work, wait, calls=5):
    wait(work())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            result = work()
        wait(result)
        best = min(best, (time.perf_counter() - start) / calls)
    return round(SIZE / best / 1e9, 1)


def both_ways(results, label, message, wait, openings=3):
    sealed = aescl.chunked.encrypt(key, message)
    results[f"{label} chunked.encrypt GB/s"] = [
        rate(lambda: aescl.chunked.encrypt(key, message), wait) for _ in range(2)]
    results[f"{label} chunked.decrypt GB/s"] = [
        rate(lambda: aescl.chunked.decrypt(key, sealed), wait) for _ in range(openings)]


key = os.urandom(32)
host = np.frombuffer(os.urandom(SIZE), np.uint8)
results = {}
both_ways(results, "torch", torch.from_numpy(host.copy()).cuda(),
          lambda _: torch.cuda.synchronize())
torch.cuda.empty_cache()
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
for label, allocator in (("MemoryPool", cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))),
                         ("default allocator", None)):
    both_ways(results, f"pyopencl, {label},", cl_array.to_device(queue, host, allocator=allocator),
              lambda result: result.finish())
print(json.dumps(results, indent=1), flush=True)
