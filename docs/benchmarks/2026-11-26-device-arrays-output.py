"""Issue 33's figures through the public API on 1 GiB device arrays, with and without
``output=`` (2026-11-26, H100): CTR-128, CTR-256 and the chunked format, torch tensors
on the CUDA engine and pyopencl arrays on NVIDIA's OpenCL (from a MemoryPool and from
pyopencl's default allocator).

Each figure is the best of three rounds of 5 calls (after one call to warm up), GB/s of
plaintext, taken twice. A round ends when its work is done: torch synchronized; pyopencl
waited on by the last result's events, or, with ``output=``, by the output's (aescl works
on a queue of its own for the chunked format, which finishing the caller's does not wait
for). ``output=`` for sealing is the array an earlier sealing call returned, whose chunks
lie where the kernels take them (docs/gpu-arrays.md). Prints JSON; writes it to
$OUT/device_arrays_output.json when $OUT is set.
"""
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


def rate(call, wait):
    """GB/s: best of three rounds of 5 calls of ``call``; ``wait(result)`` ends a round."""
    wait(call())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            result = call()
        wait(result)
        best = min(best, (time.perf_counter() - start) / 5)
    return round(SIZE / best / 1e9, 1)


def figures(results, label, message, wait):
    """Every figure for one kind of array; ``wait(result or output)`` ends a round."""
    for bits in (128, 256):
        key = os.urandom(bits // 8)
        cipher = aescl.new(key, aescl.MODE_CTR, nonce=bytes(8))
        out = cipher.encrypt(message)
        results[f"{label} CTR-{bits} new array"] = [
            rate(lambda k=key: aescl.new(k, aescl.MODE_CTR, nonce=bytes(8)).encrypt(message),
                 wait) for _ in range(2)]
        results[f"{label} CTR-{bits} output="] = [
            rate(lambda k=key: aescl.new(k, aescl.MODE_CTR, nonce=bytes(8)).encrypt(
                message, output=out) or out, wait) for _ in range(2)]
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, message)
    opened = aescl.chunked.decrypt(key, sealed)
    for what, call in (
            ("chunked.encrypt new array", lambda: aescl.chunked.encrypt(key, message)),
            ("chunked.encrypt output=",
             lambda: aescl.chunked.encrypt(key, message, output=sealed) or sealed),
            ("chunked.decrypt new array", lambda: aescl.chunked.decrypt(key, sealed)),
            ("chunked.decrypt output=",
             lambda: aescl.chunked.decrypt(key, sealed, output=opened) or opened)):
        results[f"{label} {what}"] = [rate(call, wait) for _ in range(2)]


host = np.frombuffer(os.urandom(SIZE), np.uint8)
results = {"device": torch.cuda.get_device_name(0)}
figures(results, "torch", torch.from_numpy(host.copy()).cuda(),
        lambda _: torch.cuda.synchronize())
torch.cuda.empty_cache()
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
for label, allocator in (("MemoryPool", cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))),
                         ("default allocator", None)):
    figures(results, f"pyopencl, {label},", cl_array.to_device(queue, host, allocator=allocator),
            lambda result: result.finish())
print(json.dumps(results, indent=1), flush=True)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "device_arrays_output.json"), "w") as f:
        json.dump(results, f, indent=1)
