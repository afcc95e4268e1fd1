"""``aescl.AESGCM.encrypt_many``/``decrypt_many`` on the rows of a 2-D pyopencl array on
the OpenCL CPU device (PoCL): 16,384 rows of 1 KiB, nonces as a 16,384 x 12 array, the
best of 7 calls each, every call waited for (the result's events).

    python3 docs/benchmarks/2026-11-27-cpu-rows.py
    AESCL_HARDWARE_ROUNDS=0 python3 docs/benchmarks/2026-11-27-cpu-rows.py   # tables
    AESCL_WIDE_ROUNDS=0 python3 docs/benchmarks/2026-11-27-cpu-rows.py       # 128-bit
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as PycaAESGCM

import aescl

COUNT, LENGTH = 16384, 1024


def main() -> None:
    device = aescl.get_device("pocl")
    queue = cl.CommandQueue(cl.Context([device.cl_device]))
    key = os.urandom(16)
    messages = np.frombuffer(os.urandom(COUNT * LENGTH), np.uint8).reshape(COUNT, LENGTH)
    nonces = np.frombuffer(os.urandom(COUNT * 12), np.uint8).reshape(COUNT, 12)
    cipher, rows = aescl.AESGCM(key), cl_array.to_device(queue, messages)
    sealed = cipher.encrypt_many(nonces, rows)
    assert bytes(sealed.get()[5]) == PycaAESGCM(key).encrypt(bytes(nonces[5]),
                                                             bytes(messages[5]), None)
    sealing, opening = [], []
    for _ in range(7):
        start = time.perf_counter()
        sealed = cipher.encrypt_many(nonces, rows)
        cl.wait_for_events(sealed.events)
        sealing.append(time.perf_counter() - start)
        start = time.perf_counter()
        cipher.decrypt_many(nonces, sealed)  # (returns once every tag is checked)
        opening.append(time.perf_counter() - start)
    nbytes = COUNT * LENGTH
    print(f"encrypt_many {min(sealing) * 1e3:.1f} ms ({nbytes / min(sealing) / 1e9:.2f} GB/s), "
          f"decrypt_many {min(opening) * 1e3:.1f} ms ({nbytes / min(opening) / 1e9:.2f} GB/s)")


if __name__ == "__main__":
    main()
