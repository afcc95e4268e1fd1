"""Issue 57, item 1: where one OpenCL GPU's jobs on ordinary (pageable) numpy arrays lose
to the CUDA engine's on the same GPU. CTR-128, sealing and opening with ``output=`` on
ordinary arrays of $PROBE_MIB MiB (2048 by default) through the first OpenCL GPU and
``cuda:0`` (best of 3 after a warm-up, GB/s); the OpenCL pipeline with 4, 6 (its own)
and 8 pieces in flight; then one run of each OpenCL job with the feeding thread's time in
each step of ``Pipeline.run`` (calls, mean and longest µs): a piece's load tasks
submitted, the wait for the oldest piece to land and its store submitted
(``_store_next``), the wait for its load (``_finish``), and its commands enqueued
(``_enqueue``). Prints JSON.

    python3 docs/benchmarks/2026-12-01-opencl-ordinary.py
"""

from __future__ import annotations

import json
from typing import Any

from one_gpu_jobs import CallTimer, OrdinaryJobs, best, first_device

from aescl.engines.opencl import pipeline
from aescl.timing import wall


def main() -> None:
    opencl = first_device("opencl")
    figures: dict[str, Any] = {}
    for spec in ("cuda:0", opencl):
        data = OrdinaryJobs(spec)
        figures[spec] = {name: data.gb_s(best(job)) for name, job in data.jobs().items()}
    data = OrdinaryJobs(opencl)
    own = pipeline.SLOTS
    for slots in (4, 8, own):
        pipeline.SLOTS = slots
        pipeline._pipelines.clear()
        figures[f"{opencl}, {slots} in flight"] = {
            name: data.gb_s(best(job)) for name, job in data.jobs().items()}
    assert data.opened_intact()
    timer = CallTimer()
    pipeline._finish = timer.wrap("_finish (a load's or a store's wait)", pipeline._finish)
    pipeline._submit = timer.wrap("_submit", pipeline._submit)
    for method in ("_store_next", "_enqueue", "_store_tasks"):
        setattr(pipeline.Pipeline, method,
                timer.wrap(method, getattr(pipeline.Pipeline, method)))
    for name, job in data.jobs().items():
        job()
        timer.report()
        took = wall(job)
        figures[f"{opencl} {name} steps"] = {"GB/s": data.gb_s(took), **timer.report()}
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
