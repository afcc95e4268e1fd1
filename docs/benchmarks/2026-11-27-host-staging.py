"""Issue 55 item 2: the host engine's chunked format on ordinary memory, staged through
shared memory to its worker processes, against the thread route and against
``pinned_empty(n, "host")``; best of 4 in one process. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-host-staging.py [MiB]     # default 1024

Staging runs on hosts of ``STAGE_MIN_CORES`` cores or more; "thread" raises
``STAGE_MIN_BYTES`` past the job, so the same build runs the thread route.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import aescl
from aescl.engines.host import engine as host


def best(run, nbytes: int, tries: int = 4) -> float:
    run()
    fastest = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run()
        fastest = min(fastest, time.perf_counter() - start)
    return round(nbytes / fastest / 1e9, 2)


def main(mib: int) -> None:
    n = mib << 20
    key, data = os.urandom(32), os.urandom(n)
    plain = np.frombuffer(data, np.uint8).copy()
    out = np.empty(aescl.chunked.sealed_size(n), np.uint8)
    pinned_in = aescl.pinned_empty(n, "host")
    pinned_out = aescl.pinned_empty(len(out), "host")
    pinned_in[:] = plain
    sealed = aescl.chunked.encrypt(key, data, device="host")
    figures = {}
    for route, stage_min in (("staged", host.STAGE_MIN_BYTES), ("thread", 1 << 62)):
        host.STAGE_MIN_BYTES = stage_min
        figures[f"{route} bytes->bytes encrypt"] = best(
            lambda: aescl.chunked.encrypt(key, data, device="host"), n)
        figures[f"{route} bytes->bytes decrypt"] = best(
            lambda: aescl.chunked.decrypt(key, sealed, device="host"), n)
        figures[f"{route} output= ordinary encrypt"] = best(
            lambda: aescl.chunked.encrypt(key, plain, device="host", output=out), n)
    figures["pinned encrypt"] = best(
        lambda: aescl.chunked.encrypt(key, pinned_in, device="host", output=pinned_out), n)
    assert aescl.chunked.decrypt(key, aescl.chunked.encrypt(key, data, device="host")) == data
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
