"""Issue 33's device-array targets, each round paired with its own kernel figure
(2026-11-26): the public API on 1 GiB device arrays as a share of the kernel figure
that ``aescl bench`` reports, measured in the same round, just before, by the same
function bench calls (the engine's ``resident_seconds``: the median of the kernels'
event times). A GPU's clock moves from minute to minute under a 1 GiB load; a share of
a kernel figure taken once at the start mixes that drift into the host's cost.

torch tensors through the CUDA engine, pyopencl arrays (from a MemoryPool) through
NVIDIA's OpenCL, alternating, ROUNDS rounds (default 5). Each API figure is the best
of three runs of 5 calls, as in 2026-11-26-device-arrays-output.py; "open, distinct
messages" opens DISTINCT messages in turn, each sealed under its own salt. Prints a table
and JSON; writes the JSON to $OUT/paired_rounds.json when $OUT is set.

    ROUNDS=5 python3 2026-11-26-paired-rounds.py
"""
import itertools
import json
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools
import torch

import aescl
from aescl.engines import engine_for

SIZE = 1 << 30
ROUNDS = int(os.environ.get("ROUNDS", 5))
DISTINCT = 12  # sealed messages opened in turn: more than an engine keeps GHASH tables of


def rate(call, wait):
    """GB/s: best of three runs of 5 calls of ``call``; ``wait(result)`` ends a run."""
    wait(call())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            result = call()
        wait(result)
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


def kernel_figures(device, host):
    """GB/s of bench's kernel figure, by mode: the seconds bench's own call measures."""
    engine = engine_for(device)
    figures = {}
    sealed_bytes = aescl.chunked.sealed_size(SIZE, raw=True)
    for label, mode, key, iv, out_bytes in (
            ("ctr-128", "ctr", os.urandom(16), os.urandom(16), SIZE),
            ("ctr-256", "ctr", os.urandom(32), os.urandom(16), SIZE),
            ("gcm-chunked", "gcm-chunked", os.urandom(32), os.urandom(12), sealed_bytes)):
        kernel, _ = engine.resident_seconds(mode, key, iv, host, out_bytes, 1.0)
        figures[label] = SIZE / kernel / 1e9
    return figures


def api_figures(message, wait):
    """GB/s of the public calls on ``message`` (a 1 GiB device array), with output=."""
    figures = {}
    for bits in (128, 256):
        key = os.urandom(bits // 8)
        out = aescl.new(key, aescl.MODE_CTR, nonce=bytes(8)).encrypt(message)
        figures[f"ctr-{bits}"] = rate(
            lambda k=key, o=out: aescl.new(k, aescl.MODE_CTR, nonce=bytes(8)).encrypt(
                message, output=o) or o, wait)
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, message)
    opened = aescl.chunked.decrypt(key, sealed)
    figures["seal"] = rate(lambda: aescl.chunked.encrypt(key, message, output=sealed)
                           or sealed, wait)
    figures["open"] = rate(lambda: aescl.chunked.decrypt(key, sealed, output=opened)
                           or opened, wait)
    figures["open, new array"] = rate(lambda: aescl.chunked.decrypt(key, sealed), wait)
    # Every call a message of its own, as openings of different files are: a new chunk
    # key, so a new H whose GHASH tables are made on the device (the calls above reopen
    # one message, whose tables an engine may keep from call to call).
    messages = [aescl.chunked.encrypt(key, message) for _ in range(DISTINCT)]
    turn = itertools.cycle(messages)
    figures["open, distinct messages"] = rate(
        lambda: aescl.chunked.decrypt(key, next(turn), output=opened) or opened, wait)
    return figures


host = np.frombuffer(os.urandom(SIZE), np.uint8)
cuda = next(d for d in aescl.devices() if d.is_cuda)
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == "nvidia")
tensor = torch.from_numpy(host.copy()).cuda()
queue = cl.CommandQueue(cl.Context([nvidia.cl_device]))
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
cl_message = cl_array.to_device(queue, host, allocator=pool)
engines = (("torch, CUDA engine", cuda, tensor, lambda _: torch.cuda.synchronize()),
           ("pyopencl, NVIDIA OpenCL", nvidia, cl_message, lambda result: result.finish()))
results = {"device": torch.cuda.get_device_name(0), "rounds": []}
for number in range(1, ROUNDS + 1):
    for label, device, message, wait in engines:
        kernel = kernel_figures(device, host)
        api = api_figures(message, wait)
        # (CTR against its own key size's figure; the chunked calls against the chunked)
        shares = {what: api[what] / kernel.get(what, kernel["gcm-chunked"]) for what in api}
        results["rounds"].append({"round": number, "engine": label, "kernel": kernel,
                                  "api": api, "share": shares})
        print(f"round {number} {label}: kernel " + ", ".join(
            f"{mode} {value:.1f}" for mode, value in kernel.items()) + " | " + ", ".join(
            f"{what} {api[what]:.1f} ({100 * shares[what]:.1f}%)" for what in api), flush=True)
print(json.dumps(results, indent=1))
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "paired_rounds.json"), "w") as f:
        json.dump(results, f, indent=1)
