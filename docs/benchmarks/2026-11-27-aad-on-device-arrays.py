"""AAD hashed with a GCM message whose text is in pyopencl arrays, against host-data GHASH
on the same OpenCL CPU device (docs/benchmarks/README.md, 2026-11-27).

Usage: python3 2026-11-27-aad-on-device-arrays.py MIB
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

import aescl


def main() -> None:
    device = next(d for d in aescl.devices() if d.type == "cpu" and d.is_opencl)
    queue = cl.CommandQueue(cl.Context([device.cl_device]))
    nbytes = int(sys.argv[1]) << 20
    aad = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    text = cl_array.to_device(queue, np.zeros(4096, np.uint8))

    def on_arrays() -> bytes:
        cipher = aescl.new(bytes(32), aescl.MODE_GCM, nonce=bytes(12))
        cipher.update(aad)
        cipher.encrypt(text)
        return cipher.digest()

    def on_host_data() -> bytes:
        cipher = aescl.new(bytes(32), aescl.MODE_GCM, nonce=bytes(12), device=device)
        cipher.update(aad)
        cipher.encrypt(bytes(4096))
        return cipher.digest()

    for name, call in (("pyopencl arrays", on_arrays), ("host data, same device", on_host_data)):
        call()
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - started)
        print(f"{name}: {nbytes / best / 1e9:.3f} GB/s of AAD ({nbytes >> 20} MiB)")


if __name__ == "__main__":
    main()
