"""The timing the probes in tools/ share: the best of a few calls, as GB/s."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence


def best_gb_s(action: Callable[[], object], nbytes: int, repeats: int = 3,
              warm_up: bool = False) -> float:
    """``nbytes`` over the fastest of ``repeats`` calls of ``action`` (after one call
    that is not timed, with ``warm_up``: kernels built, staging allocated)."""
    if warm_up:
        action()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


def run_for(threads: Sequence[threading.Thread], stop: threading.Event, seconds: float,
            started: threading.Event | None = None) -> None:
    """Start ``threads``, let them run ``seconds`` (from ``started``, when given), then set
    ``stop`` and wait for them: what the probes that measure rates side by side share."""
    for thread in threads:
        thread.start()
    if started is not None:
        started.wait()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
