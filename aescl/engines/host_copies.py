"""Host copies of the GPU engines' staging: one copy split into parts that a pool of
threads makes at once (numpy lets the GIL go while it copies), because one core copies
at a fraction of the PCIe rate. Both GPU engines' pipelines stage ordinary memory
through it (engines/opencl/pipeline.py, engines/cuda/pipeline.py): one H200, 2 GiB of
ordinary numpy memory, CTR-128 through the CUDA engine ran 8.9-10.5 GB/s with one copy
a piece on its slot's thread, and 17.0-17.3 through these (docs/benchmarks, 2026-12-01).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

PART_BYTES = 4 << 20  # below this a host copy is not worth splitting
THREADS = max(1, min(16, os.cpu_count() or 1))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def host_pool() -> ThreadPoolExecutor:
    """The threads that make the parts (made on first use, shared by every engine)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="aescl-host")
        return _pool


def parts(nbytes: int, part_bytes: int | None = None) -> list[tuple[int, int]]:
    """(start, stop) of the parts one host transfer of ``nbytes`` is split into, each
    of ``part_bytes`` (default PART_BYTES) or more."""
    count = max(1, min(THREADS, nbytes // (part_bytes or PART_BYTES)))
    bounds = [nbytes * i // count for i in range(count + 1)]
    return list(zip(bounds, bounds[1:], strict=False))


def copy_parts(target: np.ndarray, source: np.ndarray,
               part_bytes: int | None = None) -> list[Callable[[], None]]:
    """``target[:] = source`` as a few independent copies for the host threads."""
    import numpy as np

    return [
        (lambda lo=lo, hi=hi: np.copyto(target[lo:hi], source[lo:hi]))
        for lo, hi in parts(source.nbytes, part_bytes)
    ]


def copy(target: np.ndarray, source: np.ndarray) -> None:
    """``target[:] = source``, its parts made at once on the host threads; returns once
    all are done, raising the first failure then (no part still writes)."""
    tasks = copy_parts(target, source)
    if len(tasks) == 1:
        tasks[0]()
        return
    futures = [host_pool().submit(task) for task in tasks]
    wait(futures)
    for future in futures:
        future.result()
