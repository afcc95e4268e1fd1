"""Why a pyopencl opening into a new array is slower than one into ``output=`` (2026-11-26):
1 GiB messages in a MemoryPool on NVIDIA's OpenCL, each call timed to its end (an
opening waits for its tags), median and least of 15 calls, three rounds in turn.

A: ``output=`` one array; B: a new array, the last result kept until the call returns
(as in 2026-11-26-paired-rounds.py); C: a new array, the last result dropped first, so
that the pool hands the same memory out again; D: ``output=`` two arrays in turn (the
memory alternating as in B, with no allocation). Then pyopencl's ``cl_array.empty``
from the pool alone.

    python3 2026-11-26-opening-new-array.py      (SIZE=..., VENDOR=pocl to try it here)
"""
import os
import statistics
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl

SIZE = int(os.environ.get("SIZE", 1 << 30))
VENDOR = os.environ.get("VENDOR", "nvidia")
device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == VENDOR)
queue = cl.CommandQueue(cl.Context([device.cl_device]))
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
host = np.frombuffer(os.urandom(SIZE), np.uint8)
message = cl_array.to_device(queue, host, allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
first, second = aescl.chunked.decrypt(key, sealed), aescl.chunked.decrypt(key, sealed)
assert (first.get()[:4096] == host[:4096]).all()
queue.finish()


def times(call, keep_last):
    """Seconds of 15 calls; ``keep_last``: the last result lives until the call returns."""
    seconds, last = [], call() if keep_last else None
    queue.finish()
    for _ in range(15):
        if not keep_last:
            last = None
        start = time.perf_counter()
        result = call()
        result.finish()
        seconds.append(time.perf_counter() - start)
        last = result  # noqa: F841 (kept until the next call returns)
    return seconds


turn = [0]


def two_in_turn():
    turn[0] ^= 1
    output = first if turn[0] else second
    aescl.chunked.decrypt(key, sealed, output=output)
    return output


variants = {
    "A output= one": (lambda: aescl.chunked.decrypt(key, sealed, output=first) or first, True),
    "B new, kept": (lambda: aescl.chunked.decrypt(key, sealed), True),
    "C new, dropped first": (lambda: aescl.chunked.decrypt(key, sealed), False),
    "D output= two in turn": (two_in_turn, True),
}
for number in range(3):
    for name, (call, keep_last) in variants.items():
        t = times(call, keep_last)
        median = statistics.median(t)
        print(f"round {number} {name}: median {1e6 * median:.0f} us, min {1e6 * min(t):.0f} us, "
              f"{SIZE / median / 1e9:.1f} GB/s", flush=True)
t = []
for _ in range(50):
    start = time.perf_counter()
    made = cl_array.empty(queue, SIZE, np.uint8, allocator=pool)
    t.append(time.perf_counter() - start)
    del made
print(f"cl_array.empty from the pool: median {1e6 * statistics.median(t):.1f} us")
