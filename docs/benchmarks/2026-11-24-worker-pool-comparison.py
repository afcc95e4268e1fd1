"""The measurement behind docs/benchmarks (2026-11-24, issue 32, item 7), kept as run:
``python3 docs/benchmarks/2026-11-24-worker-pool-comparison.py``.

The host engine's worker processes against concurrent.futures.ProcessPoolExecutor with
multiprocessing.shared_memory: CTR-128 over arrays in shared memory, 4 MiB pieces, alone
and beside a thread that keeps the GIL busy (as a GPU's feeding thread does).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

import numpy as np

import aescl

SIZE, PIECE = 256 << 20, 4 << 20
KEY, IV = bytes(range(16)), bytes(16)

_attached: dict[str, shared_memory.SharedMemory] = {}


def _ctr_piece(source_name: str, target_name: str, lo: int, hi: int) -> None:
    """In a pool worker: CTR over bytes lo..hi of one shared region into another."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    for name in (source_name, target_name):
        if name not in _attached:
            _attached[name] = shared_memory.SharedMemory(name=name)
    source, target = _attached[source_name].buf, _attached[target_name].buf
    counter = (int.from_bytes(IV, "big") + lo // 16) % (1 << 128)
    cipher = Cipher(algorithms.AES(KEY), modes.CTR(counter.to_bytes(16, "big")))
    # (update_into wants 15 bytes of room beyond the output: the target has 16 more)
    cipher.encryptor().update_into(source[lo:hi], target[lo : hi + 15])


def _busy(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1


def _gb_s(run, rounds: int = 5) -> float:
    run()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return SIZE / statistics.median(times) / 1e9


def main() -> None:
    source = aescl.pinned_empty(SIZE, "host")  # shared with the host engine's workers
    target = aescl.pinned_empty(SIZE, "host")
    source[:] = np.frombuffer(os.urandom(SIZE), np.uint8)

    def ours() -> None:
        aescl.new(KEY, aescl.MODE_CTR, nonce=b"", initial_value=IV, device="host").encrypt(
            source, output=target)

    region_in = shared_memory.SharedMemory(create=True, size=SIZE)
    region_out = shared_memory.SharedMemory(create=True, size=SIZE + 16)
    region_in.buf[:SIZE] = source.tobytes()
    pool = ProcessPoolExecutor(os.cpu_count())
    pieces = SIZE // PIECE

    def theirs() -> None:
        list(pool.map(_ctr_piece, [region_in.name] * pieces, [region_out.name] * pieces,
                      range(0, SIZE, PIECE), range(PIECE, SIZE + PIECE, PIECE)))

    for label, beside in (("alone", False), ("beside a busy thread", True)):
        stop = threading.Event()
        thread = threading.Thread(target=_busy, args=(stop,))
        if beside:
            thread.start()
        try:
            mine, stdlib = _gb_s(ours), _gb_s(theirs)
        finally:
            stop.set()
            if beside:
                thread.join()
        print(f"{label}: aescl's worker processes {mine:.2f} GB/s, "
              f"ProcessPoolExecutor + shared_memory {stdlib:.2f} GB/s")
    print("same bytes:", bytes(region_out.buf[:SIZE]) == target.tobytes())
    pool.shutdown()
    for region in (region_in, region_out):
        region.close()
        region.unlink()


if __name__ == "__main__":
    main()
