"""Issue 56 (item 3): what one small call on a torch tensor costs, beside the floor of any
Python library that launches a kernel through PyTorch: ``torch.empty`` of the result's
size, and a 4 KiB ``torch.bitwise_xor`` (one allocation and one launch, in C++), against
``aescl.AESGCM.encrypt``/``decrypt`` of 4 KiB. Microseconds per call, the best of three
rounds of 2,000 calls (500 to open), synchronised after each round. Also the one-call
figure of a 256 MiB tensor in this process (``AESGCM.encrypt``, best of 8), which falls
in one of two modes a process (about 200 or 240 GB/s on an H200, whatever the commit).
Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-one-call-floor.py
"""

from __future__ import annotations

import json
import os

import torch

import aescl
from aescl.timing import wall


def synchronised(call, times: int = 1):
    """``call`` ``times`` over, then a wait for the GPU: what one timing covers."""
    def run() -> None:
        for _ in range(times):
            call()
        torch.cuda.synchronize()
    return run


def per_call_us(call, calls: int = 2000) -> float:
    synchronised(call, 50)()  # (warm)
    return round(min(wall(synchronised(call, calls)) for _ in range(3)) / calls * 1e6, 1)


def large_gb_s(call, nbytes: int, runs: int = 8) -> float:
    synchronised(call)()  # (warm)
    return round(nbytes / min(wall(synchronised(call)) for _ in range(runs)) / 1e9, 1)


def main() -> None:
    key, nonce = os.urandom(32), os.urandom(12)
    cipher = aescl.AESGCM(key)
    x = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    y = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    sealed = cipher.encrypt(nonce, x, None)
    big = torch.randint(0, 256, (256 << 20,), dtype=torch.uint8, device="cuda")
    print(json.dumps({
        "torch.empty(4112) us": per_call_us(
            lambda: torch.empty(4112, dtype=torch.uint8, device="cuda")),
        "torch.bitwise_xor 4 KiB us": per_call_us(lambda: torch.bitwise_xor(x, y)),
        "AESGCM.encrypt 4 KiB us": per_call_us(lambda: cipher.encrypt(nonce, x, None)),
        "AESGCM.decrypt 4 KiB us": per_call_us(lambda: cipher.decrypt(nonce, sealed, None),
                                               500),
        "AESGCM.encrypt 256 MiB GB/s": large_gb_s(lambda: cipher.encrypt(nonce, big, None),
                                                  big.numel()),
    }))


if __name__ == "__main__":
    main()
