"""Issue 55 (item 2): the chunked format on the host engine, bytes in and bytes out, on a
host of few cores, in a long-lived process: ``new`` (the worker processes take large
jobs once they run, started by the process's second such job) or ``old`` (every job on
one thread: REACH_MIN_CORES raised past the host's cores). 256 MiB; four rounds of a
seal and an open first, then best of 5 each. Prints one JSON object, GB/s.

    python3 docs/benchmarks/2026-11-28-few-cores-workers.py new|old
"""

from __future__ import annotations

import json
import os
import sys
import time

import aescl
from aescl.engines.host import engine as host_engine
from aescl.timing import wall

NBYTES = 256 << 20


def best(run, tries: int = 5) -> float:
    return round(NBYTES / min(wall(run) for _ in range(tries)) / 1e9, 2)


def main(route: str) -> None:
    if route == "old":
        host_engine.REACH_MIN_CORES = 1 << 20
    data, key = os.urandom(NBYTES), os.urandom(32)
    sealed = aescl.chunked.encrypt(key, data, device="host")
    for _ in range(4):  # (the new route's workers start during these)
        aescl.chunked.encrypt(key, data, device="host")
        aescl.chunked.decrypt(key, sealed, device="host")
    time.sleep(1)
    print(json.dumps({
        "route": route,
        "seal": best(lambda: aescl.chunked.encrypt(key, data, device="host")),
        "open": best(lambda: aescl.chunked.decrypt(key, sealed, device="host")),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
