"""``all`` on memory from ``aescl.pinned_empty(n, "all")``: CTR-128, the chunked format
sealed and opened, six runs each (the first a warm-up: each run's GB/s is kept), and
what each member did in the last (``teams.team("all").shares``: its part of the job and
its seconds), with the rates the process measured. $PROBE_MIB MiB (2048 by default).
Run it with a fresh ``$AESCL_CACHE_DIR`` to see the guesses at work. Prints JSON.

    AESCL_CACHE_DIR=$(mktemp -d) python3 docs/benchmarks/2026-12-01-all-pinned-shares.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import aescl
from aescl import rates, teams
from aescl.timing import wall

NBYTES = int(os.environ.get("PROBE_MIB", "2048")) << 20


def main() -> None:
    key = os.urandom(32)
    source = aescl.pinned_empty(NBYTES, "all")
    source[:] = 7
    target = aescl.pinned_empty(NBYTES, "all")
    sealed = aescl.pinned_empty(aescl.chunked.sealed_size(NBYTES), "all")
    jobs: dict[str, tuple[Callable[[], object], int]] = {
        "ctr": (lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=key[:8], device="all")
                .encrypt(source, output=target), 16),
        "seal": (lambda: aescl.chunked.encrypt(key, source, device="all", output=sealed),
                 aescl.chunked.CHUNK_SIZE),
        "open": (lambda: aescl.chunked.decrypt(key, sealed, device="all", output=target),
                 aescl.chunked.CHUNK_SIZE),
    }
    figures: dict[str, object] = {}
    for name, (job, unit_bytes) in jobs.items():
        runs = []
        for _ in range(6):
            gb_s = round(NBYTES / wall(job) / 1e9, 1)
            shares = [(share.device.id, round(share.units * unit_bytes / NBYTES, 2),
                       round(share.seconds, 3)) for share in teams.team("all").shares]
            runs.append((gb_s, shares))
        figures[name] = runs
    assert bytes(target[:64]) == bytes([7] * 64)
    figures["measured"] = {f"{device} {kind}": round(rate / 1e9, 1)
                           for (device, kind), rate in rates.measured.items()}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
