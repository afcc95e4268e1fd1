"""aescl/gcm.py: the GCM cipher object against pycryptodome's.

Random AAD and message lengths, fed in random pieces; nonce lengths other than
96 bits; short tags; the ``output=`` paths; and the rules of the calling
convention, above all that a failed check releases no plaintext.
"""

from __future__ import annotations

import os
import random

import gcm_call_order
import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True


def _pieces(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(len(data) + 1), k=min(3, len(data) + 1)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("size", [16, 24, 32])
def test_random_lengths_and_pieces_match_pycryptodome(device, size):
    rng = random.Random(size)
    for _ in range(25):
        key = os.urandom(size)
        nonce = os.urandom(rng.choice([12, 12, 8, 16, 1, 60]))
        aad = os.urandom(rng.choice([0, 1, 15, 16, 17, 100, 3000]))
        plaintext = os.urandom(rng.choice([0, 1, 15, 16, 17, 255, 1000, 4097, 20000]))
        mac_len = rng.choice([16, 16, 12, 4])
        theirs = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=mac_len)
        theirs.update(aad)
        expected, expected_tag = theirs.encrypt_and_digest(plaintext)

        ours = aescl.new(key, aescl.MODE_GCM, nonce=nonce, mac_len=mac_len, device=device)
        for piece in _pieces(aad, rng):
            ours.update(piece)
        ciphertext = b"".join(ours.encrypt(piece) for piece in _pieces(plaintext, rng))
        assert (ciphertext, ours.digest()) == (expected, expected_tag)

        reader = aescl.new(key, aescl.MODE_GCM, nonce=nonce, mac_len=mac_len, device=device)
        reader.update(aad)
        pieces = _pieces(expected, rng)
        recovered = b"".join(reader.decrypt(piece) for piece in pieces[:-1])
        recovered += reader.decrypt_and_verify(pieces[-1], expected_tag)
        assert recovered == plaintext


def test_wrong_tag_releases_no_plaintext(device):
    key, nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(1000)
    ciphertext, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(plaintext)
    bad_tag = bytes([tag[0] ^ 1]) + tag[1:]
    output = bytearray(b"\xaa" * len(ciphertext))
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    with pytest.raises(aescl.AuthenticationError, match="MAC check failed") as caught:
        cipher.decrypt_and_verify(ciphertext, bad_tag, output=output)
    assert isinstance(caught.value, ValueError)  # as pycryptodome raises
    assert output == b"\xaa" * len(ciphertext)

    # The same after a decrypt() that stopped mid-block.
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    first = cipher.decrypt(ciphertext[:7])
    assert first == plaintext[:7]
    output = bytearray(b"\xaa" * (len(ciphertext) - 7))
    with pytest.raises(aescl.AuthenticationError):
        cipher.decrypt_and_verify(ciphertext[7:], bad_tag, output=output)
    assert output == b"\xaa" * len(output)


def test_flipped_ciphertext_or_aad_fails(device):
    key, nonce = os.urandom(16), os.urandom(12)
    theirs = AES.new(key, AES.MODE_GCM, nonce=nonce)
    theirs.update(b"header")
    ciphertext, tag = theirs.encrypt_and_digest(os.urandom(100))
    flipped = bytearray(ciphertext)
    flipped[50] ^= 4
    for aad, data in [(b"header", bytes(flipped)), (b"headex", ciphertext)]:
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
        cipher.update(aad)
        with pytest.raises(aescl.AuthenticationError):
            cipher.decrypt_and_verify(data, tag)


def test_output_buffers_and_numpy_input(device):
    key, nonce = os.urandom(16), os.urandom(12)
    plaintext = np.frombuffer(os.urandom(4096), dtype=np.uint8)
    expected, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(
        plaintext.tobytes()
    )
    out = np.empty(4096, dtype=np.uint8)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    assert cipher.encrypt_and_digest(plaintext, output=out) == (None, tag)
    assert out.tobytes() == expected
    back = bytearray(4096)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    assert cipher.decrypt_and_verify(expected, tag, output=back) is None
    assert bytes(back) == plaintext.tobytes()


def test_a_tag_that_is_not_bytes_like_is_refused_and_releases_nothing(device):
    """``verify(5)``: a TypeError naming the tag, not a comparison with five zero bytes
    (``bytes(5)``) that fails as "MAC check failed"; decrypt_and_verify writes nothing."""
    key, nonce = os.urandom(16), os.urandom(12)
    ciphertext, _ = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(bytes(100))
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    cipher.decrypt(ciphertext)
    with pytest.raises(TypeError, match="^the MAC tag must be bytes-like"):
        cipher.verify(5)
    output = bytearray(b"\xee" * 100)
    with pytest.raises(TypeError, match="^the MAC tag must be bytes-like"):
        aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).decrypt_and_verify(
            ciphertext, 16, output=output)
    assert output == b"\xee" * 100


