"""cl/aes_ctr.cl through the public API: RFC 3686 vectors and counter arithmetic.

Counter behaviour is checked against pycryptodome, whose CTR is the model for
the API: carries across 32- and 64-bit word boundaries, wrapping within a short
counter field, and the error when the field is exhausted.
"""

from __future__ import annotations

import os

import pytest
from Crypto.Cipher import AES

import aescl
from vectors import load

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True

CTR_FILES = ["aes-128-ctr.txt", "aes-192-ctr.txt", "aes-256-ctr.txt"]


@pytest.mark.parametrize("filename", CTR_FILES)
def test_rfc3686_ctr_vectors(filename, device, key_schedule):
    vectors = load("ciphers", "AES", "CTR", filename)
    assert len(vectors) >= 3
    for vector in vectors:
        cipher = aescl.new(
            vector.bytes("KEY"), aescl.MODE_CTR, nonce=b"", initial_value=vector.bytes("IV"),
            device=device, key_schedule=key_schedule,
        )
        assert cipher.encrypt(vector.bytes("PLAINTEXT")) == vector.bytes("CIPHERTEXT"), vector.id


def _both(key, nonce, initial_value, device, key_schedule):
    ours = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=initial_value,
                     device=device, key_schedule=key_schedule)
    theirs = AES.new(key, AES.MODE_CTR, nonce=nonce, initial_value=initial_value)
    return ours, theirs


@pytest.mark.parametrize(
    "nonce, initial_value",
    [
        (b"", (1 << 32) - 3),          # carry out of the lowest 32-bit word
        (b"", (1 << 64) - 3),          # carry from the low 64-bit half into the high one
        (b"", (1 << 128) - 3),         # the whole 128-bit block wraps to zero
        (b"\xaa" * 8, (1 << 64) - 3),  # 64-bit field: wraps, nonce untouched
        (b"\x55" * 12, (1 << 32) - 3), # 32-bit field, as GCM-style nonces use
        (b"\x11" * 15, 250),           # 8-bit field
    ],
    ids=["carry-2^32", "carry-2^64", "wrap-2^128", "wrap-64bit-field", "wrap-32bit-field",
         "wrap-8bit-field"],
)
def test_counter_carries_and_wraps_like_pycryptodome(device, key_schedule, nonce, initial_value):
    key = os.urandom(16)
    data = os.urandom(16 * 7 + 5)
    ours, theirs = _both(key, nonce, initial_value, device, key_schedule)
    assert ours.encrypt(data) == theirs.encrypt(data)


def test_exhausting_the_counter_field_raises_before_any_work(device):
    key = os.urandom(16)
    ours, theirs = _both(key, b"\x00" * 15, None, device, "host")
    # 256 blocks fit in an 8-bit field; one byte more would reuse counter 0.
    assert ours.encrypt(bytes(256 * 16 - 1)) == theirs.encrypt(bytes(256 * 16 - 1))
    assert ours.encrypt(b"\x01") == theirs.encrypt(b"\x01")
    with pytest.raises(OverflowError):
        theirs.encrypt(b"\x02")
    with pytest.raises(aescl.CounterOverflowError):
        ours.encrypt(b"\x02")
    assert ours.position == 256 * 16  # nothing was consumed by the failed call


def test_a_too_large_single_call_raises_too(device):
    ours = aescl.new(os.urandom(16), aescl.MODE_CTR, nonce=b"\x00" * 15, device=device)
    with pytest.raises(OverflowError):
        ours.encrypt(bytes(256 * 16 + 1))
    assert ours.position == 0
