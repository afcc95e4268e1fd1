"""The verdict read of a pyopencl opening (1 GiB, output=), blocking as aescl does, or
spun on its event's status so that the host thread stays busy through the kernel
(an experiment: aescl blocks). Best of 3 runs of 5 calls, GB/s, six rounds alternating.

    python3 2026-11-26-verdict-spin.py
"""
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
from aescl.engines import device_chunks
from aescl.engines.opencl import arrays

SIZE = 1 << 30
device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([device.cl_device]))
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
out = aescl.chunked.decrypt(key, sealed)
blocking = arrays._QueueChunkKernels.read_verdict
COMPLETE = cl.command_execution_status.COMPLETE


def spun(self, verdict, also):
    """read_verdict with a non-blocking read, flushed, then its status polled."""
    found = np.empty(device_chunks.VERDICT_BYTES, np.uint8)
    beside = device_chunks.VERDICT_ALSO_AT
    if also is not None:
        cl.enqueue_copy(self._queue, verdict.buffer, also.buffer, byte_count=also.nbytes,
                        src_offset=also.offset, dst_offset=beside)
    event = cl.enqueue_copy(self._queue, found, verdict.buffer, is_blocking=False)
    self._queue.flush()
    while event.command_execution_status != COMPLETE:
        pass
    event.wait()
    value = int(found[:4].view(np.uint32)[0])
    if value == device_chunks.NO_MISMATCH:
        runtime = self._engine.runtime
        with runtime.lock:
            runtime.verdicts.append(verdict.buffer)
    return value, found[beside : beside + (0 if also is None else also.nbytes)].tobytes()


def rate():
    aescl.chunked.decrypt(key, sealed, output=out)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            aescl.chunked.decrypt(key, sealed, output=out)
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


for number in range(6):
    for name, read_verdict in (("blocking", blocking), ("spun", spun)):
        arrays._QueueChunkKernels.read_verdict = read_verdict
        print(number, name, round(rate(), 1), flush=True)
