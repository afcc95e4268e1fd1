"""Openings of distinct messages on pyopencl arrays, command by command (2026-11-26).

1 GiB, output=, DISTINCT messages sealed under their own salts (more than an engine keeps
GHASH tables of), in aescl's own context, whose queue profiles. Per command: when its
enqueue returned on the host (µs from the call's start) and its start and end on the
device (µs from the fused kernel's start); the entry and return of a few Python steps;
medians (and minima) over CALLS calls, the first four left out. The barrier has no
device times on NVIDIA's OpenCL.

    python3 2026-11-26-opening-timeline-distinct.py
    VENDOR=pocl SIZE=1048576 python3 2026-11-26-opening-timeline-distinct.py   (on a CPU)
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
from aescl import chunkformat, ghash
from aescl.engines import device_chunks
from aescl.engines.opencl import arrays, gcm
from aescl.engines.opencl import runtime as opencl_runtime

SIZE = int(os.environ.get("SIZE", 1 << 30))
DISTINCT = int(os.environ.get("DISTINCT", 12))
CALLS = int(os.environ.get("CALLS", 28))
device = next(d for d in aescl.devices()
              if d.is_opencl and d.vendor == os.environ.get("VENDOR", "nvidia"))
runtime = opencl_runtime.device_runtime(device)
queue = cl.CommandQueue(runtime.context)
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = [aescl.chunked.encrypt(key, message) for _ in range(DISTINCT)]
opened = aescl.chunked.decrypt(key, sealed[0])
assert (opened.get() == message.get()).all()
log = []  # (label, event or None, host time)


def stamp_commands(name):
    original = getattr(cl, name)

    def stamped(*args, **kwargs):
        event = original(*args, **kwargs)
        label = (args[1].function_name if name == "enqueue_nd_range_kernel"
                 else name.replace("enqueue_", ""))
        log.append((label, event, time.perf_counter()))
        return event
    setattr(cl, name, stamped)


def stamp_steps(owner, name):
    original = getattr(owner, name)

    @functools.wraps(original)
    def stamped(*args, **kwargs):
        log.append((name + " in", None, time.perf_counter()))
        result = original(*args, **kwargs)
        log.append((name + " out", None, time.perf_counter()))
        return result
    setattr(owner, name, stamped)


for command in ("enqueue_nd_range_kernel", "enqueue_copy", "enqueue_fill_buffer",
                "enqueue_marker", "enqueue_barrier"):
    stamp_commands(command)
for owner, name in ((chunkformat, "derive"), (arrays, "GcmEngine"),
                    (arrays, "_QueueChunkKernels"), (ghash, "hash_subkey"),
                    (device_chunks, "open_sealed"), (arrays, "read_array"),
                    (gcm.GcmEngine, "_positions_of"), (gcm.GcmEngine, "enqueue_crypt_hash"),
                    (arrays._QueueChunkKernels, "read_verdict")):
    stamp_steps(owner, name)
calls = []
for number in range(CALLS):
    log.clear()
    start = time.perf_counter()
    aescl.chunked.decrypt(key, sealed[number % DISTINCT], output=opened)
    calls.append((start, time.perf_counter(), list(log)))
queue.finish()
runtime.queue.finish()
host, device_start, device_end = defaultdict(list), defaultdict(list), defaultdict(list)
totals, kernels_us = [], []
for start, end, entries in calls[4:]:
    fused = [event for label, event, _ in entries if label == "gcm_crypt_hash"][-1]
    origin = fused.profile.start
    seen = defaultdict(int)
    for label, event, at in entries:
        seen[label] += 1
        name = f"{label}#{seen[label]}"
        host[name].append(1e6 * (at - start))
        if event is not None:
            try:
                device_start[name].append((event.profile.start - origin) / 1e3)
                device_end[name].append((event.profile.end - origin) / 1e3)
            except cl.Error:  # (a barrier)
                pass
    totals.append(1e6 * (end - start))
    kernels_us.append((fused.profile.end - origin) / 1e3)
median = statistics.median
print(f"{device.name}: {len(totals)} calls of {DISTINCT} distinct messages; call median "
      f"{median(totals):.0f} min {min(totals):.0f} us; fused kernel median "
      f"{median(kernels_us):.0f} us ({100 * median(kernels_us) / median(totals):.1f}% of "
      "the call)")
for name in sorted(host, key=lambda n: median(host[n])):
    on_device = ""
    if device_start.get(name):
        on_device = (f"   device {median(device_start[name]):9.1f} .. "
                     f"{median(device_end[name]):9.1f}")
    print(f"  {name:30s} host +{median(host[name]):8.1f} (min {min(host[name]):8.1f})"
          + on_device)
