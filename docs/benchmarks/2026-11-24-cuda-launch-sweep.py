"""The CUDA engine's launch shape, swept on a GPU (docs/benchmarks/README.md, issue 33):
CTR-128 and CTR-256 through the public API on a 1 GiB torch tensor, for each threads per
block and thread blocks per SM. `python3 docs/benchmarks/2026-11-24-cuda-launch-sweep.py`.
"""
import os, json, subprocess, sys, time
import torch, aescl
from aescl.engines.cuda import engine as E
n = 1 << 30
data = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
out = torch.empty_like(data)
def rate(keylen, reps=8):
    key = os.urandom(keylen)
    c = aescl.new(key, aescl.MODE_CTR, nonce=os.urandom(8))
    c.encrypt(data, output=out)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(reps):
        c.encrypt(data, output=out)
    e.record(); torch.cuda.synchronize()
    return n * reps / (s.elapsed_time(e) / 1e3) / 1e9
res = {}
for threads in (128, 256, 512, 1024):
    for per_sm in (2, 4, 8, 16, 32):
        E._THREADS_PER_BLOCK, E._GRID_BLOCKS_PER_SM = threads, per_sm
        res[f"{threads}x{per_sm}"] = (round(rate(16), 1), round(rate(32), 1))
        print(threads, per_sm, res[f"{threads}x{per_sm}"], flush=True)
best = max(res, key=lambda k: res[k][0]); print("best ctr128", best, res[best])
best = max(res, key=lambda k: res[k][1]); print("best ctr256", best, res[best])
