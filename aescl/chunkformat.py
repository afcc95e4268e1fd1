"""What the chunked message format is, apart from who seals the chunks (pure functions).

C2SP chunked-encryption v1 with ``AEAD_AES_256_GCM`` (https://c2sp.org/chunked-encryption):

* ``key(32) || base_nonce(12) || commitment(32) = HKDF-Expand-SHA-512(prk=input key,
  info="c2sp.org/chunked-encryption@v1+" || "AEAD_AES_256_GCM" || 0x00 || salt(24)
  || context, L=76)``;
* ciphertext = salt || commitment || the sealed chunks;
* the plaintext splits into 16384-byte chunks and a final chunk that is always
  shorter (possibly empty); chunk ``k`` is AES-256-GCM with empty AAD under
  ``base_nonce XOR k`` (big-endian, 12 bytes) and sits at ciphertext offset
  ``56 + k * 16400``.

Every engine (OpenCL, host), the scheduler that splits a message between them and
a worker on another machine use these same few functions, so that a message
sealed in pieces anywhere is byte-identical to one sealed in one place. Nothing
here imports numpy or OpenCL at import time (chunk_j0s, for the GCM kernels, imports
numpy when called).
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from .errors import CounterOverflowError, TruncatedError, WrongKeyError, as_bytes

KEY_SIZE = 32
SALT_SIZE = 24
COMMITMENT_SIZE = 32
HEADER_SIZE = SALT_SIZE + COMMITMENT_SIZE  # 56
NONCE_SIZE = 12
TAG_SIZE = 16
CHUNK_SIZE = 16384
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE  # 16400
MAX_CHUNKS = 2**38

INFO_PREFIX = b"c2sp.org/chunked-encryption@v1+"
AEAD_NAME = b"AEAD_AES_256_GCM"


def hkdf_expand_sha512(prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand (RFC 5869, section 2.3) with HMAC-SHA-512, from ``cryptography``."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    return HKDFExpand(hashes.SHA512(), length, info).derive(prk)


def check_key(key: bytes) -> None:
    if len(as_bytes(key, "key")) != KEY_SIZE:
        raise ValueError(f"the chunked format takes a {KEY_SIZE}-byte key, not {len(key)} bytes")


def check_base_nonce(base_nonce: bytes) -> None:
    if len(as_bytes(base_nonce, "base_nonce")) != NONCE_SIZE:
        raise ValueError(f"the base nonce must be {NONCE_SIZE} bytes, not {len(base_nonce)}")


def derive(key: bytes, salt: bytes, context: bytes) -> tuple[bytes, bytes, bytes]:
    """(chunk key, base nonce, commitment) for one message."""
    check_key(key)
    salt, context = as_bytes(salt, "salt"), as_bytes(context, "context")
    if len(salt) != SALT_SIZE:
        raise ValueError(f"the salt must be {SALT_SIZE} bytes, not {len(salt)}")
    info = INFO_PREFIX + AEAD_NAME + b"\x00" + salt + context
    material = hkdf_expand_sha512(bytes(key), info, KEY_SIZE + NONCE_SIZE + COMMITMENT_SIZE)
    return (
        material[:KEY_SIZE],
        material[KEY_SIZE : KEY_SIZE + NONCE_SIZE],
        material[KEY_SIZE + NONCE_SIZE :],
    )


def random_salt(salt: bytes | None = None) -> bytes:
    """A fresh salt from ``os.urandom``; ``salt=`` exists for tests and test vectors only:
    a salt must never repeat for a key."""
    return os.urandom(SALT_SIZE) if salt is None else bytes(salt)


def open_header(key: bytes, header: bytes, context: bytes) -> tuple[bytes, bytes]:
    """Check the commitment in a message's first 56 bytes; returns (chunk key, base nonce)."""
    if len(header) < HEADER_SIZE:
        raise TruncatedError("truncated: the input is shorter than the 56-byte salt and commitment")
    chunk_key, base_nonce, commitment = derive(key, header[:SALT_SIZE], context)
    if not hmac.compare_digest(commitment, header[SALT_SIZE:HEADER_SIZE]):
        raise WrongKeyError("wrong key or context: the key commitment does not match")
    return chunk_key, base_nonce


