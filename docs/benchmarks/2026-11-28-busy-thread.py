"""Issue 57: one GPU's pinned jobs (2 GiB: CTR-128, the format sealed and opened) alone
(best of 3) and beside a Python thread that spins (best of 2), GB/s. ENGINE is ``opencl``
or ``cuda``; ``pydll`` (OpenCL) swaps pyopencl's host copies for calls through
ctypes.PyDLL, which keep the GIL: a diagnostic prototype only, not aescl's code.

    python3 docs/benchmarks/2026-11-28-busy-thread.py ENGINE [pydll]
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import threading
import time

import numpy as np
import pyopencl as cl
from one_gpu_jobs import PinnedJobs, first_device

from aescl.timing import wall


def copies_that_keep_the_gil() -> None:
    """pyopencl's non-blocking copies between host arrays and buffers, replaced by the
    same OpenCL calls through ctypes.PyDLL (which does not let the GIL go)."""
    library = glob.glob(os.path.join(os.path.dirname(cl.__file__), ".libs", "libOpenCL*"))[0]
    opencl = ctypes.PyDLL(library)
    arguments = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t,
                 ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p,
                 ctypes.POINTER(ctypes.c_void_p)]
    for name in ("clEnqueueWriteBuffer", "clEnqueueReadBuffer"):
        getattr(opencl, name).argtypes = arguments
        getattr(opencl, name).restype = ctypes.c_int
    pyopencls = cl.enqueue_copy

    def enqueue_copy(queue, dest, src, **options):
        to_device = isinstance(dest, cl.MemoryObjectHolder) and isinstance(src, np.ndarray)
        to_host = isinstance(src, cl.MemoryObjectHolder) and isinstance(dest, np.ndarray)
        if options.get("is_blocking", True) or not (to_device or to_host):
            return pyopencls(queue, dest, src, **options)
        host, buffer = (src, dest) if to_device else (dest, src)
        offset = options.get("dst_offset" if to_device else "src_offset", 0)
        waits = options.get("wait_for") or []
        wait_list = (ctypes.c_void_p * max(1, len(waits)))(*[e.int_ptr for e in waits])
        event = ctypes.c_void_p()
        call = opencl.clEnqueueWriteBuffer if to_device else opencl.clEnqueueReadBuffer
        status = call(queue.int_ptr, buffer.int_ptr, 0, offset, host.nbytes,
                      host.__array_interface__["data"][0], len(waits),
                      wait_list if waits else None, ctypes.byref(event))
        if status:
            raise cl.RuntimeError(f"{call.__name__} failed: {status}")
        return cl.Event.from_int_ptr(event.value, retain=False)
    cl.enqueue_copy = enqueue_copy


def main(engine: str, pydll: bool) -> None:
    if pydll:
        copies_that_keep_the_gil()
    data = PinnedJobs(first_device(engine))
    for job in data.jobs().values():
        job()
    assert data.opened_intact()
    figures: dict[str, object] = {"engine": engine, "pydll": pydll}
    for name, job in data.jobs().items():
        alone = min(wall(job) for _ in range(3))
        stop = [False]

        def spin(stop: list[bool] = stop) -> None:
            while not stop[0]:
                pass
        busy = threading.Thread(target=spin)
        busy.start()
        time.sleep(0.01)
        beside = min(wall(job) for _ in range(2))
        stop[0] = True
        busy.join()
        figures[name] = [data.gb_s(alone), round(data.nbytes / beside / 1e9, 2)]
    data.target[:] = 0
    data.open()
    assert data.opened_intact()
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "opencl", sys.argv[2:3] == ["pydll"])
