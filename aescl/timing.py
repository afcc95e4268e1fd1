"""How aescl times things it measures (``aescl bench``, and the engines' own figures):
the median of repeated runs after a warm-up."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def repeat(run: Callable[[], float], min_seconds: float, min_runs: int = 3,
           max_runs: int = 100) -> float:
    """The median of the seconds ``run`` reports, after one warm-up run."""
    run()
    times: list[float] = []
    while len(times) < min_runs or (sum(times) < min_seconds and len(times) < max_runs):
        times.append(run())
    return statistics.median(times)


def wall(action: Callable[[], Any]) -> float:
    """Seconds ``action`` took on the wall clock."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def gb_s(nbytes: int, seconds: float) -> float:
    """GB/s (10^9 bytes per second) to three decimals, or to three significant digits
    below 0.001: a slow figure (16 KiB in 40 ms on a busy machine) is small, not zero."""
    if seconds <= 0:
        return float("inf")
    rate = nbytes / seconds / 1e9
    return round(rate, 3) if rate >= 0.001 else float(f"{rate:.3g}")
