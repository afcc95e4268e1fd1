"""Probe: how much the GPU host's memory moves when the GPU and the host's cores stream at
once (docs/benchmarks, 2026-11-24).

The GPU encrypts 1 GiB of CTR-128 from pinned memory to pinned memory through aescl, over
and over, while k threads copy 1 GiB between two ordinary arrays (numpy, which releases the
GIL); each side's rate is its bytes over the run. A copy is the least work the host's cores
can do per byte they stream, so GPU rate + copy rate bounds what any split of one job
between the GPU and the host's cores can reach on this machine.

First, what it costs to pin ordinary memory for one job instead: a CL_MEM_USE_HOST_PTR
buffer over a numpy array (the NVIDIA driver then page-locks it), timed from creation to
release, and the copies from the array while it lives.

Run on the accelerator machine: [T=2] python3 tools/probe_memory_bus.py
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import probe_timing  # tools/, beside this script
import pyopencl as cl

import aescl
from aescl.engines.opencl.kernels import runtime

N = 1 << 30
PIECE = 64 << 20
SECONDS = float(os.environ.get("T", 2.0))
KEY = os.urandom(16)


def gpu_loop(gpu: aescl.Device, source: np.ndarray, target: np.ndarray,
             stop: threading.Event, rates: list[float]) -> None:
    done, start = 0, time.perf_counter()
    while not (stop.is_set() and done):
        aescl.new(KEY, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
                  device=gpu).encrypt(source, output=target)
        done += N
    rates.append(done / (time.perf_counter() - start) / 1e9)


def copy_loop(source: np.ndarray, target: np.ndarray, stop: threading.Event,
              rates: list[float]) -> None:
    done, start = 0, time.perf_counter()
    while not stop.is_set():
        for lo in range(0, len(source), PIECE):
            hi = min(len(source), lo + PIECE)
            np.copyto(target[lo:hi], source[lo:hi])
            done += hi - lo
    rates.append(done / (time.perf_counter() - start) / 1e9)


def pin_costs(gpu: aescl.Device) -> None:
    context, queue = runtime(gpu).context, runtime(gpu).queue
    for nbytes in (64 << 20, 256 << 20, N):
        device_buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, nbytes)
        for _ in range(3):
            array = np.ones(nbytes, np.uint8)  # touched: only the pinning is timed
            start = time.perf_counter()
            cl.enqueue_copy(queue, device_buffer, array).wait()
            plain = time.perf_counter() - start
            start = time.perf_counter()
            pinning = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                                hostbuf=array)
            created = time.perf_counter()
            cl.enqueue_copy(queue, device_buffer, array).wait()
            copied = time.perf_counter()
            pinning.release()
            released = time.perf_counter()
            print(f"{nbytes >> 20:5} MiB: copy from ordinary memory {nbytes / plain / 1e9:5.1f} "
                  f"GB/s; pinning {1e3 * (created - start):5.1f} ms, then the copy "
                  f"{nbytes / (copied - created) / 1e9:5.1f} GB/s, release "
                  f"{1e3 * (released - copied):5.1f} ms", flush=True)


def main() -> None:
    gpu = aescl.get_device("gpu")
    pin_costs(gpu)
    pinned_in, pinned_out = aescl.pinned_empty(N, gpu), aescl.pinned_empty(N, gpu)
    pinned_in[:] = 1
    plain_in, plain_out = np.ones(N, np.uint8), np.zeros(N, np.uint8)
    print("gpu", gpu.id, gpu.name, "| cores", os.cpu_count(), flush=True)
    built = threading.Event()
    built.set()
    gpu_loop(gpu, pinned_in, pinned_out, built, [])  # one call: the kernels are built first
    for with_gpu, threads in [(True, 0), *((False, k) for k in (8, 12, 15, 16)),
                              *((True, k) for k in (4, 8, 12, 15))]:
        stop = threading.Event()
        gpu_rates: list[float] = []
        copy_rates: list[float] = []
        workers = [threading.Thread(target=gpu_loop, args=(gpu, pinned_in, pinned_out, stop,
                                                           gpu_rates))] if with_gpu else []
        for k in range(threads):  # each thread copies its own part of the arrays
            part = slice(N * k // threads, N * (k + 1) // threads)
            workers.append(threading.Thread(target=copy_loop, args=(
                plain_in[part], plain_out[part], stop, copy_rates)))
        probe_timing.run_for(workers, stop, SECONDS)
        gpu_rate, copy_rate = sum(gpu_rates), sum(copy_rates)
        print(f"GPU {'on ' if with_gpu else 'off'}, {threads:2} copy threads: GPU CTR-128 "
              f"{gpu_rate:5.1f} GB/s, copies {copy_rate:5.1f} GB/s, together "
              f"{gpu_rate + copy_rate:5.1f}", flush=True)


if __name__ == "__main__":
    main()
