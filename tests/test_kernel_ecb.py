"""cl/aes_ecb.cl through the public API: NIST CAVP ECB vectors and the reference cipher."""

from __future__ import annotations

import os

import pytest

import aes_reference
import aescl
from vectors import load

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True

ECB_FILES = [
    f"ECB{kind}{bits}.rsp"
    for kind in ("GFSbox", "KeySbox", "VarKey", "VarTxt", "MMT")
    for bits in (128, 192, 256)
]


def test_the_ecb_files_hold_all_2138_vectors():
    assert sum(len(load("ciphers", "AES", "ECB", name)) for name in ECB_FILES) == 2138


@pytest.mark.parametrize("filename", ECB_FILES)
def test_nist_ecb_vectors(filename, device, key_schedule):
    vectors = load("ciphers", "AES", "ECB", filename)
    assert vectors
    failures = []
    for vector in vectors:
        key = vector.bytes("KEY")
        cipher = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
        plaintext, ciphertext = vector.bytes("PLAINTEXT"), vector.bytes("CIPHERTEXT")
        if vector.section == "ENCRYPT":
            got, want = cipher.encrypt(plaintext), ciphertext
        else:
            got, want = cipher.decrypt(ciphertext), plaintext
        if got != want:
            failures.append(vector.id)
    assert not failures, f"{len(failures)} of {len(vectors)} failed, first: {failures[:5]}"


@pytest.mark.parametrize("size", [16, 24, 32])
def test_ecb_matches_the_fips197_reference(device, key_schedule, size):
    key = os.urandom(size)
    blocks = [os.urandom(16) for _ in range(5)]
    cipher = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
    ciphertext = cipher.encrypt(b"".join(blocks))
    assert ciphertext == b"".join(aes_reference.encrypt_block(key, b) for b in blocks)
    assert cipher.decrypt(ciphertext) == b"".join(blocks)
    assert aes_reference.decrypt_block(key, ciphertext[:16]) == blocks[0]
