"""Probes for the host engine on a many-core machine: thread and process routes for
OpenSSL through cryptography, and the shares of a split job (docs/benchmarks, 2026-11-23).

Run on the accelerator machine: python3 tools/probe_host_routes.py
"""

import mmap
import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import probe_timing  # tools/, beside this script
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import aescl
from aescl import scheduler

N = 1 << 30
CHUNK, SEALED = 16384, 16400
KEY16, KEY32, NONCE = os.urandom(16), os.urandom(32), os.urandom(12)
DATA = np.frombuffer(os.urandom(N), np.uint8)
OUT = np.empty(N + N // CHUNK * 16, np.uint8)


def best_gb_s(action, repeats=3):
    return probe_timing.best_gb_s(action, N, repeats)


def on_threads(threads, starts, work):
    """work(start) for every start, on ``threads`` threads pulling from one iterator."""
    pool = ThreadPoolExecutor(threads)

    def once():
        pending, lock = iter(starts), threading.Lock()

        def loop():
            while True:
                with lock:
                    start = next(pending, None)
                if start is None:
                    return
                work(start)

        for future in [pool.submit(loop) for _ in range(threads)]:
            future.result()

    try:
        return best_gb_s(once)
    finally:
        pool.shutdown()


def ctr_threads(threads, piece):
    source, target = memoryview(DATA), memoryview(OUT)

    def work(start):
        context = Cipher(algorithms.AES(KEY16), modes.CTR(start.to_bytes(16, "big"))).encryptor()
        context.update_into(source[start : start + piece], target[start : start + piece + 16])

    return on_threads(threads, range(0, N, piece), work)


def gcm_threads(threads, route):
    source, target = memoryview(DATA), memoryview(OUT)
    aead = AESGCM(KEY32)

    def work(first):
        for k in range(first, first + 64):
            text = source[k * CHUNK : (k + 1) * CHUNK]
            if route == "aead":
                aead.encrypt_into(NONCE, text, None, target[k * SEALED : (k + 1) * SEALED])
            else:
                context = Cipher(algorithms.AES(KEY32), modes.GCM(NONCE)).encryptor()
                context.update_into(text, target[k * SEALED : k * SEALED + CHUNK + 15])
                context.finalize()
                target[k * SEALED + CHUNK : (k + 1) * SEALED] = context.tag

    return on_threads(threads, range(0, N // CHUNK, 64), work)


def gcm_processes(processes):
    """Workers forked before any thread exists, over anonymous shared mappings."""
    shared_in, shared_out = mmap.mmap(-1, N), mmap.mmap(-1, OUT.nbytes)
    np.frombuffer(shared_in, np.uint8)[:] = DATA
    chunks = N // CHUNK

    def child(lo, hi, connection):
        aead, source, target = AESGCM(KEY32), memoryview(shared_in), memoryview(shared_out)
        while connection.recv() is not None:
            for k in range(lo, hi):
                aead.encrypt_into(NONCE, source[k * CHUNK : (k + 1) * CHUNK], None,
                                  target[k * SEALED : (k + 1) * SEALED])
            connection.send(1)

    context = mp.get_context("fork")
    ends, workers = [], []
    for i in range(processes):
        ours, theirs = context.Pipe()
        worker = context.Process(target=child, args=(
            chunks * i // processes, chunks * (i + 1) // processes, theirs))
        worker.start()
        ends.append(ours)
        workers.append(worker)

    def once():
        for end in ends:
            end.send(1)
        for end in ends:
            end.recv()

    rate = best_gb_s(once)
    copy_in = best_gb_s(lambda: np.copyto(np.frombuffer(shared_in, np.uint8), DATA))
    for end in ends:
        end.send(None)
    for worker in workers:
        worker.join()
    return rate, copy_in


def main():
    print("cores", os.cpu_count())
    for processes in (4, 8, 16):  # first: fork before this process starts threads
        rate, copy_in = gcm_processes(processes)
        print(f"gcm processes {processes}: {rate:.1f} GB/s; copy into shared memory "
              f"{copy_in:.1f} GB/s")
    for piece in (1 << 20, 4 << 20, 16 << 20):
        rates = {t: round(ctr_threads(t, piece), 1) for t in (1, 8, 16)}
        print(f"ctr threads, {piece >> 20} MiB pieces: {rates}")
    for route in ("aead", "context"):
        print(f"gcm threads, {route}:", {t: round(gcm_threads(t, route), 2) for t in (1, 4, 16)})

    pinned_in, pinned_out = aescl.pinned_empty(N, "nvidia"), aescl.pinned_empty(N, "nvidia")
    pinned_in[:] = DATA
    for devices in (["nvidia"], ["host"], ["nvidia", "host"], ["host", "nvidia"]):
        for label, (source, target) in (("pageable", (DATA, OUT[:N])),
                                        ("pinned", (pinned_in, pinned_out))):
            best = float("inf")
            for _ in range(4):
                cipher = aescl.new(KEY16, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
                                   device=devices)
                start = time.perf_counter()
                cipher.encrypt(source, output=target)
                best = min(best, time.perf_counter() - start)
            shares = [(s.device.id, round(s.units * 16 / N, 3), round(s.seconds, 3))
                      for s in scheduler.team(devices).shares]
            print("split", devices, label, f"{N / best / 1e9:.1f} GB/s", shares)


if __name__ == "__main__":
    main()
