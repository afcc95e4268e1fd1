"""MODE_GCM on the NVIDIA OpenCL device from host memory: a new cipher and
encrypt_and_digest of SIZE bytes (default 1 KiB), per call over N calls (median of 5 runs)."""
import os, time, statistics
import aescl
dev = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
size, n = int(os.environ.get("SIZE", 1024)), int(os.environ.get("N", 500))
data = os.urandom(size)
runs = []
for _ in range(6):
    t = time.perf_counter()
    for _ in range(n):
        aescl.new(os.urandom(32), aescl.MODE_GCM, nonce=os.urandom(12), device=dev).encrypt_and_digest(data)
    runs.append((time.perf_counter() - t) / n * 1e6)
print(f"{size} B: {statistics.median(runs[1:]):.0f} us a call (runs {', '.join(f'{r:.0f}' for r in runs[1:])})")
