"""Issue 55, item 1 for reading: the streaming Reader and decrypt_range on bytes, against
chunked.decrypt of the same message, in one process, best of 4. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-reader-range.py [MiB]   # default 256
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

import aescl


def best(run, nbytes: int, tries: int = 4) -> float:
    run()
    fastest = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        run()
        fastest = min(fastest, time.perf_counter() - start)
    return round(nbytes / fastest / 1e9, 3)


def read_in_pieces(key: bytes, sealed: bytes, piece: int) -> None:
    reader = aescl.chunked.Reader(io.BytesIO(sealed), key)
    while reader.read(piece):
        pass


def main(mib: int) -> None:
    n = mib << 20
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, os.urandom(n))
    figures = {
        "chunked.decrypt": best(lambda: aescl.chunked.decrypt(key, sealed), n),
        "Reader.read()": best(
            lambda: aescl.chunked.Reader(io.BytesIO(sealed), key).read(), n),
        "Reader.read(1 MiB) each": best(lambda: read_in_pieces(key, sealed, 1 << 20), n),
        "decrypt_range all": best(lambda: aescl.chunked.decrypt_range(key, sealed, 0, n), n),
        "decrypt_range middle half": best(
            lambda: aescl.chunked.decrypt_range(key, sealed, n // 4 + 5, n // 2), n // 2),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 256)
