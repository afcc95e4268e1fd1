"""MODE_GCM from host memory on each OpenCL device (or those whose vendor is in
VENDORS, comma-separated): a new cipher (new key), ``update`` with AAD of SIZE bytes and
``encrypt_and_digest`` of SIZE bytes, per call over N calls (default 300), the median
of five runs after a first one; with the GHASH of runs up to ghash.HOST_RUN_BLOCKS blocks
on the host (as released), and with every run on the device (HOST_RUN_BLOCKS = 0)."""
import os
import statistics
import time

import aescl
from aescl import ghash

vendors = os.environ.get("VENDORS")
devices = [d for d in aescl.devices() if d.is_opencl and d.type != "simulator"
           and (vendors is None or d.vendor in vendors.split(","))]
calls = int(os.environ.get("N", 300))
released = ghash.HOST_RUN_BLOCKS
for device in devices:
    for size in (16, 64, 256, 1024):
        data = os.urandom(size)
        figures = {}
        for name, host_blocks in (("host runs", released), ("device runs", 0)):
            ghash.HOST_RUN_BLOCKS = host_blocks
            runs = []
            for _ in range(6):
                start = time.perf_counter()
                for _ in range(calls):
                    aescl.new(os.urandom(32), aescl.MODE_GCM, nonce=os.urandom(12),
                              device=device).update(data).encrypt_and_digest(data)
                runs.append((time.perf_counter() - start) / calls * 1e6)
            figures[name] = statistics.median(runs[1:])
        ghash.HOST_RUN_BLOCKS = released
        print(f"{device.id} {device.name[:30]}: {size} B AAD + {size} B text: "
              + ", ".join(f"{name} {us:.0f} us" for name, us in figures.items()), flush=True)
