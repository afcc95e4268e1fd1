"""The timing the probes in tools/ share: the best of a few calls, as GB/s."""

from __future__ import annotations

import time
from collections.abc import Callable


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
