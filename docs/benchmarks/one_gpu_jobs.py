"""What the one-GPU diagnostics of 2026-11-28 and 2026-12-01 share (``2026-11-28-busy-thread.py``,
``...-opencl-feeding-calls.py``, ``2026-12-01-ordinary-memory.py`` and others): a GPU's pinned
or ordinary arrays and its jobs on them, the best time of a job, and a timer of the calls a
job makes. ``$PROBE_MIB`` sets the size (2
GiB by default); ``$PROBE_TYPE=cpu`` runs them on a CPU device, to try them out."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import aescl
from aescl.timing import wall


def first_device(engine: str) -> str:
    """The id of ``engine``'s first GPU (``$PROBE_TYPE``: another type)."""
    kind = os.environ.get("PROBE_TYPE", "gpu")
    return next(d.id for d in aescl.devices() if d.engine == engine and d.type == kind)


class PinnedJobs:
    """Pinned arrays for ``spec`` (``aescl.pinned_empty``) and three jobs on them, each
    with ``output=``: CTR-128, the chunked format sealed and opened."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.nbytes = int(os.environ.get("PROBE_MIB", "2048")) << 20
        self.source = aescl.pinned_empty(self.nbytes, spec)
        self.source[:] = 7
        self.target = aescl.pinned_empty(self.nbytes, spec)
        self.sealed = aescl.pinned_empty(aescl.chunked.sealed_size(self.nbytes), spec)
        self.key = os.urandom(32)

    def seal(self, batch_chunks: int = aescl.chunked.DEFAULT_BATCH_CHUNKS) -> None:
        aescl.chunked.encrypt(self.key, self.source, device=self.spec, output=self.sealed,
                              batch_chunks=batch_chunks)

    def open(self, batch_chunks: int = aescl.chunked.DEFAULT_BATCH_CHUNKS) -> None:
        aescl.chunked.decrypt(self.key, self.sealed, device=self.spec, output=self.target,
                              batch_chunks=batch_chunks)

    def ctr(self) -> None:
        aescl.new(self.key[:16], aescl.MODE_CTR, nonce=self.key[:8], device=self.spec).encrypt(
            self.source, output=self.target)

    def jobs(self) -> dict[str, Callable[[], None]]:
        return {"ctr": self.ctr, "seal": self.seal, "open": self.open}

    def opened_intact(self) -> bool:
        """Whether the last opening gave back the source's bytes (at both ends)."""
        return bytes(self.target[:64]) == bytes([7] * 64) == bytes(self.target[-64:])

    def gb_s(self, seconds: float) -> float:
        return round(self.nbytes / seconds / 1e9, 1)


class OrdinaryJobs(PinnedJobs):
    """PinnedJobs' three jobs on ordinary numpy arrays (their pages touched), of
    ``nbytes`` (default ``$PROBE_MIB``)."""

    def __init__(self, spec: str, nbytes: int | None = None) -> None:  # (no pinned memory)
        self.spec = spec
        self.nbytes = nbytes or int(os.environ.get("PROBE_MIB", "2048")) << 20
        self.source = np.full(self.nbytes, 7, np.uint8)
        self.target = np.ones(self.nbytes, np.uint8)
        self.sealed = np.ones(aescl.chunked.sealed_size(self.nbytes), np.uint8)
        self.key = os.urandom(32)


def best(job: Callable[[], Any]) -> float:
    """The least wall time of 3 runs of ``job``, after a warm-up run."""
    job()
    return min(wall(job) for _ in range(3))


class CallTimer:
    """The count, mean and longest wall time of each callable it wraps."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}

    def wrap(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                took = time.perf_counter() - began
                total = self.totals.setdefault(name, [0, 0.0, 0.0])
                total[0] += 1
                total[1] += took
                total[2] = max(total[2], took)
        return timed

    def report(self) -> dict[str, list[float]]:
        """{name: [calls, mean µs, longest µs]}, and the totals cleared."""
        found = {name: [int(n), round(1e6 * total / n, 1), round(1e6 * most)]
                 for name, (n, total, most) in sorted(self.totals.items())}
        self.totals.clear()
        return found