@pytest.mark.parametrize("length", [7, 16 * 16, 16 * 40 + 3])
def test_in_place_over_the_input_in_pieces(device, length):
    """``output=`` the input's own memory, in pieces that split blocks, both ways: the
    GHASH reads the ciphertext before the plaintext replaces it (decrypting), and after
    it replaces the plaintext (encrypting)."""
    key, nonce, aad = os.urandom(16), os.urandom(12), os.urandom(20)
    plaintext = os.urandom(length)
    expected, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).update(aad) \
        .encrypt_and_digest(plaintext)
    cuts = [0, 5, max(5, length - 3), length]
    for direction, given, made in (("encrypt", plaintext, expected),
                                   ("decrypt", expected, plaintext)):
        buffer = bytearray(given)
        view = memoryview(buffer)
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(aad)
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            assert getattr(cipher, direction)(view[lo:hi], output=view[lo:hi]) is None
        assert bytes(buffer) == made
        if direction == "encrypt":
            assert cipher.digest() == tag
        else:
            cipher.verify(tag)
    buffer = bytearray(expected)
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(aad)
    assert opener.decrypt_and_verify(buffer, tag, output=buffer) is None
    assert bytes(buffer) == plaintext


def test_calling_convention(device):
    key = os.urandom(16)
    cipher = aescl.new(key, aescl.MODE_GCM, device=device)
    assert len(cipher.nonce) == 16  # random, as long as pycryptodome makes it
    assert aescl.new(key, aescl.MODE_GCM, device=device).nonce != cipher.nonce
    cipher.encrypt(b"abc")
    with pytest.raises(TypeError, match="update"):
        cipher.update(b"late")
    with pytest.raises(TypeError):
        cipher.decrypt(b"abc")
    with pytest.raises(TypeError, match="verify"):
        cipher.verify(bytes(16))
    tag = cipher.digest()
    assert cipher.hexdigest() == tag.hex()
    with pytest.raises(TypeError, match="after digest"):
        cipher.encrypt(b"more")

    decrypting = aescl.new(key, aescl.MODE_GCM, nonce=cipher.nonce, device=device)
    decrypting.decrypt(b"xyz")
    with pytest.raises(TypeError, match="digest"):
        decrypting.digest()

    with pytest.raises(ValueError, match="mac_len"):
        aescl.new(key, aescl.MODE_GCM, mac_len=3, device=device)
    with pytest.raises(ValueError, match="Nonce"):
        aescl.new(key, aescl.MODE_GCM, nonce=b"", device=device)
    with pytest.raises(TypeError):
        aescl.new(key, aescl.MODE_GCM, initial_value=1, device=device)


def test_empty_message_and_aad_only(device):
    key, nonce = os.urandom(24), os.urandom(12)
    for aad in [b"", os.urandom(33)]:
        theirs = AES.new(key, AES.MODE_GCM, nonce=nonce)
        theirs.update(aad)
        ours = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
        ours.update(aad)
        assert ours.digest() == theirs.digest()


def test_every_call_order_is_pycryptodomes_and_a_failed_verify_releases_no_tag(device):
    """Every sequence of up to four calls, outcome by outcome, against pycryptodome. Above
    all ``digest()`` after a failed ``verify``: on the OpenCL stream it returned the valid
    tag of the attacker's ciphertext (a tag oracle)."""
    for sequence in gcm_call_order.sequences(4 if getattr(device, "type", "") == "host" else 3):
        assert gcm_call_order.run(sequence, device) == [], sequence


def test_a_rejected_message_stays_rejected(device):
    cipher = aescl.new(os.urandom(16), aescl.MODE_GCM, nonce=os.urandom(12), device=device)
    with pytest.raises(aescl.AuthenticationError):
        cipher.decrypt_and_verify(os.urandom(40), bytes(16))
    for call in (cipher.digest, lambda: cipher.decrypt(b"x")):
        with pytest.raises(TypeError, match="failed verify"):
            call()
    with pytest.raises(aescl.AuthenticationError):
        cipher.verify(bytes(16))


def test_gcm_cipher_is_the_class_new_returns():
    assert type(aescl.new(bytes(16), aescl.MODE_GCM)) is aescl.GcmCipher
