"""MODE_GCM on the NVIDIA OpenCL device from host memory: a new cipher (new key) and
encrypt_and_digest of SIZE bytes (default 1 KiB), per call over N calls (default 500);
the median of five runs after a first one."""
import os
import statistics
import time

import aescl

device = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
size, calls = int(os.environ.get("SIZE", 1024)), int(os.environ.get("N", 500))
data = os.urandom(size)
runs = []
for _ in range(6):
    start = time.perf_counter()
    for _ in range(calls):
        aescl.new(os.urandom(32), aescl.MODE_GCM, nonce=os.urandom(12),
                  device=device).encrypt_and_digest(data)
    runs.append((time.perf_counter() - start) / calls * 1e6)
shown = ", ".join(f"{run:.0f}" for run in runs[1:])
print(f"{size} B: {statistics.median(runs[1:]):.0f} us a call (runs {shown})")
