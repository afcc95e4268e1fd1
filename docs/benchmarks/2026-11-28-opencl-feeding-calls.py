"""Issue 57: one OpenCL GPU's pinned jobs (2 GiB) beside a spinning Python thread, with the
share of the time it got against a sleep, then the count, mean and longest wall time (µs) of
each pyopencl call and of ``Pipeline._enqueue`` in one run of each job. Prints JSON.

    python3 docs/benchmarks/2026-11-28-opencl-feeding-calls.py
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pyopencl as cl
from one_gpu_jobs import CallTimer, PinnedJobs, first_device

from aescl.engines.opencl import pipeline
from aescl.timing import wall


def beside_a_counter(action: Callable[[], object]) -> tuple[float, float]:
    """(loops a second a counting thread made meanwhile, seconds ``action`` took)."""
    count, stop = [0], [False]

    def spin() -> None:
        while not stop[0]:
            count[0] += 1
    counter = threading.Thread(target=spin)
    counter.start()
    began = time.perf_counter()
    action()
    took = time.perf_counter() - began
    stop[0] = True
    counter.join()
    return count[0] / took, took


def main() -> None:
    data = PinnedJobs(first_device("opencl"))
    for job in data.jobs().values():
        job()
    figures: dict[str, object] = {}
    asleep, _ = beside_a_counter(lambda: time.sleep(0.1))
    for name, job in data.jobs().items():
        alone = min(wall(job) for _ in range(3))
        loops, took = beside_a_counter(job)
        figures[name] = {"GB/s alone": data.gb_s(alone), "GB/s beside a spinner": data.gb_s(took),
                         "spinner share": round(loops / asleep, 2)}
    timer = CallTimer()
    for name in ("enqueue_copy", "enqueue_barrier", "enqueue_marker", "enqueue_nd_range_kernel",
                 "enqueue_fill_buffer", "enqueue_map_buffer"):
        setattr(cl, name, timer.wrap(name, getattr(cl, name)))
    for owner, method in ((cl.CommandQueue, "flush"), (cl.Event, "wait"),
                          (cl.Kernel, "set_args"), (cl.Buffer, "get_sub_region"),
                          (pipeline.Pipeline, "_enqueue")):
        setattr(owner, method, timer.wrap(f"{owner.__name__}.{method}", getattr(owner, method)))
    for name, job in data.jobs().items():
        timer.report()
        figures[f"{name} calls"] = {"s": round(wall(job), 4), **timer.report()}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
