"""Issue 57, item 1 ("pinned and ordinary"): one GPU's jobs on ordinary (pageable) numpy
arrays, each engine of it, against the same jobs on pinned memory and the host engine.
For each spec (``cuda:0``, the first OpenCL GPU, ``host``): CTR-128, sealing and opening
with ``output=`` on ordinary arrays of $PROBE_MIB MiB (2048 by default; pages touched
first), and the plain calls (bytes in, bytes out) of sealing and CTR; best of 3 after a
warm-up, GB/s. Prints JSON.

    python3 docs/benchmarks/2026-12-01-ordinary-memory.py
"""

from __future__ import annotations

import json
from typing import Any

from one_gpu_jobs import OrdinaryJobs, PinnedJobs, best, first_device

import aescl


def plain_calls(spec: str, key: bytes, plain: bytes) -> dict[str, float]:
    """Sealing and CTR-128 of ``plain``, bytes in and bytes out, on ``spec``."""
    def gb_s(seconds: float) -> float:
        return round(len(plain) / seconds / 1e9, 1)

    return {"seal bytes->bytes": gb_s(best(lambda: aescl.chunked.encrypt(key, plain,
                                                                         device=spec))),
            "ctr bytes->bytes": gb_s(best(lambda: aescl.new(
                key[:16], aescl.MODE_CTR, nonce=key[:8], device=spec).encrypt(plain)))}


def main() -> None:
    figures: dict[str, Any] = {}
    for spec in ("cuda:0", first_device("opencl"), "host"):
        data = OrdinaryJobs(spec)
        row = {f"{name} ordinary": data.gb_s(best(job)) for name, job in data.jobs().items()}
        assert data.opened_intact()
        row |= plain_calls(spec, data.key, bytes(data.source))
        del data
        if spec != "host":
            pinned = PinnedJobs(spec)
            row |= {f"{name} pinned": pinned.gb_s(best(job))
                    for name, job in pinned.jobs().items()}
            del pinned
        figures[spec] = row
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
