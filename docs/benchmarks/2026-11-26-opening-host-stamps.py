"""Host time stamps through a pyopencl opening (1 GiB, output=, a context of the script's
own): each wrapped function's and OpenCL call's entry and return, from the call's start,
median over 10 calls (µs; each stamp costs about a microsecond); then the costs of the
parts alone (timeit). SIZE and VENDOR as in 2026-11-26-opening-timeline.py.
"""
import os, sys, time, timeit, functools
import numpy as np
import pyopencl as cl, pyopencl.array as cla, pyopencl.tools as clt
import aescl
from aescl import ghash, keyschedule, chunkformat
from aescl.engines import device_chunks
from aescl.engines.opencl import gcm, arrays, kernels, tuning
SIZE = int(os.environ.get("SIZE", 1 << 30))
dev = next(d for d in aescl.devices() if d.is_opencl and d.vendor == os.environ.get("VENDOR", "nvidia"))
ctx = cl.Context([dev.cl_device]); q = cl.CommandQueue(ctx)
pool = clt.MemoryPool(clt.ImmediateAllocator(q))
msg = cla.to_device(q, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, msg)
out = aescl.chunked.decrypt(key, sealed)
marks = []
def wrap(obj, name, label=None):
    orig = getattr(obj, name)
    @functools.wraps(orig)
    def w(*a, **k):
        marks.append((label or name, time.perf_counter()))
        r = orig(*a, **k)
        marks.append(((label or name) + " ret", time.perf_counter()))
        return r
    setattr(obj, name, w)
for n in ("enqueue_nd_range_kernel", "enqueue_copy", "enqueue_fill_buffer", "enqueue_marker", "enqueue_barrier"):
    wrap(cl, n)
wrap(chunkformat, "derive"); wrap(arrays, "GcmEngine"); wrap(arrays, "_QueueChunkKernels")
wrap(ghash, "hash_subkey"); wrap(arrays, "_let_go_of_parked"); wrap(device_chunks, "_Batch")
wrap(kernels, "key_argument"); wrap(gcm, "key_argument", "gcm.key_argument"); wrap(gcm, "launch_config", "gcm.launch_config")
wrap(device_chunks, "_crypt_and_tags"); wrap(gcm.GcmEngine, "_positions_of"); wrap(gcm.GcmEngine, "enqueue_crypt_hash")
wrap(arrays._QueueChunkKernels, "counters"); wrap(device_chunks, "open_sealed"); wrap(arrays, "read_array")
wrap(arrays, "_device_within"); wrap(arrays, "_chunked_output")
runs = []
for i in range(12):
    marks.clear()
    t0 = time.perf_counter()
    aescl.chunked.decrypt(key, sealed, output=out)
    runs.append((t0, list(marks)))
# median per label occurrence
from collections import defaultdict
table = defaultdict(list)
for t0, ms in runs[2:]:
    seen = defaultdict(int)
    for label, t in ms:
        seen[label] += 1
        table[(label, seen[label])].append((t - t0) * 1e6)
order = sorted(table.items(), key=lambda kv: sorted(kv[1])[len(kv[1]) // 2])
for (label, n), v in order:
    v = sorted(v)
    print(f"{label:34s}#{n}  median +{v[len(v)//2]:8.1f} us  min +{v[0]:8.1f}")
def t(name, f, n=2000):
    print(f"{name:30s} {min(timeit.repeat(f, number=n, repeat=5))/n*1e6:7.2f} us")
ck = os.urandom(32); h = ghash.hash_subkey(ck)
t("launch_config", lambda: tuning.launch_config(dev))
t("key_argument", lambda: kernels.key_argument(ck, "host", False))
t("hash_subkey", lambda: ghash.hash_subkey(ck))
t("GcmEngine", lambda: gcm.GcmEngine(ck, dev, "host", ctx, h))
eng = gcm.GcmEngine(ck, dev, "host", ctx, h)
t("QueueChunkKernels", lambda: arrays._QueueChunkKernels(eng, dev, ctx, ck))
t("derive", lambda: chunkformat.derive(key, os.urandom(24), b""))
t("np.uint32", lambda: np.uint32(3))
