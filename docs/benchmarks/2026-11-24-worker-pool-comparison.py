"""The measurement behind docs/benchmarks (2026-11-24, issue 32, item 7), kept as run:
``python3 docs/benchmarks/2026-11-24-worker-pool-comparison.py``.

The host engine's worker processes against concurrent.futures.ProcessPoolExecutor with
multiprocessing.shared_memory: CTR-128 over arrays in shared memory, 4 MiB pieces, alone
and beside a thread that keeps the GIL busy (as a GPU's feeding thread does)."""
import os, statistics, sys, threading, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

import numpy as np

SIZE, PIECE = 256 << 20, 4 << 20
KEY, IV = bytes(range(16)), bytes(16)

_attached = {}


def _ctr_piece(src_name, dst_name, lo, hi):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    for name in (src_name, dst_name):
        if name not in _attached:
            _attached[name] = shared_memory.SharedMemory(name=name)
    src, dst = _attached[src_name].buf, _attached[dst_name].buf
    counter = (int.from_bytes(IV, "big") + lo // 16) % (1 << 128)
    enc = Cipher(algorithms.AES(KEY), modes.CTR(counter.to_bytes(16, "big"))).encryptor()
    enc.update_into(src[lo:hi], dst[lo:hi + 15] if hi + 15 <= len(dst) else bytearray(hi - lo + 15))


def busy(stop):
    x = 0
    while not stop.is_set():
        x += 1


def timed(run, rounds=5):
    run()
    times = []
    for _ in range(rounds):
        t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
    return SIZE / statistics.median(times) / 1e9


def main():
    import aescl
    workers = os.cpu_count()
    # aescl's host engine in its worker processes (arrays in its shared memory)
    src = aescl.pinned_empty(SIZE, "host"); dst = aescl.pinned_empty(SIZE, "host")
    src[:] = np.frombuffer(os.urandom(SIZE), np.uint8)
    def ours():
        aescl.new(KEY, aescl.MODE_CTR, nonce=b"", initial_value=IV, device="host").encrypt(src, output=dst)
    # the standard library's pool on multiprocessing.shared_memory
    a = shared_memory.SharedMemory(create=True, size=SIZE)
    b = shared_memory.SharedMemory(create=True, size=SIZE + 16)
    a.buf[:SIZE] = src.tobytes()
    pool = ProcessPoolExecutor(workers)
    def theirs():
        list(pool.map(_ctr_piece, [a.name] * (SIZE // PIECE), [b.name] * (SIZE // PIECE),
                      range(0, SIZE, PIECE), range(PIECE, SIZE + PIECE, PIECE)))
    theirs()
    for label, beside in (("alone", False), ("beside a busy thread", True)):
        stop = threading.Event()
        thread = threading.Thread(target=busy, args=(stop,))
        if beside:
            thread.start()
        try:
            o, t = timed(ours), timed(theirs)
        finally:
            stop.set()
            if beside:
                thread.join()
        print(f"{label}: aescl's worker processes {o:.2f} GB/s, ProcessPoolExecutor + shared_memory {t:.2f} GB/s")
    ours()
    print("same bytes:", bytes(b.buf[:SIZE]) == dst.tobytes())
    pool.shutdown(); a.close(); a.unlink(); b.close(); b.unlink()


if __name__ == "__main__":
    main()
