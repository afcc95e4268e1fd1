"""Issue 56: ``aescl.AESGCM`` on torch tensors on a GPU: the time of one call per message
size (best of 5 runs of 50 calls, synchronised at the end of each run), and one call over
256 MiB, beside ``aescl.new(key, MODE_GCM, nonce).encrypt_and_digest`` on the same
tensors. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-aesgcm-arrays.py
"""

from __future__ import annotations

import json
import os
import time

import torch

import aescl


def per_call_us(call, runs: int = 5, calls: int = 50) -> float:
    call()
    torch.cuda.synchronize()
    fastest = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        fastest = min(fastest, (time.perf_counter() - start) / calls)
    return round(fastest * 1e6, 1)


def main() -> None:
    key, nonce = os.urandom(32), os.urandom(12)
    cipher = aescl.AESGCM(key)
    figures = {}
    for size in (4 << 10, 64 << 10, 1 << 20):
        data = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
        figures[f"AESGCM.encrypt {size >> 10} KiB us"] = per_call_us(
            lambda data=data: cipher.encrypt(nonce, data, None))
        sealed = cipher.encrypt(nonce, data, None)
        figures[f"AESGCM.decrypt {size >> 10} KiB us"] = per_call_us(
            lambda sealed=sealed: cipher.decrypt(nonce, sealed, None))
        figures[f"MODE_GCM encrypt_and_digest {size >> 10} KiB us"] = per_call_us(
            lambda data=data: aescl.new(key, aescl.MODE_GCM, nonce=nonce)
            .encrypt_and_digest(data))
    big = torch.randint(0, 256, (256 << 20,), dtype=torch.uint8, device="cuda")
    seconds = per_call_us(lambda: cipher.encrypt(nonce, big, None), runs=3, calls=3) / 1e6
    figures["AESGCM.encrypt 256 MiB GB/s"] = round((256 << 20) / seconds / 1e9, 1)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
