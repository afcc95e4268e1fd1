"""CTR-128 on a 1 GiB JAX array through the CUDA engine (a new cipher a call, the result a
new JAX array): GB/s of ten calls then a wait, three rounds, with the median host time
of a call and of its array steps (µs); then the same on a CuPy array.

    python3 2026-11-26-jax-ctr-calls.py
"""
import functools
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import cupy  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import aescl  # noqa: E402
from aescl.engines.cuda import arrays  # noqa: E402

stamps = []


def stamped(owner, name):
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        stamps.append((name, (time.perf_counter() - start) * 1e6))
        return result

    setattr(owner, name, wrapper)


for name in ("cuda_bytes", "empty_like", "as_kind_of", "_output_bytes"):
    stamped(arrays, name)
SIZE = 1 << 30
data = jax.device_put(np.frombuffer(os.urandom(SIZE), np.uint8), jax.devices("gpu")[0])
key = os.urandom(16)


def call(array):
    return aescl.new(key, aescl.MODE_CTR, nonce=bytes(8)).encrypt(array)


call(data).block_until_ready()
for number in range(3):
    stamps.clear()
    totals = []
    start = time.perf_counter()
    for _ in range(10):
        began = time.perf_counter()
        result = call(data)
        totals.append((time.perf_counter() - began) * 1e6)
    result.block_until_ready()
    seconds = (time.perf_counter() - start) / 10
    steps = {}
    for name, us in stamps:
        steps.setdefault(name, []).append(us)
    print(f"round {number}: {SIZE / seconds / 1e9:.1f} GB/s; call median "
          f"{statistics.median(totals):.0f} us; "
          + ", ".join(f"{name} {statistics.median(us):.0f}" for name, us in steps.items()),
          flush=True)
on_cupy = cupy.asarray(np.frombuffer(os.urandom(SIZE), np.uint8))
for number in range(2):
    start = time.perf_counter()
    for _ in range(10):
        call(on_cupy)
    cupy.cuda.get_current_stream().synchronize()
    print(f"cupy round {number}: {SIZE / ((time.perf_counter() - start) / 10) / 1e9:.1f} GB/s",
          flush=True)
