"""The chunked format through the public API on 1 GiB device arrays (torch: CUDA engine;
pyopencl: NVIDIA's OpenCL), best of three rounds of 5 calls, synchronized at the end of
each round; then MODE_GCM AES-256 encrypt+digest on a torch tensor."""
import json, os, time
import numpy as np
import aescl, torch
import pyopencl as cl, pyopencl.array as cl_array
n = 1 << 30
key = os.urandom(32)
host = np.frombuffer(os.urandom(n), np.uint8)
out = {}
def rate(fn, sync, reps=5):
    fn(); sync()
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps): fn()
        sync()
        best = min(best, (time.perf_counter() - t) / reps)
    return round(n / best / 1e9, 1)
src = torch.from_numpy(host.copy()).cuda()
sealed = aescl.chunked.encrypt(key, src)
sync = torch.cuda.synchronize
out["torch chunked.encrypt GB/s"] = [rate(lambda: aescl.chunked.encrypt(key, src), sync) for _ in range(2)]
out["torch chunked.decrypt GB/s"] = [rate(lambda: aescl.chunked.decrypt(key, sealed), sync) for _ in range(2)]
dst = torch.empty_like(src)
def gcm():
    c = aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12)); c.encrypt(src, output=dst); c.digest()
out["torch MODE_GCM-256 encrypt+digest GB/s"] = [rate(gcm, sync, reps=3) for _ in range(2)]
del sealed, dst
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
arr = cl_array.to_device(queue, host)
sealed = aescl.chunked.encrypt(key, arr)
out["pyopencl chunked.encrypt GB/s"] = [rate(lambda: aescl.chunked.encrypt(key, arr), queue.finish) for _ in range(2)]
out["pyopencl chunked.decrypt GB/s"] = [rate(lambda: aescl.chunked.decrypt(key, sealed), queue.finish) for _ in range(2)]
print(json.dumps(out, indent=1), flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "api_chunked.json"), "w"), indent=1)
