"""The chunked format on 1 GiB pyopencl arrays (NVIDIA's OpenCL, 2026-11-25, H100): input
from pyopencl's default allocator, against input from a MemoryPool (aescl makes the
result with the input's allocator, so the pool serves it too). Best of three rounds of
5 calls, each round until the last call's result is complete (its events: aescl works
on a queue of its own, which finishing the caller's queue does not wait for); GB/s of
plaintext. Prints JSON."""
import json
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl

SIZE = 1 << 30


def rate(work, calls=5):
    work().finish()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            result = work()
        result.finish()
        best = min(best, (time.perf_counter() - start) / calls)
    return round(SIZE / best / 1e9, 1)


def measure(queue, allocator, key, host):
    array = cl_array.to_device(queue, host, allocator=allocator)
    sealed = aescl.chunked.encrypt(key, array)
    return ([rate(lambda: aescl.chunked.encrypt(key, array)) for _ in range(2)],
            [rate(lambda: aescl.chunked.decrypt(key, sealed)) for _ in range(2)])


nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
key = os.urandom(32)
host = np.frombuffer(os.urandom(SIZE), np.uint8)
results = {}
for label, allocator in (("default allocator", None),
                         ("MemoryPool", cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue)))):
    sealing, opening = measure(queue, allocator, key, host)
    results[f"chunked.encrypt, {label} GB/s"] = sealing
    results[f"chunked.decrypt, {label} GB/s"] = opening
print(json.dumps(results, indent=1), flush=True)
