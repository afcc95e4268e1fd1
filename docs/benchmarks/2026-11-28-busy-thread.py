"""Issue 57: one GPU's pinned jobs (2 GiB: CTR-128, the format sealed and opened) alone
(best of 3) and beside a Python thread that spins (best of 2), GB/s. ENGINE is `opencl`
or `cuda`; `pydll` (OpenCL) swaps pyopencl's host copies for calls through ctypes.PyDLL,
which keep the GIL: a diagnostic prototype only, not aescl's code.

    python3 docs/benchmarks/2026-11-28-busy-thread.py ENGINE [pydll]
"""
import ctypes, glob, json, os, sys, threading, time
import numpy as np
import pyopencl as cl
import aescl
from aescl.timing import wall

engine = sys.argv[1] if len(sys.argv) > 1 else "opencl"
patch = len(sys.argv) > 2 and sys.argv[2] == "pydll"
kind = os.environ.get("PROBE_TYPE", "gpu")
spec = [d for d in aescl.devices() if d.engine == engine and d.type == kind][0].id
N = int(os.environ.get("PROBE_MIB", "2048")) << 20

if patch:
    libdir = os.path.join(os.path.dirname(cl.__file__), ".libs")
    lib = ctypes.PyDLL(glob.glob(os.path.join(libdir, "libOpenCL*"))[0])
    sig = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t,
           ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    for name in ("clEnqueueWriteBuffer", "clEnqueueReadBuffer"):
        getattr(lib, name).argtypes = sig
        getattr(lib, name).restype = ctypes.c_int
    original = cl.enqueue_copy

    def enqueue_copy(queue, dest, src, **kw):
        to_device = isinstance(dest, cl.MemoryObjectHolder) and isinstance(src, np.ndarray)
        to_host = isinstance(src, cl.MemoryObjectHolder) and isinstance(dest, np.ndarray)
        if kw.get("is_blocking", True) or not (to_device or to_host):
            return original(queue, dest, src, **kw)
        host = src if to_device else dest
        buffer = dest if to_device else src
        offset = kw.get("dst_offset" if to_device else "src_offset", 0)
        waits = kw.get("wait_for") or []
        wait_list = (ctypes.c_void_p * max(1, len(waits)))(*[e.int_ptr for e in waits])
        event = ctypes.c_void_p()
        call = lib.clEnqueueWriteBuffer if to_device else lib.clEnqueueReadBuffer
        status = call(queue.int_ptr, buffer.int_ptr, 0, offset, host.nbytes,
                      host.__array_interface__["data"][0], len(waits),
                      wait_list if waits else None, ctypes.byref(event))
        if status:
            raise cl.RuntimeError(f"{call.__name__} failed: {status}")
        return cl.Event.from_int_ptr(event.value, retain=False)
    cl.enqueue_copy = enqueue_copy

source = aescl.pinned_empty(N, spec); source[:] = 7
target = aescl.pinned_empty(N, spec)
sealed = aescl.pinned_empty(aescl.chunked.sealed_size(N), spec)
key = os.urandom(32)
jobs = {
    "ctr": lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=key[:8], device=spec).encrypt(source, output=target),
    "seal": lambda: aescl.chunked.encrypt(key, source, device=spec, output=sealed),
    "open": lambda: aescl.chunked.decrypt(key, sealed, device=spec, output=target),
}
for job in jobs.values():
    job()
assert bytes(target[:64]) == bytes([7] * 64) == bytes(target[-64:])
out = {"engine": engine, "pydll": patch}
for name, job in jobs.items():
    alone = min(wall(job) for _ in range(3))
    stop = [False]
    def spin():
        while not stop[0]:
            pass
    t = threading.Thread(target=spin); t.start(); time.sleep(0.01)
    beside = min(wall(job) for _ in range(2))
    stop[0] = True; t.join()
    out[name] = [round(N / alone / 1e9, 1), round(N / beside / 1e9, 2)]
target[:] = 0
jobs["open"]()
assert bytes(target[:64]) == bytes([7] * 64) == bytes(target[-64:])
print(json.dumps(out))
