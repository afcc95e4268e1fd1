"""Issue 57: one CUDA GPU's pinned jobs with a run's pieces cut at full size all along
("none"), with its first pieces smaller ("start": 1/8, 1/4, 1/2 of a piece), and with the
last ones of its last range smaller too ("both", pipeline.pieces_of as it is), rounds
interleaved. For each size in $PROBE_SIZES (MiB, default "512 2048"): CTR-128, sealing,
opening and the pipeline's transfers alone (pieces with no device work), best of 3 after a
warm-up, GB/s. Prints JSON. It runs at 1e11d95, whose pieces_of ramps (RAMP_DIVISORS):
the ramp gained nothing and was reverted (docs/benchmarks, 2026-12-01).

    git checkout 1e11d95 && python3 docs/benchmarks/2026-12-01-cuda-ramp.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from one_gpu_jobs import PinnedJobs, best

from aescl.engines.cuda import engine, pipeline

RAMPED = pipeline.pieces_of
DIVISORS = pipeline.RAMP_DIVISORS


class _MaybeMore:
    """Ranges whose iterator never says it is on its last one (no ramp at the end)."""

    def __init__(self, ranges: Any) -> None:
        self._ranges = iter(ranges)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return self

    def __next__(self) -> tuple[int, int]:
        return next(self._ranges)

    def __length_hint__(self) -> int:
        return 1


def variant(name: str) -> None:
    def cut(ranges: Any, unit_bytes: int, make: Any) -> Any:
        pipeline.RAMP_DIVISORS = () if name == "none" else DIVISORS
        return RAMPED(_MaybeMore(ranges) if name == "start" else ranges, unit_bytes, make)

    engine.pieces_of = cut
    pipeline.pieces_of = cut



def transfers(data: PinnedJobs) -> None:
    pieces = pipeline.pieces_of(iter([(0, data.nbytes)]), 1, lambda lo, hi: pipeline.Piece(
        data.source[lo:hi], data.target[lo:hi], lambda *a: None))
    pipeline.pipeline(0).run(pieces)


def main() -> None:
    figures: dict[str, Any] = {}
    for mib in (int(s) for s in os.environ.get("PROBE_SIZES", "512 2048").split()):
        os.environ["PROBE_MIB"] = str(mib)
        data = PinnedJobs("cuda:0")
        # (the transfers first: their output is the device's untouched buffer)
        jobs = {"transfers": lambda d=data: transfers(d), **data.jobs()}
        for _ in range(3):  # (rounds)
            for name in ("none", "start", "both"):
                variant(name)
                row = figures.setdefault(f"{mib} MiB {name}", {})
                for job_name, job in jobs.items():
                    row.setdefault(job_name, []).append(data.gb_s(best(job)))
                assert data.opened_intact()
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
