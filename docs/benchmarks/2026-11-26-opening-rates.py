"""The chunked format on pyopencl arrays alone (NVIDIA's OpenCL, 1 GiB, a MemoryPool in a
context of the script's own): sealing and opening, new results and output=, each rate
as in 2026-11-26-device-arrays-output.py (best of three rounds of five calls, GB/s),
REPEATS times; prints one JSON line. Used 2026-11-26 (H200) to compare two builds of
aescl in one lease (PYTHONPATH naming each in turn).

PROFILE=1: then a cProfile of 20 openings and the time of 20 more.
WITH_TORCH=1: a torch CUDA context made first (as in the dated script, which runs torch
before pyopencl); 2: and aescl's CUDA engine used once. NOGC=1: Python's garbage
collector off. POLL=1: opening waits for its tags by polling the read's event (an
experiment; not what aescl does).
"""
import cProfile, json, os, pstats, sys, time
import numpy as np
import pyopencl as cl, pyopencl.array as cla, pyopencl.tools as clt
import aescl
if os.environ.get("WITH_TORCH"):
    import torch
    torch.zeros(1, device="cuda")  # a CUDA context current on this thread, as in the dated script
    if os.environ.get("WITH_TORCH") == "2":  # and aescl's CUDA engine used once
        aescl.chunked.decrypt(b"k" * 32, aescl.chunked.encrypt(b"k" * 32, torch.zeros(1 << 20, dtype=torch.uint8, device="cuda")))

SIZE = 1 << 30
def rate(call, wait, rounds=3, per=5):
    wait(call())
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(per):
            result = call()
        wait(result)
        best = min(best, (time.perf_counter() - start) / per)
    return round(SIZE / best / 1e9, 1)

if os.environ.get("NOGC"):
    import gc; gc.disable()
if os.environ.get("POLL"):
    from aescl.engines.opencl import arrays as _arrays
    def first_mismatch(self, computed, received, count):
        found = np.array([count], np.uint32)
        index = self._take(found.nbytes)
        cl.enqueue_fill_buffer(self._queue, index, found, 0, found.nbytes)
        buffers = self._buffer(computed), self._buffer(received)
        self._first_mismatch.set_args(*buffers, np.uint32(count), index)
        groups = min(self._groups, -(-count // self._group))
        cl.enqueue_nd_range_kernel(self._queue, self._first_mismatch, (groups * self._group,), (self._group,))
        ev = cl.enqueue_copy(self._queue, found, index, is_blocking=False)
        self._queue.flush()
        complete = cl.command_execution_status.COMPLETE
        while ev.command_execution_status != complete:
            pass
        return int(found[0])
    _arrays._QueueChunkKernels.first_mismatch = first_mismatch
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
pool = clt.MemoryPool(clt.ImmediateAllocator(queue))
message = cla.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
opened = aescl.chunked.decrypt(key, sealed)
assert (opened.get() == message.get()).all()
wait = lambda r: r.finish()
res = {}
for i in range(int(os.environ.get("REPEATS", "2"))):
    res.setdefault("encrypt new", []).append(rate(lambda: aescl.chunked.encrypt(key, message), wait))
    res.setdefault("encrypt output=", []).append(rate(lambda: aescl.chunked.encrypt(key, message, output=sealed) or sealed, wait))
    res.setdefault("decrypt new", []).append(rate(lambda: aescl.chunked.decrypt(key, sealed), wait))
    res.setdefault("decrypt output=", []).append(rate(lambda: aescl.chunked.decrypt(key, sealed, output=opened) or opened, wait))
print(json.dumps(res), flush=True)
if os.environ.get("PROFILE"):
    pr = cProfile.Profile(); pr.enable()
    for _ in range(20):
        aescl.chunked.decrypt(key, sealed, output=opened)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(30)
    t = []
    for _ in range(20):
        s = time.perf_counter(); aescl.chunked.decrypt(key, sealed, output=opened); t.append(time.perf_counter() - s)
    print("call ms min/median", round(min(t)*1e3, 3), round(sorted(t)[10]*1e3, 3))
