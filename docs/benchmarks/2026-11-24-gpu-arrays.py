"""Device arrays through the public API on a CUDA GPU (docs/benchmarks/README.md, issue 33).

Run on the GPU machine with aescl, pyopencl, torch and NVIDIA's OpenCL ICD installed:
`python3 docs/benchmarks/2026-11-24-gpu-arrays.py`. Prints GB/s (1 GiB arrays, best of three
runs, synchronized at the end of each) and microseconds per small call.
"""
import os, time, sys, json
import torch, aescl
torch.cuda.init()
out = {}
def rate(fn, nbytes, reps=10):
    fn(); torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps): fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / reps)
    return nbytes / best / 1e9
n = 1 << 30
data = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
dst = torch.empty_like(data)
for bits in (128, 256):
    key = os.urandom(bits // 8)
    c = aescl.new(key, aescl.MODE_CTR, nonce=os.urandom(8))
    d = aescl.new(key, aescl.MODE_CTR, nonce=os.urandom(8))
    def ctr():
        d.seek(0); d.decrypt(data, output=dst)
    out[f"ctr{bits} torch 1GiB output= GB/s"] = round(rate(ctr, n), 1)
    def ctr_new():
        d.seek(0); d.decrypt(data)
    out[f"ctr{bits} torch 1GiB new tensor GB/s"] = round(rate(ctr_new, n), 1)
    e = aescl.new(key, aescl.MODE_ECB)
    out[f"ecb{bits} encrypt torch 1GiB GB/s"] = round(rate(lambda: e.encrypt(data, output=dst), n), 1)
    out[f"ecb{bits} decrypt torch 1GiB GB/s"] = round(rate(lambda: e.decrypt(data, output=dst), n), 1)
# small calls
small = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
sout = torch.empty_like(small)
d = aescl.new(os.urandom(16), aescl.MODE_CTR, nonce=os.urandom(8))
def calls_ctr():
    for _ in range(2000):
        d.seek(0); d.decrypt(small, output=sout)
def calls_xor():
    for _ in range(2000):
        torch.bitwise_xor(small, small, out=sout)
for round_ in range(3):  # alternating, three rounds
    for name, fn in (("ctr", calls_ctr), ("xor", calls_xor)):
        fn(); torch.cuda.synchronize()
        t = time.perf_counter(); fn(); torch.cuda.synchronize()
        out.setdefault(f"4KiB {name} us/call", []).append(
            round((time.perf_counter() - t) / 2000 * 1e6, 2))
print(json.dumps(out, indent=1))
# GCM on torch
for bits in (128, 256):
    key = os.urandom(bits // 8)
    def gcm_enc():
        c = aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12))
        c.encrypt(data, output=dst); c.digest()
    out[f"gcm{bits} torch 1GiB encrypt+digest GB/s"] = round(rate(gcm_enc, n, reps=3), 1)
    c = aescl.new(key, aescl.MODE_GCM, nonce=bytes(12)); c.encrypt(data, output=dst); tag = c.digest()
    def gcm_dec():
        c = aescl.new(key, aescl.MODE_GCM, nonce=bytes(12))
        c.decrypt_and_verify(dst, tag, output=data)
    out[f"gcm{bits} torch 1GiB decrypt_and_verify GB/s"] = round(rate(gcm_dec, n, reps=3), 1)
from aescl import chunked
ckey = os.urandom(32)
out["chunked torch 1GiB encrypt GB/s"] = round(rate(lambda: chunked.encrypt(ckey, data), n, reps=3), 1)
sealed_t = chunked.encrypt(ckey, data)
out["chunked torch 1GiB decrypt GB/s"] = round(rate(lambda: chunked.decrypt(ckey, sealed_t), n, reps=3), 1)
assert torch.equal(chunked.decrypt(ckey, sealed_t), data)
del sealed_t
print(json.dumps(out, indent=1), flush=True)
# pyopencl arrays on the GPU, in a context of our own
import numpy as np, pyopencl as cl, pyopencl.array as ca
gpu = [d for p in cl.get_platforms() for d in p.get_devices() if d.type & cl.device_type.GPU][0]
ctx = cl.Context([gpu]); q = cl.CommandQueue(ctx)
arr = ca.empty(q, n, np.uint8); arr.fill(7); oarr = ca.empty_like(arr)
def clrate(fn, nbytes, reps=10):
    fn(); q.finish()
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps): fn()
        q.finish()
        best = min(best, (time.perf_counter() - t) / reps)
    return nbytes / best / 1e9
for bits in (128, 256):
    key = os.urandom(bits // 8)
    d = aescl.new(key, aescl.MODE_CTR, nonce=os.urandom(8))
    def ctr():
        d.seek(0); d.decrypt(arr, output=oarr)
    out[f"ctr{bits} pyopencl 1GiB output= GB/s"] = round(clrate(ctr, n), 1)
    def gcm_enc():
        c = aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12))
        c.encrypt(arr, output=oarr); c.digest()
    out[f"gcm{bits} pyopencl 1GiB encrypt+digest GB/s"] = round(clrate(gcm_enc, n, reps=3), 1)
print(json.dumps(out, indent=1))
ckey = os.urandom(32)
out["chunked pyopencl 1GiB encrypt GB/s"] = round(clrate(lambda: chunked.encrypt(ckey, arr), n, reps=3), 1)
sealed_c = chunked.encrypt(ckey, arr)
out["chunked pyopencl 1GiB decrypt GB/s"] = round(clrate(lambda: chunked.decrypt(ckey, sealed_c), n, reps=3), 1)
print(json.dumps(out, indent=1))
