"""aescl/keyschedule.py: FIPS-197 key expansion on the host, and the table header."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import aes_reference
from aescl import keyschedule

# FIPS-197 Appendix A.1: expansion of 2b7e1516 28aed2a6 abf71588 09cf4f3c, all 44 words.
FIPS_A1_WORDS = """
2b7e1516 28aed2a6 abf71588 09cf4f3c a0fafe17 88542cb1 23a33939 2a6c7605
f2c295f2 7a96b943 5935807a 7359f67f 3d80477d 4716fe3e 1e237e44 6d7a883b
ef44a541 a8525b7f b671253b db0bad00 d4d1c6f8 7c839d87 caf2b8bc 11f915bc
6d88a37a 110b3efd dbf98641 ca0093fd 4e54f70e 5f5fc9f3 84a64fb2 4ea6dc4f
ead27321 b58dbad2 312bf560 7f8d292f ac7766f3 19fadc21 28d12941 575c006e
d014f9a8 c9ee2589 e13f0cc8 b6630ca6
""".split()

# Appendix A.2 and A.3: the key, then words of the expansion by index.
FIPS_A2_KEY = "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b"
FIPS_A2_WORDS = {6: "fe0c91f7", 7: "2402f5a5", 8: "ec12068e", 51: "01002202"}
FIPS_A3_KEY = "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"
FIPS_A3_WORDS = {8: "9ba35411", 9: "8e6925af", 10: "a51a8b5f", 59: "706c631e"}


def _hex_words(key: bytes) -> list[str]:
    return [f"{w:08x}" for w in keyschedule.expand_key(key)]


def test_fips197_a1_expansion_word_by_word():
    assert _hex_words(bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")) == FIPS_A1_WORDS


@pytest.mark.parametrize(
    "key_hex, published", [(FIPS_A2_KEY, FIPS_A2_WORDS), (FIPS_A3_KEY, FIPS_A3_WORDS)],
    ids=["A.2-192", "A.3-256"],
)
def test_fips197_a2_a3_expansion(key_hex, published):
    key = bytes.fromhex(key_hex)
    words = _hex_words(key)
    assert len(words) == 4 * (keyschedule.rounds_for_key(key) + 1)
    for index, word in published.items():
        assert words[index] == word, f"w[{index}]"
    # Every other word, against the independent reference.
    assert words == [w.hex() for w in aes_reference.key_expansion(key)]


@pytest.mark.parametrize("size", keyschedule.KEY_SIZES)
def test_expansion_matches_reference_for_random_keys(size):
    for _ in range(20):
        key = os.urandom(size)
        assert _hex_words(key) == [w.hex() for w in aes_reference.key_expansion(key)]


def test_sbox_is_the_fips197_sbox():
    assert list(keyschedule.SBOX) == aes_reference.SBOX
    assert list(keyschedule.INV_SBOX) == aes_reference.INV_SBOX


@pytest.mark.parametrize("size", keyschedule.KEY_SIZES)
def test_kernel_layout_is_bytes_in_memory_order(size):
    # The kernels read key words as little-endian columns: the round keys'
    # bytes in memory must be the FIPS words' bytes in order.
    key = os.urandom(size)
    as_bytes = keyschedule.encryption_round_keys(key).astype("<u4").tobytes()
    assert as_bytes == b"".join(aes_reference.key_expansion(key))


@pytest.mark.parametrize("size", keyschedule.KEY_SIZES)
def test_a_kernels_key_argument_is_its_round_keys_in_memory_order_then_zeros(size):
    # Packed from the FIPS words straight (no numpy byte swap, measured faster before a
    # chunked call's first launch): every schedule and direction, against the reference.
    key = os.urandom(size)
    room = 4 * keyschedule.KEY_ARGUMENT_WORDS
    expected = {
        ("host", False): b"".join(aes_reference.key_expansion(key)),
        ("host", True): keyschedule.decryption_round_keys(key).astype("<u4").tobytes(),
        ("device", False): key, ("device", True): key}
    for (schedule, decrypt), material in expected.items():
        argument = keyschedule.kernel_key_bytes(key, schedule, decrypt)
        assert argument == material + bytes(room - len(material)), (schedule, decrypt)
        words = keyschedule.kernel_key_argument(key, schedule, decrypt)
        assert words.dtype == np.dtype("<u4") and words.tobytes() == argument


@pytest.mark.parametrize("size", keyschedule.KEY_SIZES)
def test_decryption_keys_are_the_equivalent_inverse_cipher_schedule(size):
    key = os.urandom(size)
    enc = keyschedule.encryption_round_keys(key).reshape(-1, 4)
    dec = keyschedule.decryption_round_keys(key).reshape(-1, 4)
    rounds = keyschedule.rounds_for_key(key)
    assert np.array_equal(dec[0], enc[rounds]) and np.array_equal(dec[rounds], enc[0])
    for r in range(1, rounds):
        round_bytes = enc[rounds - r].astype("<u4").tobytes()
        state = [[round_bytes[row + 4 * c] for c in range(4)] for row in range(4)]
        aes_reference._mix(state, (14, 11, 13, 9))
        expected = bytes(state[row][c] for c in range(4) for row in range(4))
        assert dec[r].astype("<u4").tobytes() == expected, f"round {r}"


@pytest.mark.parametrize("length", [0, 15, 17, 31, 33, 64])
def test_bad_key_length_is_rejected_in_pycryptodome_words(length):
    with pytest.raises(ValueError, match=rf"Incorrect AES key length \({length} bytes\)"):
        keyschedule.rounds_for_key(bytes(length))


def test_committed_table_header_matches_its_generator(monkeypatch):
    root = Path(__file__).resolve().parent.parent
    if not (root / "tools" / "gen_aes_tables.py").is_file() \
            or not (root / "cl" / "aes_tables.h").is_file():  # (tests/ copied alone)
        pytest.skip("the source tree (tools/, cl/) is not beside tests/ here")
    monkeypatch.setattr(sys, "path", list(sys.path))  # (the generator puts the tree first)
    spec = importlib.util.spec_from_file_location("gen", root / "tools" / "gen_aes_tables.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert (root / "cl" / "aes_tables.h").read_text() == generator.render()