def check_chunk_range(first: int, count: int) -> None:
    if first + count > MAX_CHUNKS:
        raise CounterOverflowError("the message exceeds 2^38 chunks (4 PiB)")


def chunk_nonce(base_nonce: bytes | int, index: int) -> bytes:
    """The GCM nonce of chunk ``index``: the base nonce XOR the big-endian index. A caller
    that makes a nonce per chunk passes the base nonce once converted to an int."""
    base = base_nonce if isinstance(base_nonce, int) else int.from_bytes(base_nonce, "big")
    return (base ^ index).to_bytes(NONCE_SIZE, "big")


def base_j0(base_nonce: bytes) -> bytes:
    """J0 of chunk 0 (the base nonce, then the 32-bit counter 1), from which the device
    makes every chunk's (cl/chunk_j0.h): 16 bytes in memory order."""
    check_base_nonce(base_nonce)
    return bytes(base_nonce) + (1).to_bytes(4, "big")


def chunk_j0s(base_nonce: bytes, first: int, count: int) -> Any:
    """J0 of chunks ``first .. first + count - 1`` (each chunk's nonce, then the 32-bit
    counter 1) as a (count, 16) uint8 numpy array: the GCM kernels' batch argument."""
    import numpy as np

    check_chunk_range(first, count)
    j0s = np.zeros((count, 16), dtype=np.uint8)
    j0s[:, :NONCE_SIZE] = np.frombuffer(base_nonce, np.uint8)
    indices = np.arange(first, first + count, dtype=">u8").view(np.uint8).reshape(count, 8)
    j0s[:, 4:NONCE_SIZE] ^= indices  # the index, big-endian, in the nonce's last 8 bytes
    j0s[:, 15] = 1
    return j0s


def chunk_offset(index: int, raw: bool = False) -> int:
    """Where sealed chunk ``index`` starts in the ciphertext."""
    return (0 if raw else HEADER_SIZE) + index * SEALED_CHUNK_SIZE


def sealed_size(message_bytes: int, raw: bool = False) -> int:
    """The ciphertext length of a message of ``message_bytes`` bytes."""
    return chunk_offset(message_bytes // CHUNK_SIZE, raw) + message_bytes % CHUNK_SIZE + TAG_SIZE


def opened_size(body_bytes: int) -> int:
    """The plaintext size of a body (the sealed chunks), or TruncatedError when it cannot
    end in a final chunk."""
    full, rest = divmod(body_bytes, SEALED_CHUNK_SIZE)
    if rest == 0:  # nothing, or only full chunks: no final chunk
        raise TruncatedError("truncated: the final chunk is missing")
    if rest < TAG_SIZE:
        raise TruncatedError(f"truncated: chunk {full} is cut short")
    return full * CHUNK_SIZE + rest - TAG_SIZE


def plaintext_run(nbytes: int, final: bool) -> tuple[int, int]:
    """(full chunks, bytes of the final chunk) of ``nbytes`` of plaintext sealed as one
    run from some chunk on; only a run with ``final`` may end in a shorter chunk."""
    full, rest = divmod(nbytes, CHUNK_SIZE)
    if rest and not final:
        raise ValueError("only the final chunk may be shorter than 16384 bytes")
    return full, rest


def sealed_run(nbytes: int, first: int, final: bool) -> tuple[int, int]:
    """(full sealed chunks, bytes of the final sealed chunk, tag included) of a run of
    ``nbytes`` of ciphertext from chunk ``first`` on."""
    full, rest = divmod(nbytes, SEALED_CHUNK_SIZE)
    if final and rest < TAG_SIZE:
        raise TruncatedError(f"truncated: chunk {first + full} is cut short")
    if rest and not final:
        raise ValueError("only the final sealed chunk may be shorter than 16400 bytes")
    return full, rest
