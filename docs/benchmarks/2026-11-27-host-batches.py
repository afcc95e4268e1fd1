"""Many GCM messages in host memory: ``aescl.AESGCM.encrypt_many``/``decrypt_many`` against
a Python loop of pyca's ``AESGCM.encrypt``/``decrypt`` (issue 56, item 4), the same
messages in the same process, rounds interleaved.

    python3 docs/benchmarks/2026-11-27-host-batches.py [ROUNDS]

Each shape is N messages of L bytes, each its own 12-byte nonce, no associated data. The
aescl cipher names the OpenCL CPU device (``device="pocl"``). Prints the best and the
median of the rounds, in ms, and the ratio of the bests (pyca's loop / aescl's batch;
> 1: aescl faster).

The route it was written for, a batch of host messages in one launch on a CPU device, is
in commit 14ce845 and was taken out in the next one (docs/benchmarks/README.md, "Many
messages on host data in one launch: measured, not kept"): run it there to see that
route. On later commits it times aescl's own loop (pyca's calls), a yardstick.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM as PycaAESGCM

import aescl

SHAPES = [(64, 1024), (256, 1024), (16384, 1024), (65536, 256), (4096, 4096), (1024, 65536)]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    key = os.urandom(16)
    pyca, cipher = PycaAESGCM(key), aescl.AESGCM(key, device="pocl")
    print(f"{'N x L':>14} {'pyca enc':>16} {'aescl enc':>16} {'ratio':>6} "
          f"{'pyca dec':>16} {'aescl dec':>16} {'ratio':>6}")
    for count, length in SHAPES:
        messages = [os.urandom(length) for _ in range(count)]
        nonces = [os.urandom(12) for _ in range(count)]
        sealed = [pyca.encrypt(n, m, None) for n, m in zip(nonces, messages, strict=True)]
        assert cipher.encrypt_many(nonces, messages) == sealed  # (and the first call's costs)
        assert cipher.decrypt_many(nonces, sealed) == messages
        calls = {
            "pyca enc": lambda: [pyca.encrypt(n, m, None) for n, m in zip(nonces, messages)],
            "aescl enc": lambda: cipher.encrypt_many(nonces, messages),
            "pyca dec": lambda: [pyca.decrypt(n, s, None) for n, s in zip(nonces, sealed)],
            "aescl dec": lambda: cipher.decrypt_many(nonces, sealed),
        }
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                start = time.perf_counter()
                result = call()
                times[name].append((time.perf_counter() - start) * 1e3)
                del result
        cells = {name: f"{min(t):7.2f} ({statistics.median(t):6.2f})"
                 for name, t in times.items()}
        print(f"{count:>6} x {length:<6} {cells['pyca enc']:>16} {cells['aescl enc']:>16} "
              f"{min(times['pyca enc']) / min(times['aescl enc']):6.2f} "
              f"{cells['pyca dec']:>16} {cells['aescl dec']:>16} "
              f"{min(times['pyca dec']) / min(times['aescl dec']):6.2f}")


if __name__ == "__main__":
    main()
