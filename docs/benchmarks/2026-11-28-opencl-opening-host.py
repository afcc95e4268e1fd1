"""Issue 57: where one OpenCL GPU's chunked opening spends host time against its sealing.
Host read and write rates of pinned memory, the tag comparison (`workers._matched`) on 1,024
and 4,096 tags, the format sealed and opened (best of 3, pieces of 1,024-4,096 chunks), and
the wall time a piece of `Pipeline._enqueue` and `_store_tasks` (one run each). Prints JSON.

    python3 docs/benchmarks/2026-11-28-opencl-opening-host.py   # PROBE_MIB, PROBE_TYPE
"""
import json, os, time
import numpy as np
import aescl
from aescl.timing import wall
from aescl.engines.opencl import workers, pipeline as pl

out = {}
spec = [d for d in aescl.devices() if d.engine == "opencl" and d.type == os.environ.get("PROBE_TYPE", "gpu")][0].id
M = 256 << 20
a = aescl.pinned_empty(M, spec); b = np.empty(M, np.uint8); a[:] = 1; b[:] = 1
def best(f, n=5):
    f(); return min(wall(f) for _ in range(n))
out["read pinned GB/s"] = round(M / best(lambda: np.copyto(b, a)) / 1e9, 2)
out["write pinned GB/s"] = round(M / best(lambda: np.copyto(a, b)) / 1e9, 2)
out["read ordinary GB/s"] = round(M / best(lambda: np.copyto(b[: M // 2], b[M // 2:])) / 1e9, 2)
for count in (1024, 4096):
    for name, arr in (("pinned", a), ("ordinary", b)):
        t = arr[: 32 * count]
        out[f"matched {count} {name} us"] = round(1e6 * best(lambda: workers._matched(t, 0, count, False), 20), 1)

N = int(os.environ.get("PROBE_MIB", "2048")) << 20
source = aescl.pinned_empty(N, spec); source[:] = 7
target = aescl.pinned_empty(N, spec)
sealed = aescl.pinned_empty(aescl.chunked.sealed_size(N), spec)
key = os.urandom(32)
aescl.chunked.encrypt(key, source, device=spec, output=sealed)
def rate(run, tries=3):
    run(); return round(N / min(wall(run) for _ in range(tries)) / 1e9, 1)
for batch in (1024, 2048, 4096):
    out[f"best b{batch}"] = (
        rate(lambda: aescl.chunked.encrypt(key, source, device=spec, output=sealed, batch_chunks=batch)),
        rate(lambda: aescl.chunked.decrypt(key, sealed, device=spec, output=target, batch_chunks=batch)))
assert bytes(target[:64]) == bytes([7] * 64) == bytes(target[-64:])
totals = {}
def timed(name, f):
    def g(*args, **kw):
        t0 = time.perf_counter()
        try:
            return f(*args, **kw)
        finally:
            s = totals.setdefault(name, [0, 0.0]); s[0] += 1; s[1] += time.perf_counter() - t0
    return g
orig = (workers._matched, pl.Pipeline._enqueue, pl.Pipeline._store_tasks, pl._InFlight.landed)
workers._matched = timed("matched", orig[0])
pl.Pipeline._enqueue = timed("enqueue", orig[1])
pl.Pipeline._store_tasks = timed("store_tasks", orig[2])
pl._InFlight.landed = timed("landed", orig[3])
for batch in (1024, 4096):
    for what in ("seal", "open"):
        totals.clear()
        run = (lambda: aescl.chunked.encrypt(key, source, device=spec, output=sealed, batch_chunks=batch)) if what == "seal" else (lambda: aescl.chunked.decrypt(key, sealed, device=spec, output=target, batch_chunks=batch))
        run(); totals.clear()
        t = wall(run)
        out[f"{what} b{batch}"] = {"GB/s": round(N / t / 1e9, 1), **{k: [v[0], round(1e6 * v[1] / max(1, v[0]), 1)] for k, v in totals.items()}}
print(json.dumps(out))
