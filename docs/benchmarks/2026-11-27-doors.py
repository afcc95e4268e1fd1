"""The doors of one call on host data, default device, 256 MiB, best of 4 (GB/s): bytes
in and bytes out; ``output=`` into ordinary memory (a NumPy array); input and output in
``aescl.pinned_empty(n)`` (no device named: the default team's memory, shared with the
host engine's worker processes where it takes part). Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-doors.py [MiB]
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import aescl


def best(run, nbytes: int, tries: int = 4) -> float:
    run()
    fastest = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run()
        fastest = min(fastest, time.perf_counter() - start)
    return round(nbytes / fastest / 1e9, 3)


def main(mib: int) -> None:
    n = mib << 20
    key, nonce = os.urandom(32), os.urandom(12)
    plain = os.urandom(n)
    ordinary = np.frombuffer(plain, np.uint8).copy()
    pinned = aescl.pinned_empty(n)
    pinned[:] = ordinary
    sealed_n = aescl.chunked.sealed_size(n)
    outputs = {"ordinary": (np.empty(n, np.uint8), np.empty(sealed_n, np.uint8)),
               "pinned": (aescl.pinned_empty(n), aescl.pinned_empty(sealed_n))}
    figures = {}
    for door, data in (("bytes", plain), ("ordinary", ordinary), ("pinned", pinned)):
        out, sealed = outputs.get(door, (None, None))
        figures[f"chunked.encrypt {door}"] = best(
            lambda d=data, o=sealed: aescl.chunked.encrypt(key, d, output=o), n)
        figures[f"CTR {door}"] = best(
            lambda d=data, o=out: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8]).encrypt(
                d, output=o), n)
        figures[f"GCM encrypt_and_digest {door}"] = best(
            lambda d=data, o=out: aescl.new(key, aescl.MODE_GCM, nonce=nonce)
            .encrypt_and_digest(d, output=o), n)
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
