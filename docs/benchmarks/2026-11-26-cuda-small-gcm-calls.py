"""MODE_GCM from host memory through the CUDA engine (device "cuda") and the host engine:
a new cipher (new key), ``update`` with 64 bytes of AAD and ``encrypt_and_digest`` of
16 bytes to 64 KiB, per call, the median of five runs of 300 calls after a first one."""
import os
import statistics
import time

import aescl

calls = 300
for dev in ("cuda", "host"):
    for size in (16, 64, 256, 1024, 65536):
        data = os.urandom(size)
        runs = []
        for _ in range(6):
            t = time.perf_counter()
            for _ in range(calls):
                c = aescl.new(os.urandom(32), aescl.MODE_GCM, nonce=os.urandom(12), device=dev)
                c.update(data[:64])
                c.encrypt_and_digest(data)
            runs.append((time.perf_counter() - t) / calls * 1e6)
        print(f"{dev} {size} B text + 64 B AAD: {statistics.median(runs[1:]):.0f} us", flush=True)
