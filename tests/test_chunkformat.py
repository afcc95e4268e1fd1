"""aescl/chunkformat.py: what the chunked format is, apart from any engine: derivation,
the commitment check, nonces, offsets and sizes (against tests/chunked_reference.py, a
reading of the C2SP text built only on hashlib and hmac)."""

from __future__ import annotations

import os

import pytest

import chunked_reference as reference
from aescl import chunkformat as fmt
from aescl.errors import CounterOverflowError, TruncatedError, WrongKeyError


@pytest.mark.parametrize("context", [b"", b"my-app v1", bytes(range(256))])
def test_derivation_is_the_texts(context):
    key, salt = os.urandom(32), os.urandom(fmt.SALT_SIZE)
    assert fmt.derive(key, salt, context) == reference.derive(key, salt, context)


def test_the_commitment_check_opens_only_the_right_key_and_context():
    key, salt = os.urandom(32), os.urandom(fmt.SALT_SIZE)
    chunk_key, base_nonce, commitment = fmt.derive(key, salt, b"ctx")
    header = salt + commitment
    assert fmt.open_header(key, header, b"ctx") == (chunk_key, base_nonce)
    with pytest.raises(WrongKeyError):
        fmt.open_header(os.urandom(32), header, b"ctx")
    with pytest.raises(WrongKeyError):
        fmt.open_header(key, header, b"other")
    with pytest.raises(TruncatedError):
        fmt.open_header(key, header[:-1], b"ctx")


def test_chunk_nonces_are_the_base_nonce_xor_the_index():
    base = os.urandom(fmt.NONCE_SIZE)
    for index in (0, 1, 255, 2**32 + 7, fmt.MAX_CHUNKS - 1):
        assert fmt.chunk_nonce(base, index) == reference.nonce_for(base, index)
        assert fmt.chunk_nonce(int.from_bytes(base, "big"), index) == fmt.chunk_nonce(base, index)


def test_the_base_j0_is_chunk_0s_nonce_then_the_counter_1():
    base = bytes(range(1, 13))
    assert fmt.base_j0(base) == fmt.chunk_j0s(base, 0, 1).tobytes()
    assert fmt.base_j0(base) == fmt.chunk_nonce(base, 0) + b"\x00\x00\x00\x01"
    with pytest.raises(ValueError, match="12 bytes"):
        fmt.base_j0(base[:11])


@pytest.mark.parametrize("size", [0, 1, fmt.CHUNK_SIZE - 1, fmt.CHUNK_SIZE, 3 * fmt.CHUNK_SIZE + 5])
def test_sizes_and_offsets_match_a_real_message(size):
    key, salt, message = os.urandom(32), os.urandom(fmt.SALT_SIZE), os.urandom(size)
    sealed = reference.encrypt(key, message, b"", salt)
    assert fmt.sealed_size(size) == len(sealed)
    assert fmt.sealed_size(size, raw=True) == len(sealed) - fmt.HEADER_SIZE
    assert fmt.opened_size(len(sealed) - fmt.HEADER_SIZE) == size
    full = size // fmt.CHUNK_SIZE
    assert fmt.chunk_offset(full) + size % fmt.CHUNK_SIZE + fmt.TAG_SIZE == len(sealed)


def test_runs_refuse_what_only_a_final_chunk_may_be():
    assert fmt.plaintext_run(2 * fmt.CHUNK_SIZE + 3, final=True) == (2, 3)
    with pytest.raises(ValueError, match="only the final chunk"):
        fmt.plaintext_run(fmt.CHUNK_SIZE + 1, final=False)
    assert fmt.sealed_run(fmt.SEALED_CHUNK_SIZE + fmt.TAG_SIZE, 0, final=True) == (1, 16)
    with pytest.raises(TruncatedError, match="chunk 5"):
        fmt.sealed_run(fmt.TAG_SIZE - 1, 5, final=True)
    with pytest.raises(TruncatedError):
        fmt.opened_size(fmt.SEALED_CHUNK_SIZE)  # full chunks only: the final one is gone
    with pytest.raises(CounterOverflowError):
        fmt.check_chunk_range(fmt.MAX_CHUNKS - 1, 2)


@pytest.mark.parametrize("bad", [
    lambda: fmt.derive(os.urandom(31), os.urandom(fmt.SALT_SIZE), b""),
    lambda: fmt.derive(os.urandom(32), os.urandom(fmt.SALT_SIZE - 1), b""),
    lambda: fmt.check_base_nonce(os.urandom(fmt.NONCE_SIZE + 1)),
])
def test_wrong_lengths_are_refused(bad):
    with pytest.raises(ValueError):
        bad()


@pytest.mark.parametrize("given", [32, 24, 12, "x" * 32])
def test_a_key_salt_context_or_nonce_that_is_not_bytes_like_is_refused(given):
    """TypeError naming the argument: ``bytes(5)`` is five zero bytes, so an int context
    was the same context as five zero bytes, and an int key or nonce all zeros."""
    key, salt = os.urandom(32), os.urandom(24)
    for what, call in (("key", lambda: fmt.derive(given, salt, b"")),
                       ("salt", lambda: fmt.derive(key, given, b"")),
                       ("context", lambda: fmt.derive(key, salt, given)),
                       ("key", lambda: fmt.check_key(given)),
                       ("base_nonce", lambda: fmt.check_base_nonce(given))):
        with pytest.raises(TypeError, match=f"^{what} must be bytes-like"):
            call()
