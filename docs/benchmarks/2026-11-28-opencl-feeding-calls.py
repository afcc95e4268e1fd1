"""Issue 57: one OpenCL GPU's pinned jobs (2 GiB) beside a spinning Python thread, with the
share of the time it got against a sleep, then the count, mean and longest wall time (µs) of
each pyopencl call and of `Pipeline._enqueue` in one run of each job. Prints JSON.

    python3 docs/benchmarks/2026-11-28-opencl-feeding-calls.py
"""
import json, os, sys, threading, time
import numpy as np
import pyopencl as cl
import aescl
from aescl.timing import wall
from aescl.engines.opencl import workers, pipeline as pl

out = {}
kind = os.environ.get("PROBE_TYPE", "gpu")
spec = [d for d in aescl.devices() if d.engine == "opencl" and d.type == kind][0].id
N = int(os.environ.get("PROBE_MIB", "2048")) << 20
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

# 1. the GIL: a counting thread beside each job, against the same time asleep
def counted(action):
    count = [0]; stop = [False]
    def spin():
        while not stop[0]:
            count[0] += 1
    t = threading.Thread(target=spin); t.start()
    began = time.perf_counter(); action(); took = time.perf_counter() - began
    stop[0] = True; t.join()
    return count[0] / took, took
idle_rate, _ = counted(lambda: time.sleep(0.1))
for name, job in jobs.items():
    alone = min(wall(job) for _ in range(3))
    rate, took = counted(job)
    out[f"{name}"] = {"GB/s alone": round(N / alone / 1e9, 1), "GB/s beside a spinner": round(N / took / 1e9, 1),
                      "spinner share": round(rate / idle_rate, 2)}

# 2. per call: wall time of pyopencl's enqueues and waits inside one run each
totals = {}
def timed(name, f):
    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            s = totals.setdefault(name, [0, 0.0, 0.0]); d = time.perf_counter() - t0
            s[0] += 1; s[1] += d; s[2] = max(s[2], d)
    return g
patched = {}
for name in ("enqueue_copy", "enqueue_barrier", "enqueue_marker", "enqueue_nd_range_kernel",
             "enqueue_fill_buffer", "enqueue_map_buffer"):
    patched[name] = getattr(cl, name)
    setattr(cl, name, timed(name, patched[name]))
for cls, meth in ((cl.CommandQueue, "flush"), (cl.Event, "wait"), (cl.Kernel, "set_args"), (cl.Buffer, "get_sub_region")):
    try:
        orig = getattr(cls, meth)
        setattr(cls, meth, timed(f"{cls.__name__}.{meth}", orig))
    except Exception as e:
        out[f"patch {meth}"] = repr(e)[:80]
pl.Pipeline._enqueue = timed("Pipeline._enqueue", pl.Pipeline._enqueue)
for name, job in jobs.items():
    totals.clear()
    t = wall(job)
    out[f"{name} calls"] = {"s": round(t, 4), **{k: [v[0], round(1e6 * v[1] / v[0], 1), round(1e6 * v[2])] for k, v in sorted(totals.items())}}
print(json.dumps(out))
