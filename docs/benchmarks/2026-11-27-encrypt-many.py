"""Issue 56: ``aescl.AESGCM.encrypt_many`` / ``decrypt_many`` on a 2-D torch tensor of
N messages on a GPU (256 MiB in all, each message its own nonce, nonces an N x 12 host
array), beside one ``AESGCM.encrypt`` over the same 256 MiB, in the same run: best of 5,
synchronised after each call; the same rows given as a list of tensors (stacked by
torch into one, then one launch). Also the host's share of a call: the nonce rows read,
checked and made into J0s (device_messages.plan). Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-encrypt-many.py
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import torch

import aescl
from aescl.engines.programs import device_messages

TOTAL = 256 << 20


def best_seconds(call, runs: int = 5) -> float:
    call()
    torch.cuda.synchronize()
    fastest = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def gb_s(seconds: float) -> float:
    return round(TOTAL / seconds / 1e9, 1)


def main() -> None:
    key = os.urandom(32)
    cipher = aescl.AESGCM(key)
    big = torch.randint(0, 256, (TOTAL,), dtype=torch.uint8, device="cuda")
    nonce = os.urandom(12)
    figures = {"one call GB/s": gb_s(best_seconds(lambda: cipher.encrypt(nonce, big, None)))}
    for size in (4 << 10, 64 << 10):
        count = TOTAL // size
        rows = big.reshape(count, size)
        nonces = np.frombuffer(os.urandom(12 * count), np.uint8).reshape(count, 12)
        label = f"{count} x {size >> 10} KiB"
        figures[f"{label} encrypt_many GB/s"] = gb_s(best_seconds(
            lambda rows=rows, nonces=nonces: cipher.encrypt_many(nonces, rows)))
        listed_rows = list(rows)  # (a list of tensors: stacked into one, then one launch)
        figures[f"{label} list of tensors encrypt_many GB/s"] = gb_s(best_seconds(
            lambda listed_rows=listed_rows, nonces=nonces: cipher.encrypt_many(
                nonces, listed_rows)))
        sealed = cipher.encrypt_many(nonces, rows)
        figures[f"{label} decrypt_many GB/s"] = gb_s(best_seconds(
            lambda sealed=sealed, nonces=nonces: cipher.decrypt_many(nonces, sealed)))
        listed = [row.tobytes() for row in nonces]
        start = time.perf_counter()
        device_messages.plan(key, listed, size)
        figures[f"{label} host plan ms"] = round((time.perf_counter() - start) * 1e3, 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
