#!/usr/bin/env python3
"""Threads sharing one OpenCL device: the device lock against a pipeline per caller.

    python3 tools/probe_device_lock.py DEVICE lock|own MIB THREADS OFFSET

Each of THREADS threads runs six CTR-128 calls over its own MIB MiB (OFFSET bytes into
its buffer: 1 makes the device stage the data). ``lock`` is aescl as it ships (one job
at a time per device); ``own`` gives every thread its own pipeline, kernel objects and
compute queue and drops the lock: the other way issue 31 named. Prints the aggregate
GB/s (best of three) and how many of thread 0's outputs differed from pycryptodome.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import pyopencl as cl
from Crypto.Cipher import AES

import aescl
import aescl.engines.opencl.engine as opencl_engine
from aescl.engines.opencl import kernels
from aescl.engines.opencl import pipeline as streaming

CALLS = 6


def own_pipelines(device: aescl.Device) -> None:
    """Every thread its own kernel objects, pipeline and compute queue; no device lock."""
    kernels.runtime(device).lock = contextlib.nullcontext()
    local = threading.local()

    def kernel(device, filename, options, name):
        made = local.__dict__.setdefault("kernels", {})
        key = (filename, options, name)
        if key not in made:
            made[key] = cl.Kernel(kernels.build(device, filename, options), name)
        return made[key]

    def pipeline(device):
        if getattr(local, "pipeline", None) is None:
            local.pipeline = streaming.Pipeline(device)
            local.pipeline._compute_queue = cl.CommandQueue(local.pipeline.runtime.context,
                                                            device.cl_device)
        return local.pipeline

    opencl_engine.kernel, opencl_engine.pipeline = kernel, pipeline


def main() -> None:
    spec, way, mib, threads, offset = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    device, size, key, nonce = aescl.get_device(spec), mib << 20, bytes(16), bytes(8)
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(bytes(1 << 20))
    if way == "own":
        own_pipelines(device)
    buffers = [memoryview(bytearray(os.urandom(size + offset)))[offset:] for _ in range(threads)]
    want = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(buffers[0])
    wrong = [0]

    def work(index: int) -> None:
        for _ in range(CALLS):
            out = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(
                buffers[index])
            wrong[0] += index == 0 and out != want

    best = 0.0
    for _ in range(3):
        running = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        started = time.perf_counter()
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        best = max(best, threads * CALLS * size / (time.perf_counter() - started) / 1e9)
    print(f"{device.name[:40]}: {way}, {threads} threads, {mib} MiB +{offset}: "
          f"{best:.2f} GB/s (best of 3), thread 0 wrong {wrong[0]} of {3 * CALLS}")


if __name__ == "__main__":
    main()
