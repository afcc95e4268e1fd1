"""Issue 57, item 2 ("``all`` on host data is never slower than the best single device in
it"), on a host of one GPU: the default (no device named), ``all``, ``host`` and the
first GPU of each engine (``$PROBE_TYPE=cpu``: CPU devices, to try it out) on the same
jobs, on three kinds of host data: ordinary numpy arrays (pages touched) with
``output=``, memory from ``aescl.pinned_empty(n, spec)`` with ``output=``, and bytes in,
bytes out. Jobs: CTR-128, ECB-128, the chunked format sealed and opened; $PROBE_MIB MiB
(2048 by default), best of 3 after a warm-up, GB/s; ``$PROBE_SPECS``
(``default,all,host,cuda:0``) measures only those. Prints JSON.

    python3 docs/benchmarks/2026-12-01-all-one-gpu.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

import aescl
from aescl.timing import wall

NBYTES = int(os.environ.get("PROBE_MIB", "2048")) << 20


def best(job: Callable[[], Any]) -> float:
    job()
    return round(NBYTES / min(wall(job) for _ in range(3)) / 1e9, 1)


def jobs(spec: Any, key: bytes, source: Any, target: Any, sealed: Any) -> dict[str, Callable]:
    """The four jobs, with ``output=`` where ``target`` is given, else bytes out (the
    opening then of bytes sealed on the host engine)."""
    into = {} if target is None else {"output": target}
    into_sealed = {} if target is None else {"output": sealed}
    to_open = sealed if target is not None else aescl.chunked.encrypt(key, source,
                                                                      device="host")
    return {
        "ctr": lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=key[:8], device=spec)
        .encrypt(source, **into),
        "ecb": lambda: aescl.new(key[:16], aescl.MODE_ECB, device=spec)
        .encrypt(source, **into),
        "seal": lambda: aescl.chunked.encrypt(key, source, device=spec, **into_sealed),
        "open": lambda: aescl.chunked.decrypt(key, to_open, device=spec, **into),
    }


def main() -> None:
    key = os.urandom(32)
    figures: dict[str, Any] = {"devices": [d.id for d in aescl.devices()]}
    kind = os.environ.get("PROBE_TYPE", "gpu")
    firsts = {d.engine: d.id for d in reversed(aescl.devices()) if d.type == kind}
    specs = {"default": None, "all": "all", "host": "host", **{i: i for i in firsts.values()}}
    if os.environ.get("PROBE_SPECS"):  # (some of them: default,all,host,cuda:0)
        specs = {label: specs[label] for label in os.environ["PROBE_SPECS"].split(",")}
    for label, spec in specs.items():
        row: dict[str, float] = {}
        memories = {
            "ordinary": lambda: (np.full(NBYTES, 7, np.uint8), np.ones(NBYTES, np.uint8),
                                 np.ones(aescl.chunked.sealed_size(NBYTES), np.uint8)),
            "pinned": lambda spec=spec: _pinned(spec),
            "bytes": lambda: (bytes(NBYTES), None, None),
        }
        for memory, make in memories.items():
            source, target, sealed = make()
            for name, job in jobs(spec, key, source, target, sealed).items():
                row[f"{name} {memory}"] = best(job)
            if target is not None:
                opened = bytes(target[:64]) + bytes(target[-64:])
                assert opened == bytes([7] * 128), (label, memory)
            del source, target, sealed
        figures[label] = row
    print(json.dumps(figures, indent=1))


def _pinned(spec: Any) -> tuple[Any, Any, Any]:
    source = aescl.pinned_empty(NBYTES, spec)
    source[:] = 7
    return (source, aescl.pinned_empty(NBYTES, spec),
            aescl.pinned_empty(aescl.chunked.sealed_size(NBYTES), spec))


if __name__ == "__main__":
    main()
