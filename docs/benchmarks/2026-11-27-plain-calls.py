"""Issue 55's five plain calls (bytes in, bytes out, no device named) against pyca
`cryptography`'s one-shot calls, in one process, best of 4; or, with ``doors``, what each
door of a call costs (README, "Fast paths"). Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-plain-calls.py [MiB]         # default 256
    python3 docs/benchmarks/2026-11-27-plain-calls.py doors [MiB]
    python3 docs/benchmarks/2026-11-27-plain-calls.py reading [MiB]
    python3 docs/benchmarks/2026-11-27-plain-calls.py staging [MiB]

``reading``: the streaming Reader and decrypt_range on bytes, beside chunked.decrypt.
``staging``: the host engine's chunked format on ordinary memory (hosts of
``STAGE_MIN_CORES`` cores or more), worked on by its worker processes in place
(reach.py), staged through shared memory to them (``REACH_MIN_BYTES`` raised past the
job), and on a thread (both raised), against ``pinned_empty(n, "host")``.

$PLAIN_DEVICE names a device for the five plain calls (default: none, the default team).
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import aescl

DEVICE = os.environ.get("PLAIN_DEVICE") or None


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
        "chunked.encrypt": best(lambda: aescl.chunked.encrypt(key, data, device=DEVICE), n),
        "chunked.decrypt": best(lambda: aescl.chunked.decrypt(key, sealed, device=DEVICE), n),
        "GCM encrypt_and_digest": best(
            lambda: aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=DEVICE)
            .encrypt_and_digest(data), n),
        "GCM decrypt_and_verify": best(
            lambda: aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=DEVICE)
            .decrypt_and_verify(text, tag), n),
        "CTR encrypt": best(
            lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8], device=DEVICE)
            .encrypt(data), n),
        "pyca AESGCM.encrypt": best(lambda: pyca.encrypt(nonce, data, None), n),
        "pyca AESGCM.decrypt": best(lambda: pyca.decrypt(nonce, pyca_sealed, None), n),
        "pyca CTR update": best(lambda: Cipher(
            algorithms.AES(key[:16]), modes.CTR(nonce + bytes(4))).encryptor().update(data), n),
    }
    print(json.dumps(figures))



def doors(mib: int) -> None:
    """The doors of one call on host data, default device: bytes in and bytes out;
    ``output=`` into ordinary memory (a NumPy array, reused); input and output in
    ``aescl.pinned_empty(n)`` (no device named: the default team's memory)."""
    n = mib << 20
    key, nonce = os.urandom(32), os.urandom(12)
    plain = os.urandom(n)
    ordinary = np.frombuffer(plain, np.uint8).copy()
    pinned = aescl.pinned_empty(n)
    pinned[:] = ordinary
    sealed_n = aescl.chunked.sealed_size(n)
    outputs = {"ordinary": (np.empty(n, np.uint8), np.empty(sealed_n, np.uint8)),
               "pinned": (aescl.pinned_empty(n), aescl.pinned_empty(sealed_n))}
    figures = {}
    for door, data in (("bytes", plain), ("ordinary", ordinary), ("pinned", pinned)):
        out, sealed = outputs.get(door, (None, None))
        figures[f"chunked.encrypt {door}"] = best(
            lambda d=data, o=sealed: aescl.chunked.encrypt(key, d, output=o), n)
        figures[f"CTR {door}"] = best(
            lambda d=data, o=out: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8]).encrypt(
                d, output=o), n)
        figures[f"GCM encrypt_and_digest {door}"] = best(
            lambda d=data, o=out: aescl.new(key, aescl.MODE_GCM, nonce=nonce)
            .encrypt_and_digest(d, output=o), n)
    print(json.dumps(figures))



def _read_in_pieces(key: bytes, sealed: bytes, piece: int) -> None:
    reader = aescl.chunked.Reader(io.BytesIO(sealed), key)
    while reader.read(piece):
        pass


def reading(mib: int) -> None:
    """The streaming Reader and decrypt_range on bytes, beside chunked.decrypt of the same
    message, default device; GB/s of plaintext."""
    n = mib << 20
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, os.urandom(n))
    figures = {
        "chunked.decrypt": best(lambda: aescl.chunked.decrypt(key, sealed), n),
        "Reader.read()": best(
            lambda: aescl.chunked.Reader(io.BytesIO(sealed), key).read(), n),
        "Reader.read(1 MiB) each": best(lambda: _read_in_pieces(key, sealed, 1 << 20), n),
        "decrypt_range all": best(lambda: aescl.chunked.decrypt_range(key, sealed, 0, n), n),
        "decrypt_range middle half": best(
            lambda: aescl.chunked.decrypt_range(key, sealed, n // 4 + 5, n // 2), n // 2),
    }
    print(json.dumps(figures))


def staging(mib: int) -> None:
    from aescl.engines.host import engine as host

    n = mib << 20
    key, data = os.urandom(32), os.urandom(n)
    plain = np.frombuffer(data, np.uint8).copy()
    out = np.empty(aescl.chunked.sealed_size(n), np.uint8)
    pinned_in = aescl.pinned_empty(n, "host")
    pinned_out = aescl.pinned_empty(len(out), "host")
    pinned_in[:] = plain
    sealed = aescl.chunked.encrypt(key, data, device="host")
    figures = {}
    opened = np.empty(n, np.uint8)
    sealed_array = np.frombuffer(sealed, np.uint8).copy()
    never = 1 << 62
    for route, reach_min, stage_min in (
            ("reached", host.REACH_MIN_BYTES, host.STAGE_MIN_BYTES),
            ("staged", never, host.STAGE_MIN_BYTES), ("thread", never, never)):
        host.REACH_MIN_BYTES, host.STAGE_MIN_BYTES = reach_min, stage_min
        figures[f"{route} output= ordinary decrypt"] = best(
            lambda: aescl.chunked.decrypt(key, sealed_array, device="host", output=opened), n)
        figures[f"{route} bytes->bytes encrypt"] = best(
            lambda: aescl.chunked.encrypt(key, data, device="host"), n)
        figures[f"{route} bytes->bytes decrypt"] = best(
            lambda: aescl.chunked.decrypt(key, sealed, device="host"), n)
        figures[f"{route} output= ordinary encrypt"] = best(
            lambda: aescl.chunked.encrypt(key, plain, device="host", output=out), n)
    figures["pinned encrypt"] = best(
        lambda: aescl.chunked.encrypt(key, pinned_in, device="host", output=pinned_out), n)
    print(json.dumps(figures))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    runs = {"doors": doors, "reading": reading, "staging": staging}
    run = runs.get(arguments[0], main) if arguments else main
    arguments = arguments[1:] if run is not main else arguments
    run(int(arguments[0]) if arguments else 256)
