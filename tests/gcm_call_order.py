"""pycryptodome's GCM call order as a differential check: every sequence of calls (up to
a length) on an aescl GCM object against the same sequence on pycryptodome's, the
outcome of each call compared (its value, or the kind of error it raised). Used by
test_gcm (host data, every engine) and by the device-array tests (``to_text`` and
``to_bytes`` move the text there and back).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from Crypto.Cipher import AES

import aescl

CALLS = ("update", "encrypt", "decrypt", "digest", "verify_good", "verify_bad")
KEY, NONCE = bytes(range(16)), bytes(range(12))


def sequences(longest: int) -> Iterator[tuple[str, ...]]:
    for length in range(1, longest + 1):
        yield from itertools.product(CALLS, repeat=length)


def _good_tag(aad: list[bytes], ciphertext: bytes) -> bytes:
    """The tag of ``ciphertext`` after ``aad`` (what a decryption must verify)."""
    cipher = AES.new(KEY, AES.MODE_GCM, nonce=NONCE)
    for data in aad:
        cipher.update(data)
    # (CTR from inc32(J0) = NONCE || 2, for a 96-bit nonce)
    cipher.encrypt(AES.new(KEY, AES.MODE_CTR, nonce=NONCE, initial_value=2).decrypt(ciphertext))
    return cipher.digest()


def _outcome(cipher: Any, name: str, piece: bytes, tag: bytes,
             to_text: Callable[[bytes], Any], to_bytes: Callable[[Any], bytes]
             ) -> tuple[str, bytes | None]:
    """("ok", the bytes returned or None), or the kind of error the call raised."""
    try:
        if name == "update":
            cipher.update(piece)  # (returns the object itself)
            return "ok", None
        if name == "digest":
            return "ok", cipher.digest()
        if name.startswith("verify"):
            cipher.verify(tag)
            return "ok", None
        return "ok", to_bytes(getattr(cipher, name)(to_text(piece)))
    except ValueError:  # (AuthenticationError is a ValueError, as pycryptodome's is)
        return "ValueError", None
    except TypeError:
        return "TypeError", None


def run(sequence: tuple[str, ...], device: Any, to_text: Callable[[bytes], Any] = bytes,
        to_bytes: Callable[[Any], bytes] = bytes) -> list[tuple[str, Any, Any]]:
    """The calls of ``sequence`` on both, and the pairs of outcomes that differ. aescl
    differs from pycryptodome on purpose in one way: after a failed verify, every later
    verify fails too (pycryptodome checks a good tag again)."""
    theirs = AES.new(KEY, AES.MODE_GCM, nonce=NONCE)
    ours = aescl.new(KEY, aescl.MODE_GCM, nonce=NONCE, device=device)
    aad: list[bytes] = []
    texts: list[bytes] = []  # the ciphertext so far
    differ = []
    rejected = False
    for index, name in enumerate(sequence):
        piece = bytes([index]) * (5 + 16 * index)  # pieces that end mid-block
        tag = _good_tag(aad, b"".join(texts))
        if name == "verify_bad":
            tag = bytes([tag[0] ^ 1]) + tag[1:]
        expected = _outcome(theirs, name, piece, tag, bytes, bytes)
        got = _outcome(ours, name, piece, tag, to_text, to_bytes)
        if rejected and name.startswith("verify"):
            expected = ("ValueError", None)  # aescl's rule: a rejected message stays so
        rejected = rejected or (name.startswith("verify") and expected[0] == "ValueError")
        if expected[0] == "ok" and name == "update":
            aad.append(piece)
        if expected[0] == "ok" and name in ("encrypt", "decrypt"):
            texts.append(expected[1] if name == "encrypt" else piece)  # type: ignore[arg-type]
        if expected != got:
            differ.append((name, expected, got))
    return differ
