"""Probe: is a split's limit the machine (memory) or the one Python process (the GIL)?

On a GPU host (docs/benchmarks), 1 GiB of CTR-128, steady rates over a few seconds:

1. ``processes``: the GPU (pinned->pinned) and the host engine (pageable) each in a
   process of its own, alone and then both at once. What the hardware allows when
   nothing is shared but memory.
2. ``threads``: in one process, the GPU's loop on one thread beside plain OpenSSL
   threads (``update_into`` on private arrays, no scheduler) of several piece sizes,
   thread counts and GIL switch intervals. What one interpreter allows.

Run on the accelerator machine: python3 tools/probe_coupling.py [processes] [threads]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import probe_timing  # tools/, beside this script
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import aescl

N = 1 << 30
KEY, IV = os.urandom(16), bytes(16)
SECONDS = 4.0


def encrypt(device: str, source: np.ndarray, target: np.ndarray) -> None:
    aescl.new(KEY, aescl.MODE_CTR, nonce=b"", initial_value=IV, device=device).encrypt(
        source, output=target)


def arrays(device: str, pinned: bool) -> tuple[np.ndarray, np.ndarray]:
    make = (lambda: aescl.pinned_empty(N, device)) if pinned else (
        lambda: np.empty(N, np.uint8))
    source, target = make(), make()
    source[:] = 7
    target[:] = 0  # touched before timing
    return source, target


def steady_gb_s(action, nbytes: int, stop: threading.Event | float) -> float:
    """GB/s of ``action`` repeated until ``stop`` is set (or for that many seconds)."""
    count, start = 0, time.perf_counter()
    while (not stop.is_set()) if isinstance(stop, threading.Event) else (
            time.perf_counter() - start < stop):
        action()
        count += 1
    return count * nbytes / (time.perf_counter() - start) / 1e9


def child(device: str, pinned: bool, start_at: float) -> None:
    """One process: warm up, wait for the common start, then report its steady rate."""
    source, target = arrays(device, pinned)
    encrypt(device, source, target)
    while time.time() < start_at:
        time.sleep(0.01)
    rate = steady_gb_s(lambda: encrypt(device, source, target), N, SECONDS)
    print(json.dumps({"device": device, "pinned": pinned, "gb_s": round(rate, 1)}))


def processes() -> None:
    def at_once(jobs: list[tuple[str, bool]]) -> None:
        start_at = time.time() + 8  # OpenCL's start-up in every child first
        running = [subprocess.Popen([sys.executable, __file__, "child", device, str(int(pinned)),
                                     str(start_at)], stdout=subprocess.PIPE, text=True)
                   for device, pinned in jobs]
        rates = [json.loads(p.communicate()[0]) for p in running]
        total = sum(r["gb_s"] for r in rates)
        print("  ".join(f"{r['device']}{' pinned' if r['pinned'] else ''} {r['gb_s']}"
                        for r in rates) + f"  sum {total:.1f}", flush=True)

    for jobs in ([("gpu", True)], [("host", False)], [("gpu", True), ("host", False)],
                 [("gpu", False)], [("gpu", False), ("host", False)]):
        at_once(jobs)


def threads() -> None:
    source, target = arrays("gpu", True)

    def gpu_loop(started: threading.Event, stop: threading.Event, rates: list[float]) -> None:
        encrypt("gpu", source, target)
        started.set()
        rates.append(steady_gb_s(lambda: encrypt("gpu", source, target), N, stop))

    def openssl_loop(piece: int, started: threading.Event, stop: threading.Event,
                     rates: list[float]) -> None:
        data, out = np.ones(64 << 20, np.uint8), np.zeros((64 << 20) + 16, np.uint8)
        data_view, out_view = memoryview(data), memoryview(out)

        def once() -> None:
            context = Cipher(algorithms.AES(KEY), modes.CTR(IV)).encryptor()
            for lo in range(0, data.nbytes, piece):
                context.update_into(data_view[lo:lo + piece], out_view[lo:lo + piece + 16])
        started.wait()
        rates.append(steady_gb_s(once, data.nbytes, stop))

    print("GPU thread  OpenSSL threads  piece MiB  switch ms  |  GPU  OpenSSL  sum")
    for gpu, count, piece_mib, switch in ((True, 0, 0, 5), (False, 15, 16, 5),
                                          (True, 16, 64, 5), (True, 15, 64, 5),
                                          (True, 14, 64, 5), (True, 15, 16, 5),
                                          (True, 15, 4, 5), (True, 15, 16, 0.5),
                                          (True, 15, 4, 0.5)):
        sys.setswitchinterval(switch / 1000)
        started, stop = threading.Event(), threading.Event()
        gpu_rates: list[float] = []
        host_rates: list[float] = []
        workers = [threading.Thread(target=openssl_loop,
                                    args=(piece_mib << 20, started, stop, host_rates))
                   for _ in range(count)]
        if gpu:
            workers.append(threading.Thread(target=gpu_loop, args=(started, stop, gpu_rates)))
        else:
            started.set()
        probe_timing.run_for(workers, stop, SECONDS, started)
        gpu_rate, host_rate = sum(gpu_rates), sum(host_rates)
        print(f"{'yes' if gpu else 'no':>10}  {count:>15}  {piece_mib:>9}  {switch:>9}  |"
              f"  {gpu_rate:4.1f}  {host_rate:7.1f}  {gpu_rate + host_rate:4.1f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3] == "1", float(sys.argv[4]))
    else:
        for name in sys.argv[1:] or ["processes", "threads"]:
            {"processes": processes, "threads": threads}[name]()
