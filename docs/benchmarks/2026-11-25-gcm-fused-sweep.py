"""gcm_crypt_hash's build and launch on the CUDA engine (engines/cuda/workers.py,
_CRYPT_HASH_SHAPE and _CRYPT_HASH_ITEMS), against CTR, GHASH and the tags in three
launches (AESCL_GCM_FUSED=0), and the OpenCL engine's fused figure on the same GPU.

Run on the GPU machine with aescl, pyopencl and NVIDIA's OpenCL ICD installed:
`python3 docs/benchmarks/2026-11-25-gcm-fused-sweep.py`. Each figure is the bench's
kernel figure of the chunked format (1 GiB, AES-256, GB/s of plaintext), two rounds.
"""
import json, os
import numpy as np
import aescl
from aescl import chunked
from aescl.engines.cuda import measure as cuda_measure, workers as cuda_workers
from aescl.engines.opencl import measure as cl_measure

n = 1 << 30
key = os.urandom(32)
data = np.frombuffer(os.urandom(n), np.uint8)
size = chunked.sealed_size(n, raw=True)
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
configs = [(None, 8), ((1, 256, 1), 8), ((1, 256, 0), 8), ((1, 512, 1), 8), ((1, 1024, 1), 8),
           ((2, 256, 1), 8), ((2, 512, 1), 8), ((2, 1024, 1), 8), ((4, 1024, 0), 8),
           ((4, 1024, 1), 8), ((1, 256, 1), 4), ((1, 256, 1), 16)]
out = {}
for rnd in range(2):
    os.environ["AESCL_GCM_FUSED"] = "1"
    v = round(n / cl_measure.resident_seconds(nvidia, "gcm-chunked", key, os.urandom(12), data, size, 0.5)[0] / 1e9, 1)
    out.setdefault("opencl fused", []).append(v); print("opencl fused", v, flush=True)
    for shape, items in configs:
        os.environ["AESCL_GCM_FUSED"] = "0" if shape is None else "1"
        if shape:
            cuda_workers._CRYPT_HASH_SHAPE, cuda_workers._CRYPT_HASH_ITEMS = shape, items
        label = "cuda three launches" if shape is None else f"cuda fused tables={shape[0]} threads={shape[1]} stride_in_local={shape[2]} items={items}"
        try:
            v = round(n / cuda_measure.resident_seconds(0, "gcm-chunked", key, os.urandom(12), data, size, 0.5)[0] / 1e9, 1)
        except Exception as exc:
            v = f"error {exc!r}"[:200]
        out.setdefault(label, []).append(v); print(label, v, flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "shape_sweep.json"), "w"), indent=1)
