"""An experiment (not kept): the pyopencl opening (1 GiB, output=) with the host kept busy
until shortly before the fused kernel's expected end (spinning on the clock, no driver
calls, yielding the GIL as it goes), then the blocking verdict read, against the plain
blocking read: does a host that slept through the kernel start the next call slowly?
The expected end is the launch's time plus the launch-to-verdict time of earlier calls,
less a margin (300 or 100 µs). Best of 3 runs of 5 calls, GB/s, alternating.

    python3 2026-11-26-hot-wait.py
"""
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
from aescl.engines.opencl import arrays, gcm

SIZE = 1 << 30
device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([device.cl_device]))
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
out = aescl.chunked.decrypt(key, sealed)
blocking = arrays._QueueChunkKernels.read_verdict
enqueue = gcm.GcmEngine.enqueue_crypt_hash
state = {"launched": 0.0, "kernel": 0.0, "margin": 0.0}


def stamped_enqueue(self, *args, **kwargs):
    event = enqueue(self, *args, **kwargs)
    state["launched"] = time.perf_counter()
    return event


def hot(self, verdict, also):
    until = state["launched"] + state["kernel"] - state["margin"]
    while time.perf_counter() < until:
        time.sleep(0)
    return blocking(self, verdict, also)


def learn(self, verdict, also):
    result = blocking(self, verdict, also)
    state["kernel"] = time.perf_counter() - state["launched"]
    return result


def rate():
    aescl.chunked.decrypt(key, sealed, output=out)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            aescl.chunked.decrypt(key, sealed, output=out)
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


gcm.GcmEngine.enqueue_crypt_hash = stamped_enqueue
arrays._QueueChunkKernels.read_verdict = learn
for _ in range(5):
    aescl.chunked.decrypt(key, sealed, output=out)
print("kernel+tail from launch:", round(state["kernel"] * 1e6), "us", flush=True)
for margin in (300e-6, 100e-6):
    state["margin"] = margin
    for number in range(4):
        for name, read_verdict in (("blocking", blocking), ("hot", hot)):
            arrays._QueueChunkKernels.read_verdict = read_verdict
            print(f"margin {margin * 1e6:.0f} round {number} {name} {rate():.1f}", flush=True)
