"""Issue 55: the fixed cost of a small plain call. ``chunked.encrypt(key, data)`` of 64 KiB,
2 MiB and 16 MiB of ``bytes``, the default device, no ``output=``: milliseconds a call,
the best of 5 rounds of 50 calls after 20 warm-up calls, as JSON labelled with LABEL.

    python3 docs/benchmarks/2026-11-28-small-plain-calls.py LABEL
"""

from __future__ import annotations

import json
import os
import sys
import time

from aescl import chunked

key = os.urandom(32)
out = {}
for size in (64 << 10, 2 << 20, 16 << 20):
    data = os.urandom(size)
    for _ in range(20):
        chunked.encrypt(key, data)
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(50):
            chunked.encrypt(key, data)
        best.append((time.perf_counter() - t) / 50 * 1e3)
    out[size >> 10] = round(min(best), 3)
print(sys.argv[1] if len(sys.argv) > 1 else "", json.dumps(out))
