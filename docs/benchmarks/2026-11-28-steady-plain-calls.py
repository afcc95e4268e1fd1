"""Issue 55 (item 4): the five plain calls (bytes in, bytes out) of a long-lived process,
the default device against each named one. A fresh process's default runs its first
jobs on the host engine, starting no device until it has spent a start-up's worth of
time there (renting before buying, aescl.teams); a started CPU device whose rate is a
guess then takes large jobs until one has measured it. This script plays that part
first: 16 default calls of each kind, then ROUNDS rounds (default 3) of the default
and each device named (every real device listed), best of 4 each, GB/s. Prints one JSON
object: the figures, and the rates measured in the process.

    python3 docs/benchmarks/2026-11-28-steady-plain-calls.py [MiB [ROUNDS]]   # 256, 3
"""

from __future__ import annotations

import json
import os
import sys

import aescl
from aescl import rates
from aescl.timing import wall


def main(mib: int, rounds: int) -> None:
    n = mib << 20
    data, key, nonce = os.urandom(n), os.urandom(32), os.urandom(12)
    sealed = aescl.chunked.encrypt(key, data, device="host")
    text, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="host").encrypt_and_digest(data)
    calls = {
        "chunked.encrypt": lambda d: aescl.chunked.encrypt(key, data, device=d),
        "chunked.decrypt": lambda d: aescl.chunked.decrypt(key, sealed, device=d),
        "GCM encrypt_and_digest": lambda d: aescl.new(
            key, aescl.MODE_GCM, nonce=nonce, device=d).encrypt_and_digest(data),
        "GCM decrypt_and_verify": lambda d: aescl.new(
            key, aescl.MODE_GCM, nonce=nonce, device=d).decrypt_and_verify(text, tag),
        "CTR encrypt": lambda d: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8],
                                           device=d).encrypt(data),
    }
    for call in calls.values():
        for _ in range(16):
            call(None)
    named = [d.id for d in aescl.list_devices() if not d.is_simulator]
    figures: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for name, call in calls.items():
            for device in [None, *named]:
                fastest = min(wall(lambda call=call, device=device: call(device))
                              for _ in range(4))
                figures.setdefault(name, {}).setdefault(device or "default", []).append(
                    round(n / fastest / 1e9, 2))
    measured = {f"{device} {kind}": round(rate / 1e9, 2)
                for (device, kind), rate in rates.measured.items()}
    print(json.dumps({"GB/s": figures, "measured GB/s": measured}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256,
         int(sys.argv[2]) if len(sys.argv) > 2 else 3)
