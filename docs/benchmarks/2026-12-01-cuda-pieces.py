"""Issue 57: where one CUDA GPU's pinned jobs lose to the same GPU's OpenCL engine. For
each size in $PROBE_SIZES (MiB, default "2048 512"): CTR-128, sealing and opening through
``cuda:0`` and the first OpenCL GPU (best of 3 after a warm-up, GB/s); the CUDA pipeline's
transfers alone (pieces with no device work); with $PROBE_SWEEP=1, the CUDA pipeline's
slots and piece size swept; and one run of each CUDA job with each piece's phases timed
(µs, means): the upload enqueued, the work enqueued (sealing and opening: the kernels,
and opening's verdict read), the download enqueued and the stream's wait, and each
slot's idle time between its pieces. Prints JSON.

    PROBE_SWEEP=1 python3 docs/benchmarks/2026-12-01-cuda-pieces.py
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import numpy as np
from one_gpu_jobs import PinnedJobs, best, first_device

from aescl.engines.cuda import pipeline
from aescl.timing import wall


def transfers_alone(data: PinnedJobs) -> float:
    """GB/s of the CUDA pipeline moving ``data``'s source to its target in pieces, with no
    device work between."""
    step = pipeline.PIECE_BYTES

    def pieces() -> Any:
        for lo in range(0, data.nbytes, step):
            hi = min(data.nbytes, lo + step)
            yield pipeline.Piece(data.source[lo:hi], data.target[lo:hi], lambda *a: None)

    return data.gb_s(best(lambda: pipeline.pipeline(0).run(pieces())))


def reset(slots: int, piece_bytes: int) -> None:
    pipeline.SLOTS, pipeline.PIECE_BYTES = slots, piece_bytes
    pipeline._pipelines.clear()


class Phases:
    """Each piece's phases in Slot.run, stamped by wrapping the driver calls it makes."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, list[float]]] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def install(self) -> None:
        from cuda.bindings import driver

        original_run = pipeline.Slot.run
        phases = self

        def run(slot: pipeline.Slot, piece: pipeline.Piece) -> None:
            stamps = phases._local.stamps = [time.perf_counter()]
            original_run(slot, piece)
            stamps.append(time.perf_counter())
            with phases._lock:
                phases.rows.append((threading.get_ident(), stamps))

        def stamped(call: Any) -> Any:
            def wrapper(*args: Any) -> Any:
                result = call(*args)
                stamps = getattr(phases._local, "stamps", None)
                if stamps is not None:
                    stamps.append(time.perf_counter())
                return result
            return wrapper

        pipeline.Slot.run = run  # type: ignore[method-assign]
        # (Slot.run calls them through the module it imported: the driver module itself)
        for name in ("cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamSynchronize"):
            setattr(driver, name, stamped(getattr(driver, name)))

    def report(self) -> dict[str, Any]:
        """Means (µs) over pieces with the five stamps of a piece with both copies:
        start, upload, download, sync(s)..., end."""
        spans: dict[str, list[float]] = {"upload": [], "work": [], "download and wait": [],
                                         "after": [], "whole": [], "idle between": []}
        last_end: dict[int, float] = {}
        for thread, stamps in sorted(self.rows, key=lambda row: row[1][0]):
            start, upload, *middle, end = stamps
            spans["upload"].append(upload - start)
            # (the work's own syncs, then the download, then the stream's wait)
            download = middle[-2] if len(middle) >= 2 else upload
            spans["work"].append(download - upload)
            spans["download and wait"].append(middle[-1] - download if middle else 0.0)
            spans["after"].append(end - (middle[-1] if middle else upload))
            spans["whole"].append(end - start)
            if thread in last_end:
                spans["idle between"].append(start - last_end[thread])
            last_end[thread] = end
        self.rows.clear()
        return {name: round(1e6 * float(np.mean(v)), 1) if v else None
                for name, v in spans.items()} | {"pieces": len(spans["whole"])}


def main() -> None:
    sizes = [int(s) for s in os.environ.get("PROBE_SIZES", "2048 512").split()]
    opencl = first_device("opencl")
    figures: dict[str, Any] = {}
    slots, piece_bytes = pipeline.SLOTS, pipeline.PIECE_BYTES
    for mib in sizes:
        os.environ["PROBE_MIB"] = str(mib)
        for spec in ("cuda:0", opencl):
            data = PinnedJobs(spec)
            figures[f"{spec} {mib} MiB"] = {name: data.gb_s(best(job))
                                            for name, job in data.jobs().items()}
            assert data.opened_intact()
        data = PinnedJobs("cuda:0")
        figures[f"cuda:0 {mib} MiB transfers alone"] = transfers_alone(data)
        for slot_count in (2, 4, 6, 8) if os.environ.get("PROBE_SWEEP") == "1" else ():
            for piece_mib in (16, 32, 64):
                reset(slot_count, piece_mib << 20)
                figures[f"cuda:0 {mib} MiB, {slot_count} slots, {piece_mib} MiB pieces"] = {
                    name: data.gb_s(best(job)) for name, job in data.jobs().items()}
                assert data.opened_intact()
        reset(slots, piece_bytes)
    phases = Phases()
    phases.install()
    os.environ["PROBE_MIB"] = str(sizes[0])
    data = PinnedJobs("cuda:0")
    for name, job in data.jobs().items():
        job()
        phases.rows.clear()
        took = wall(job)
        figures[f"cuda:0 {name} phases"] = {"GB/s": data.gb_s(took), **phases.report()}
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
