"""Issue 55's five plain calls (bytes in, bytes out, no device named) against pyca
`cryptography`'s one-shot calls, in one process, best of 4. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-plain-calls.py [MiB]   # default 256
"""

from __future__ import annotations

import json
import os
import sys
import time

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import aescl


def best(run, nbytes: int, tries: int = 4) -> float:
    run()
    fastest = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run()
        fastest = min(fastest, time.perf_counter() - start)
    return round(nbytes / fastest / 1e9, 3)


def main(mib: int) -> None:
    n = mib << 20
    data, key, nonce = os.urandom(n), os.urandom(32), os.urandom(12)
    sealed = aescl.chunked.encrypt(key, data)
    text, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
    pyca = AESGCM(key)
    pyca_sealed = pyca.encrypt(nonce, data, None)
    figures = {
        "chunked.encrypt": best(lambda: aescl.chunked.encrypt(key, data), n),
        "chunked.decrypt": best(lambda: aescl.chunked.decrypt(key, sealed), n),
        "GCM encrypt_and_digest": best(
            lambda: aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(data), n),
        "GCM decrypt_and_verify": best(
            lambda: aescl.new(key, aescl.MODE_GCM, nonce=nonce).decrypt_and_verify(text, tag), n),
        "CTR encrypt": best(
            lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8]).encrypt(data), n),
        "pyca AESGCM.encrypt": best(lambda: pyca.encrypt(nonce, data, None), n),
        "pyca AESGCM.decrypt": best(lambda: pyca.decrypt(nonce, pyca_sealed, None), n),
        "pyca CTR update": best(lambda: Cipher(
            algorithms.AES(key[:16]), modes.CTR(nonce + bytes(4))).encryptor().update(data), n),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
