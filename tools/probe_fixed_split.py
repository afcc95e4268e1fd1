"""Probe: one 1 GiB CTR-128 job split at a fixed ratio between the GPU (in this process,
through aescl) and OpenSSL on the host's cores, as threads of this process or as worker
processes, over the same shared, pinned memory (docs/benchmarks, 2026-11-24).

Also shows that a CL_MEM_USE_HOST_PTR buffer over ordinary memory pins it for the
NVIDIA driver: copies from the plain host address then run at the pinned rate.

Run on the accelerator machine: [THREADS=1] [W=15] python3 tools/probe_fixed_split.py
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
from multiprocessing.pool import ThreadPool

import numpy as np
import probe_timing  # tools/, beside this script
import pyopencl as cl
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import aescl
from aescl.devices import get_device
from aescl.engines.opencl import pipeline as streaming
from aescl.engines.opencl.kernels import runtime

N = int(os.environ.get("N", 1 << 30))
SPEC = os.environ.get("SPEC", "gpu")
WORKERS = int(os.environ.get("W", 15))
KEY = bytes(range(16))
STEP = 64 << 20
_view: memoryview | None = None  # the shared memory, in each worker


def attach(owner: int, fd: int, size: int) -> None:
    global _view
    handle = os.open(f"/proc/{owner}/fd/{fd}", os.O_RDWR)
    # Populated at once: first touches in a fresh mapping halved the workers' speed.
    _view = memoryview(mmap.mmap(handle, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE))


def work(lo: int, hi: int) -> int:
    """CTR-128 of input bytes [lo, hi) into the output half, counter from block lo/16."""
    assert _view is not None
    context = Cipher(algorithms.AES(KEY), modes.CTR((lo // 16).to_bytes(16, "big"))).encryptor()
    for start in range(lo, hi, STEP):
        stop = min(hi, start + STEP)
        context.update_into(_view[start:stop], _view[N + start : N + stop])
    return hi - lo


def pinning(device) -> None:
    rt = runtime(device)
    queue, on_device = rt.queue, cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, N)
    ordinary = np.ones(N, np.uint8)
    rate = lambda a: probe_timing.best_gb_s(  # noqa: E731
        lambda: cl.enqueue_copy(queue, on_device, a).wait(), N, repeats=4, warm_up=True)
    print(f"host->device from numpy memory: {rate(ordinary):.1f} GB/s", flush=True)
    keeper = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                       hostbuf=ordinary)
    print(f"the same memory under a USE_HOST_PTR buffer: {rate(ordinary):.1f} GB/s", flush=True)
    keeper.release()


def main() -> None:
    device = get_device(SPEC)
    pinning(device)
    fd = os.memfd_create("aescl-probe")
    os.ftruncate(fd, 2 * N)
    whole = np.frombuffer(mmap.mmap(fd, 2 * N, flags=mmap.MAP_SHARED), np.uint8)
    whole[:N] = np.resize(np.frombuffer(os.urandom(1 << 20), np.uint8), N)
    _keeper = cl.Buffer(runtime(device).context,
                        cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=whole)
    start = int(whole.__array_interface__["data"][0])
    streaming._pinned_ranges.setdefault(device.id, {})["probe"] = (start, start + 2 * N)
    source, target = whole[:N], whole[N:]
    if os.environ.get("THREADS"):
        global _view
        _view = memoryview(whole)
        pool = ThreadPool(WORKERS)
    else:
        pool = multiprocessing.get_context("spawn").Pool(
            WORKERS, initializer=attach, initargs=(os.getpid(), fd, 2 * N))
    reference = np.empty(N, np.uint8)
    Cipher(algorithms.AES(KEY), modes.CTR(bytes(16))).encryptor().update_into(source, reference)

    def job(host_fraction: float) -> None:
        split = int(N * (1 - host_fraction)) >> 20 << 20
        bounds = [split + (N - split) * i // WORKERS // 16 * 16 for i in range(WORKERS)] + [N]
        pieces = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        pending = pool.starmap_async(work, pieces) if split < N else None
        if split:
            aescl.new(KEY, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
                      device=SPEC).encrypt(source[:split], output=target[:split])
        if pending is not None:
            pending.get()

    kind = "threads" if os.environ.get("THREADS") else "processes"
    for fraction in (0.0, 1.0, 0.25, 0.3, 0.35, 0.4, 0.45):
        target[:] = 0
        job(fraction)
        same = bool(np.array_equal(target, reference))
        rate = probe_timing.best_gb_s(lambda f=fraction: job(f), N, repeats=6)
        print(f"{WORKERS} {kind}, host fraction {fraction:.2f}: {rate:6.2f} GB/s, "
              f"same as OpenSSL alone: {same}", flush=True)
    pool.close()


if __name__ == "__main__":
    main()
