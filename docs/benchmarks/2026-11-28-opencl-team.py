"""Issue 57: one GPU and the team of every GPU of the host, on one engine (ENGINE:
``opencl``, the default, or ``cuda``), or ``all``, on 2 GiB ($TEAM_GIB where set) of
``aescl.pinned_empty(n, spec)``: CTR-128, the chunked format sealed and opened
(``output=``), best of 3 after a warm-up. Prints one JSON object, labelled with the
first argument (which build ran it).

    python3 docs/benchmarks/2026-11-28-opencl-team.py LABEL [ENGINE]

The N-process yardstick is ``2026-11-27-gpu-team.py``'s ``yardstick``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import aescl
from aescl.timing import wall

NBYTES = int(os.environ.get("TEAM_GIB", "2")) << 30


def rate(run, tries: int = 3) -> float:
    run()
    return round(NBYTES / min(wall(run) for _ in range(tries)) / 1e9, 1)


def main(label: str, engine: str) -> None:
    key, nonce = os.urandom(32), os.urandom(8)
    gpus = [d.id for d in aescl.devices() if d.engine == engine and d.type == "gpu"]
    figures: dict[str, object] = {"build": label}
    for spec in ([gpus[:1], gpus] if engine != "all" else ["all"]):
        began = time.perf_counter()
        source = aescl.pinned_empty(NBYTES, spec)
        source[:] = 7
        target = aescl.pinned_empty(NBYTES, spec)
        sealed = aescl.pinned_empty(aescl.chunked.sealed_size(NBYTES), spec)
        allocated = time.perf_counter() - began
        figures[",".join(spec) if engine != "all" else spec] = {
            "ctr": rate(lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce, device=spec)
                        .encrypt(source, output=target)),
            "chunked enc": rate(lambda: aescl.chunked.encrypt(key, source, device=spec,
                                                              output=sealed)),
            "chunked dec": rate(lambda: aescl.chunked.decrypt(key, sealed, device=spec,
                                                              output=target)),
            "alloc s": round(allocated, 2),
        }
        assert bytes(target[:64]) == bytes([7] * 64) == bytes(target[-64:])
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "", sys.argv[2] if len(sys.argv) > 2 else "opencl")
