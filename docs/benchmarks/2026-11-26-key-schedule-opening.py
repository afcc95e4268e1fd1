"""The chunked format on pyopencl arrays (1 GiB, output=, aescl's own context, whose
queue profiles) with the chunk key's round keys expanded on the host (as aescl does)
or on the device in each work-group (AES_KEY_SCHEDULE_DEVICE=1): API GB/s, best of 3
runs of 5 calls, and the median event time of the fused kernel, four rounds
alternating (an experiment).

    python3 2026-11-26-key-schedule-opening.py
"""
import os
import statistics
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
from aescl import ghash
from aescl.engines.opencl import arrays, gcm
from aescl.engines.opencl.runtime import device_runtime

SIZE = 1 << 30
device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(device_runtime(device).context)
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
out = aescl.chunked.decrypt(key, sealed)
events = []
enqueue = gcm.GcmEngine.enqueue_crypt_hash


def recording(self, *args, **kwargs):
    event = enqueue(self, *args, **kwargs)
    events.append(event)
    return event


def kernels_with(schedule):
    def _kernels(self, array, device):
        engine = gcm.GcmEngine(self._key, device, schedule, array.context,
                               ghash.hash_subkey(self._key))
        return arrays._QueueChunkKernels(engine, device, array.context, self._key), \
            engine.runtime
    return _kernels


def rate(call):
    call()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            result = call()
        result.finish()
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


gcm.GcmEngine.enqueue_crypt_hash = recording
for number in range(4):
    for schedule in ("host", "device"):
        arrays.OpenclArrayChunks._kernels = kernels_with(schedule)
        figures = []
        for call in (lambda: aescl.chunked.decrypt(key, sealed, output=out) or out,
                     lambda: aescl.chunked.encrypt(key, message, output=sealed) or sealed):
            events.clear()
            gb_s = rate(call)
            queue.finish()
            kernel = statistics.median((e.profile.end - e.profile.start) / 1e3 for e in events)
            figures.append(f"{gb_s:.1f} GB/s (kernel {kernel:.0f} us)")
        print(f"{number} {schedule}: open {figures[0]}, seal {figures[1]}", flush=True)
