"""One MODE_GCM message on host data through a GPU engine's stream (``aescl.new(key,
MODE_GCM, device=D)``): ``encrypt_and_digest`` and ``decrypt_and_verify``, bytes in and
bytes out, into ordinary ``output=`` arrays, and between arrays from
``aescl.pinned_empty(n, D)``; $PROBE_MIB MiB (1024 by default), best of 3 after a warm-up,
GB/s, every opening checked against the text. Prints one JSON object, labelled with the
first argument (which build ran it).

    python3 docs/benchmarks/2026-12-02-gcm-stream.py LABEL DEVICE...
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import aescl
from aescl.timing import wall

NBYTES = int(os.environ.get("PROBE_MIB", "1024")) << 20


def best(run) -> float:
    run()
    return round(NBYTES / min(wall(run) for _ in range(3)) / 1e9, 2)


def figures(spec: str) -> dict[str, float]:
    key, nonce = os.urandom(32), os.urandom(12)
    data = os.urandom(NBYTES)
    sealed, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(data)

    def cipher():
        return aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=spec)

    assert cipher().encrypt_and_digest(data) == (sealed, tag)
    assert cipher().decrypt_and_verify(sealed, tag) == data
    rates = {"seal bytes": best(lambda: cipher().encrypt_and_digest(data)),
             "open bytes": best(lambda: cipher().decrypt_and_verify(sealed, tag))}
    for memory, empty in (("ordinary", lambda n: np.ones(n, np.uint8)),
                          ("pinned", lambda n: aescl.pinned_empty(n, spec))):
        plain, text, out = empty(NBYTES), empty(NBYTES), empty(NBYTES)
        plain[:] = np.frombuffer(data, np.uint8)
        text[:] = np.frombuffer(sealed, np.uint8)
        rates[f"seal {memory}"] = best(lambda p=plain, o=out: cipher().encrypt_and_digest(
            p, output=o))
        rates[f"open {memory}"] = best(lambda t=text, o=out: cipher().decrypt_and_verify(
            t, tag, output=o))
        assert bytes(out[:4096]) == data[:4096] and bytes(out[-4096:]) == data[-4096:]
    return rates


def main(label: str, specs: list[str]) -> None:
    print(json.dumps({"build": label, "MiB": NBYTES >> 20,
                      **{spec: figures(spec) for spec in specs}}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
