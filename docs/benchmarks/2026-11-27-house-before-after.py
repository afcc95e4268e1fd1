"""Issue 54's "nothing is lost": the figures the registry and the CUDA runtime move could
touch, in one process, for whichever aescl is importable. Run it for the code before and
after, alternately, on one machine, and compare.

Device arrays (the route the registry now serves): torch tensors on the CUDA engine and
pyopencl arrays on the first non-CPU OpenCL device; large calls in GB/s (best of 5) and a
4 KiB call in µs (median of 300). Host data in pinned memory (aescl.pinned_empty, output=)
on each device named: CTR, the chunked format both ways and MODE_GCM both ways; and 64 MiB
of bytes (host->host), chunked and MODE_GCM. Prints one JSON object. HOUSE_TORCH=0 skips
the torch tensors, HOUSE_CL=- the pyopencl arrays; HOUSE_LARGE sets the large size in
bytes.

    python3 2026-11-27-house-before-after.py [DEVICE ...]   # e.g. cuda:0 0:0, or pocl
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

import aescl

LARGE = int(os.environ.get("HOUSE_LARGE", 1 << 30))
SMALL = 4096


def best_rate(run, nbytes: int, wait, tries: int = 5) -> float:
    """GB/s of ``run``'s best time, each ended by ``wait(its result)``."""
    wait(run())
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        wait(run())
        best = min(best, time.perf_counter() - start)
    return round(nbytes / best / 1e9, 2)


def call_us(run, wait, calls: int = 300) -> float:
    """The median µs of a call of ``run`` and ``wait(its result)``."""
    for _ in range(20):
        wait(run())
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        wait(run())
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e6, 1)


def calls_on(make, wait, label: str, figures: dict) -> None:
    """CTR-128, CTR-256, chunked and GCM over arrays ``make(n)`` makes."""
    key16, key32, nonce = os.urandom(16), os.urandom(32), os.urandom(12)
    big, small = make(LARGE), make(SMALL)
    out = make(LARGE)
    for name, key in (("ctr-128", key16), ("ctr-256", key32)):
        figures[f"{label} {name} GB/s"] = best_rate(
            lambda k=key: aescl.new(k, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(big, output=out),
            LARGE, wait)
    figures[f"{label} chunked GB/s"] = best_rate(lambda: aescl.chunked.encrypt(key32, big),
                                                 LARGE, wait)
    figures[f"{label} gcm GB/s"] = best_rate(
        lambda: aescl.new(key32, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(big),
        LARGE, wait)
    figures[f"{label} ctr-128 4K us"] = call_us(
        lambda: aescl.new(key16, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(small), wait)
    figures[f"{label} chunked 4K us"] = call_us(lambda: aescl.chunked.encrypt(key32, small),
                                                wait)
    figures[f"{label} gcm 4K us"] = call_us(
        lambda: aescl.new(key32, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(small), wait)


def pinned_figures(spec: str, figures: dict) -> None:
    """Host data in pinned memory on device ``spec``, into ``output=``; and a chunked
    call on 64 MiB of bytes (host->host)."""
    key16, key32, nonce = os.urandom(16), os.urandom(32), os.urandom(8)
    data = aescl.pinned_empty(LARGE, spec)
    data[:] = 7
    out = aescl.pinned_empty(LARGE, spec)
    sealed = aescl.pinned_empty(aescl.chunked.sealed_size(LARGE), spec)
    for name, key in (("ctr-128", key16), ("ctr-256", key32)):
        figures[f"{spec} pinned {name} GB/s"] = best_rate(
            lambda k=key: aescl.new(k, aescl.MODE_CTR, nonce=nonce, device=spec).encrypt(
                data, output=out), LARGE, _done, 3)
    figures[f"{spec} pinned chunked GB/s"] = best_rate(
        lambda: aescl.chunked.encrypt(key32, data, device=spec, output=sealed), LARGE, _done, 3)
    figures[f"{spec} pinned chunked decrypt GB/s"] = best_rate(
        lambda: aescl.chunked.decrypt(key32, sealed, device=spec, output=out), LARGE, _done, 3)
    gcm_nonce = os.urandom(12)

    def gcm(name: str, *args: object, **kwargs: object) -> object:
        cipher = aescl.new(key32, aescl.MODE_GCM, nonce=gcm_nonce, device=spec)
        return getattr(cipher, name)(*args, **kwargs)

    _, tag = gcm("encrypt_and_digest", data, output=sealed[:LARGE])
    figures[f"{spec} pinned gcm GB/s"] = best_rate(
        lambda: gcm("encrypt_and_digest", data, output=sealed[:LARGE]), LARGE, _done, 3)
    figures[f"{spec} pinned gcm decrypt_and_verify GB/s"] = best_rate(
        lambda: gcm("decrypt_and_verify", sealed[:LARGE], tag, output=out), LARGE, _done, 3)
    plain = bytes(data[: 1 << 26])
    figures[f"{spec} host->host chunked GB/s"] = best_rate(
        lambda: aescl.chunked.encrypt(key32, plain, device=spec), 1 << 26, _done, 3)
    figures[f"{spec} host->host gcm GB/s"] = best_rate(
        lambda: gcm("encrypt_and_digest", plain), 1 << 26, _done, 3)


def _done(result: object) -> None:
    """Host data: the call returned with its work done."""


def main(devices: list[str]) -> None:
    figures: dict[str, float] = {}
    try:
        import torch

        if torch.cuda.is_available() and os.environ.get("HOUSE_TORCH") != "0":
            calls_on(lambda n: torch.empty(n, dtype=torch.uint8, device="cuda").random_(),
                     lambda result: torch.cuda.synchronize(), "torch", figures)
    except ImportError:
        pass
    # pyopencl arrays on $HOUSE_CL (a device spec; "-": none), else the first OpenCL GPU.
    spec = os.environ.get("HOUSE_CL")
    found = [] if spec == "-" else [aescl.get_device(spec)] if spec else [
        d for d in aescl.list_devices() if d.is_opencl and d.type == "gpu"]
    if found:
        import pyopencl as cl
        import pyopencl.array as cl_array

        queue = cl.CommandQueue(cl.Context([found[0].cl_device]))
        def finished(result: object) -> None:  # (chunked runs on aescl's queue)
            array = result[0] if isinstance(result, tuple) else result
            if array is not None:
                array.finish()
            queue.finish()

        calls_on(lambda n: cl_array.zeros(queue, n, np.uint8),  # (AES time is the same)
                 finished, f"pyopencl {found[0].id}", figures)
    for spec in devices:
        pinned_figures(spec, figures)
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1:])
