"""Issue 57: where one OpenCL GPU's chunked opening spends host time against its sealing.
Host read and write rates of pinned memory, the tag comparison (``workers._matched``) on
1,024 and 4,096 tags, the format sealed and opened (best of 3, pieces of 1,024-4,096
chunks), and the wall time a piece of ``Pipeline._enqueue`` and ``_store_tasks`` (one run
each). Prints JSON.

    python3 docs/benchmarks/2026-11-28-opencl-opening-host.py
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
from one_gpu_jobs import CallTimer, PinnedJobs, first_device

import aescl
from aescl.engines.opencl import pipeline, workers
from aescl.timing import wall


def best(action: Callable[[], object], tries: int = 5) -> float:
    action()
    return min(wall(action) for _ in range(tries))


def main() -> None:
    spec = first_device("opencl")
    figures: dict[str, object] = {}
    size = 256 << 20
    pinned, ordinary = aescl.pinned_empty(size, spec), np.ones(size, np.uint8)
    pinned[:] = 1
    figures["read pinned GB/s"] = round(size / best(lambda: np.copyto(ordinary, pinned)) / 1e9, 2)
    figures["write pinned GB/s"] = round(size / best(lambda: np.copyto(pinned, ordinary)) / 1e9, 2)
    half = size // 2
    figures["read ordinary GB/s"] = round(
        size / best(lambda: np.copyto(ordinary[:half], ordinary[half:])) / 1e9, 2)
    for count in (1024, 4096):
        for name, memory in (("pinned", pinned), ("ordinary", ordinary)):
            tags = memory[: 32 * count]
            def compared(tags: np.ndarray = tags, count: int = count) -> None:
                workers._matched(tags, 0, count, False)
            figures[f"matched {count} {name} us"] = round(1e6 * best(compared, 20), 1)

    data = PinnedJobs(spec)
    data.seal()
    for batch in (1024, 2048, 4096):
        figures[f"best b{batch}"] = (data.gb_s(best(lambda batch=batch: data.seal(batch), 3)),
                                     data.gb_s(best(lambda batch=batch: data.open(batch), 3)))
    assert data.opened_intact()
    timer = CallTimer()
    workers._matched = timer.wrap("matched", workers._matched)
    for owner, method, name in ((pipeline.Pipeline, "_enqueue", "enqueue"),
                                (pipeline.Pipeline, "_store_tasks", "store_tasks"),
                                (pipeline._InFlight, "landed", "landed")):
        setattr(owner, method, timer.wrap(name, getattr(owner, method)))
    for batch in (1024, 4096):
        for name, job in (("seal", data.seal), ("open", data.open)):
            job(batch)
            timer.report()
            took = wall(lambda job=job, batch=batch: job(batch))
            figures[f"{name} b{batch}"] = {"GB/s": data.gb_s(took), **timer.report()}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
