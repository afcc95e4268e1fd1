"""Kernel-only throughput of the CTR and ECB kernels on data resident in device memory.

    python tools/kernel_throughput.py [DEVICE_SPEC] [--mib N] [--repeat R]

Times each launch with OpenCL event profiling (no host transfers) and prints one
JSON object per configuration. A stopgap until `aescl bench` exists.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import pyopencl as cl

import aescl
from aescl import chunked, kernels
from aescl.gcm import GcmEngine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("device", nargs="?", default=None)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gcm-only", action="store_true")
    args = parser.parse_args()
    device = aescl.get_device(args.device)
    rt = kernels.runtime(device)
    queue = cl.CommandQueue(rt.context, device.cl_device,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    nbytes = args.mib << 20
    # Random data: T-table lookups cost depends on the data, because lanes that
    # read the same table entry are served by one broadcast. Uniform data (zeros,
    # or identical ECB blocks) would make the table kernels look much faster.
    data = np.random.default_rng(2026).integers(0, 256, nbytes, dtype=np.uint8)
    gcm_chunked(device, data, args.repeat)
    if args.gcm_only:
        return
    buffer = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                       hostbuf=data)
    for mode in ("ctr", "ecb-encrypt", "ecb-decrypt"):
        for key_bytes in (16, 24, 32):
            for key_schedule in ("host", "device"):
                if mode == "ctr":
                    cipher = aescl.new(bytes(key_bytes), aescl.MODE_CTR, nonce=b"",
                                       initial_value=bytes(16), device=device,
                                       key_schedule=key_schedule)
                    launcher, extra = cipher._launcher, cipher._counter_args(0)
                else:
                    cipher = aescl.new(bytes(key_bytes), aescl.MODE_ECB, device=device,
                                       key_schedule=key_schedule)
                    launcher, extra = cipher._launcher(mode == "ecb-decrypt"), ()
                # Encrypting in place keeps the data random for every launch.
                launcher.enqueue(queue, buffer, nbytes // 16, extra).wait()  # warm-up
                seconds = []
                for _ in range(args.repeat):
                    event = launcher.enqueue(queue, buffer, nbytes // 16, extra)
                    event.wait()
                    seconds.append((event.profile.end - event.profile.start) * 1e-9)
                print(json.dumps({
                    "device": device.name, "driver": device.driver_version, "mode": mode,
                    "key_bits": key_bytes * 8, "key_schedule": key_schedule, "bytes": nbytes,
                    "best_gb_s": round(nbytes / min(seconds) / 1e9, 2),
                    "median_gb_s": round(nbytes / statistics.median(seconds) / 1e9, 2),
                }), flush=True)


def gcm_chunked(device: aescl.Device, data: np.ndarray, repeat: int) -> None:
    """The chunked format's device work on resident data: CTR, GHASH and tags per chunk."""
    rt = kernels.runtime(device)
    engine = GcmEngine(os.urandom(32), device, "host")
    count = data.nbytes // chunked.CHUNK_SIZE
    blocks = data.nbytes // 16
    buffer = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                       hostbuf=data)
    j0s = np.zeros((count, 16), np.uint8)
    j0s[:, 15] = 1
    j0s[:, 4:12] = np.arange(count, dtype=">u8").view(np.uint8).reshape(count, 8)
    counters, lengths = engine._batch_arrays(j0s, np.full(count, chunked.CHUNK_SIZE))
    partials = engine._scratch(16 * count)
    tags = engine._scratch(16 * count)
    stages = {
        "ctr": lambda: engine._enqueue_ctr(buffer, blocks, 1024, 1, counters, lengths),
        "ghash": lambda: engine._enqueue_ghash(buffer, blocks, 1024, count, partials),
        "tags": lambda: engine._enqueue_tags(partials, count, counters, lengths, tags),
    }
    stages["sealed (ctr+ghash+tags)"] = lambda: [stages[k]() for k in ("ctr", "ghash", "tags")]
    for name, enqueue in stages.items():
        enqueue()
        rt.queue.finish()  # warm-up
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            enqueue()
            rt.queue.finish()
            seconds.append(time.perf_counter() - started)
        print(json.dumps({
            "device": device.name, "driver": device.driver_version,
            "mode": f"aes-256-gcm chunked: {name}", "bytes": data.nbytes,
            "timing": "wall clock around launches on resident data",
            "best_gb_s": round(data.nbytes / min(seconds) / 1e9, 2),
            "median_gb_s": round(data.nbytes / statistics.median(seconds) / 1e9, 2),
        }), flush=True)


if __name__ == "__main__":
    main()
