"""Probe: the chunked format on the host engine from ordinary memory (docs/benchmarks,
2026-11-24). Its threads hold the GIL through each chunk's AEAD call; its worker processes
cannot see ordinary memory. Measured here: the threads; the workers fed through small
shared staging slots (a thread per worker copies a piece in, the worker seals it, the thread
copies it out); and the workers on shared arrays, which need no copies.

Run: [N=bytes] [PIECE=chunks] [ROUNDS=3] python3 tools/probe_staged_chunks.py
"""

from __future__ import annotations

import os
import threading

import numpy as np
import probe_timing  # tools/, beside this script

import aescl
from aescl import chunked
from aescl.chunkformat import CHUNK_SIZE, SEALED_CHUNK_SIZE
from aescl.devices import host_device
from aescl.engines.host import processes as _processes
from aescl.engines.host import shared as _shared

N = int(os.environ.get("N", 64 << 20))
PIECE = int(os.environ.get("PIECE", 64))  # chunks per staged piece
KEY, NONCE = os.urandom(32), os.urandom(12)
CORES = host_device().compute_units


def best_gb_s(action) -> float:
    return probe_timing.best_gb_s(action, N, repeats=4, warm_up=True)


def main() -> None:
    source = np.frombuffer(os.urandom(N), np.uint8)
    target = np.empty(chunked.sealed_size(N, raw=True), np.uint8)
    slot = PIECE * (CHUNK_SIZE + SEALED_CHUNK_SIZE)
    staging_memory = _shared.shared_empty(CORES * slot)
    staging = np.frombuffer(staging_memory, np.uint8)
    region, _ = _shared.locate(staging_memory)
    full = N // CHUNK_SIZE

    def staged() -> None:
        pool = _processes.workers(host_device(), CORES)
        cursor, lock = [0], threading.Lock()

        def feed(k: int) -> None:
            worker, base = pool._all[k], k * slot
            stage_in = staging[base : base + PIECE * CHUNK_SIZE]
            stage_out = staging[base + PIECE * CHUNK_SIZE : base + slot]
            while True:
                with lock:
                    lo = cursor[0]
                    hi = cursor[0] = min(full, lo + PIECE)
                if lo >= hi:
                    return
                n = hi - lo
                np.copyto(stage_in[: n * CHUNK_SIZE], source[lo * CHUNK_SIZE : hi * CHUNK_SIZE])
                worker.send(("seal", KEY, NONCE, lo, (region.token, base, n * CHUNK_SIZE),
                             (region.token, base + PIECE * CHUNK_SIZE, n * SEALED_CHUNK_SIZE),
                             0, n), [region])
                worker.finish()
                np.copyto(target[lo * SEALED_CHUNK_SIZE : hi * SEALED_CHUNK_SIZE],
                          stage_out[: n * SEALED_CHUNK_SIZE])

        feeders = [threading.Thread(target=feed, args=(k,)) for k in range(CORES)]
        for feeder in feeders:
            feeder.start()
        for feeder in feeders:
            feeder.join()

    def threads() -> None:
        chunked.encrypt_raw(KEY, NONCE, source, device="host", output=target)

    shared_in = aescl.pinned_empty(N, "host")
    shared_in[:] = source
    shared_out = aescl.pinned_empty(len(target), "host")

    def shared() -> None:
        chunked.encrypt_raw(KEY, NONCE, shared_in, device="host", output=shared_out)

    threads()
    expected = target[: full * SEALED_CHUNK_SIZE].copy()
    target[:] = 0
    staged()
    assert (target[: full * SEALED_CHUNK_SIZE] == expected).all(), "staged output differs"
    for round_ in range(int(os.environ.get("ROUNDS", 3))):
        print(f"r{round_} {N >> 20} MiB, {CORES} workers, pieces of {PIECE} chunks: threads "
              f"{best_gb_s(threads):.2f}, staged {best_gb_s(staged):.2f}, shared "
              f"{best_gb_s(shared):.2f} GB/s", flush=True)


if __name__ == "__main__":
    main()
