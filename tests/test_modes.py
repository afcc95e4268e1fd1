"""aescl/modes.py: the public cipher objects against pycryptodome.

Random keys and lengths, streaming in odd-sized pieces, seeks, the ``output=``
paths, input types, slicing of large inputs, and the refusals.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True

KEY_SIZES = [16, 24, 32]
# Every length up to 70, then lengths around block and work-group multiples.
LENGTHS = list(range(0, 71)) + [255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097]


@pytest.mark.parametrize("size", KEY_SIZES)
def test_ctr_matches_pycryptodome_for_random_lengths(device, key_schedule, size):
    key = os.urandom(size)
    nonce = os.urandom(8)
    for length in LENGTHS:
        data = os.urandom(length)
        ours = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device,
                         key_schedule=key_schedule)
        assert ours.encrypt(data) == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data), length


@pytest.mark.parametrize("size", KEY_SIZES)
def test_ecb_matches_pycryptodome_for_random_lengths(device, key_schedule, size):
    key = os.urandom(size)
    ours = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
    theirs = AES.new(key, AES.MODE_ECB)
    for blocks in [0, 1, 2, 3, 15, 16, 17, 63, 64, 65, 255, 257]:
        data = os.urandom(16 * blocks)
        assert ours.encrypt(data) == theirs.encrypt(data), blocks
        assert ours.decrypt(data) == theirs.decrypt(data), blocks


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ecb", "ctr"])
def test_a_few_mib(device, key_schedule, mode):
    key = os.urandom(32)
    data = os.urandom(3 * 2**20 + 16 * 37)
    if mode == "ecb":
        ours = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
        assert ours.encrypt(data) == AES.new(key, AES.MODE_ECB).encrypt(data)
        assert ours.decrypt(data) == AES.new(key, AES.MODE_ECB).decrypt(data)
    else:
        iv = os.urandom(16)
        ours = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device=device,
                         key_schedule=key_schedule)
        theirs = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv)
        assert ours.encrypt(data) == theirs.encrypt(data)


def test_ctr_streams_in_odd_pieces(device):
    key, nonce = os.urandom(24), os.urandom(4)
    data = os.urandom(5000)
    ours = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device)
    rng = random.Random(1)
    pieces, at = [], 0
    while at < len(data):
        step = rng.choice([0, 1, 3, 15, 16, 17, 31, 100, 333])
        pieces.append(ours.encrypt(data[at : at + step]))
        at += step
    assert b"".join(pieces) == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data)


def test_ctr_seek_gives_random_access(device, key_schedule):
    key, nonce = os.urandom(16), os.urandom(8)
    plaintext = os.urandom(3000)
    ciphertext = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(plaintext)
    reader = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device,
                       key_schedule=key_schedule)
    for start, stop in [(1000, 1040), (0, 5), (17, 18), (2999, 3000), (5, 2000), (33, 33)]:
        reader.seek(start)
        assert reader.decrypt(ciphertext[start:stop]) == plaintext[start:stop], (start, stop)
        assert reader.position == stop


def test_ctr_refuses_to_reuse_keystream_for_encryption(device):
    cipher = aescl.new(os.urandom(16), aescl.MODE_CTR, nonce=os.urandom(8), device=device)
    cipher.encrypt(bytes(100))
    cipher.seek(50)
    with pytest.raises(aescl.KeystreamReuseError):
        cipher.encrypt(b"x")
    cipher.seek(100)
    cipher.encrypt(b"x")  # continuing at the end is fine
    cipher.seek(1000)
    cipher.encrypt(b"x")  # skipping ahead is fine


def test_ctr_is_one_direction_like_pycryptodome(device):
    cipher = aescl.new(os.urandom(16), aescl.MODE_CTR, device=device)
    cipher.encrypt(b"abc")
    with pytest.raises(TypeError):
        cipher.decrypt(b"abc")


def test_ctr_default_nonce_is_random_and_exposed(device):
    key = os.urandom(16)
    first = aescl.new(key, aescl.MODE_CTR, device=device)
    second = aescl.new(key, aescl.MODE_CTR, device=device)
    assert len(first.nonce) == 8 and first.nonce != second.nonce
    data = os.urandom(100)
    assert first.encrypt(data) == AES.new(key, AES.MODE_CTR, nonce=first.nonce).encrypt(data)


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "ndarray"])
def test_output_is_written_in_place(device, kind):
    key, nonce = os.urandom(16), os.urandom(8)
    data = os.urandom(16 * 40 + 3)
    backing = bytearray(len(data)) if kind != "ndarray" else np.zeros(len(data), np.uint8)
    output = memoryview(backing) if kind == "memoryview" else backing
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device)
    assert cipher.encrypt(data, output=output) is None
    assert bytes(backing) == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data)


def test_encrypting_in_place_over_the_input(device):
    key = os.urandom(16)
    buffer = bytearray(os.urandom(16 * 9))
    expected = AES.new(key, AES.MODE_ECB).encrypt(bytes(buffer))
    aescl.new(key, aescl.MODE_ECB, device=device).encrypt(buffer, output=buffer)
    assert bytes(buffer) == expected


def test_inputs_may_be_any_contiguous_buffer(device):
    key = os.urandom(16)
    data = os.urandom(64)
    cipher = aescl.new(key, aescl.MODE_ECB, device=device)
    expected = AES.new(key, AES.MODE_ECB).encrypt(data)
    as_words = np.frombuffer(data, dtype=np.uint32).reshape(4, 4)
    for value in [data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8), as_words]:
        assert cipher.encrypt(value) == expected
    with pytest.raises(ValueError, match="contiguous"):
        cipher.encrypt(np.frombuffer(data * 2, np.uint8)[::2])


def test_output_of_the_wrong_length_or_kind_is_refused(device):
    cipher = aescl.new(os.urandom(16), aescl.MODE_ECB, device=device)
    with pytest.raises(ValueError, match="32 bytes"):
        cipher.encrypt(bytes(32), output=bytearray(16))
    with pytest.raises(TypeError):
        cipher.encrypt(bytes(32), output=bytes(32))


def test_ecb_refuses_partial_blocks(device):
    cipher = aescl.new(os.urandom(16), aescl.MODE_ECB, device=device)
    with pytest.raises(ValueError, match="aligned to block boundary"):
        cipher.encrypt(bytes(17))


@pytest.mark.parametrize("kwargs", [{"nonce": b"12345678"}, {"initial_value": 1}])
def test_ecb_takes_no_counter_parameters(device, kwargs):
    with pytest.raises(TypeError):
        aescl.new(os.urandom(16), aescl.MODE_ECB, device=device, **kwargs)


def test_bad_parameters_are_refused_like_pycryptodome(device):
    with pytest.raises(ValueError, match="Incorrect AES key length"):
        aescl.new(bytes(20), aescl.MODE_CTR, device=device)
    with pytest.raises(ValueError, match="Nonce is too long"):
        aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(16), device=device)
    with pytest.raises(ValueError, match="Incorrect length for counter"):
        aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8), initial_value=bytes(16),
                  device=device)
    with pytest.raises(ValueError, match="must not be negative"):
        aescl.new(bytes(16), aescl.MODE_CTR, nonce=b"", initial_value=-1, device=device)
    with pytest.raises(ValueError, match="key_schedule"):
        aescl.new(bytes(16), aescl.MODE_ECB, device=device, key_schedule="gpu")
    with pytest.raises(ValueError, match="unsupported mode"):
        aescl.new(bytes(16), 99, device=device)



@pytest.mark.parametrize("given", [16, 12, "0123456789abcdef", [0] * 16])
def test_a_key_nonce_or_counter_that_is_not_bytes_like_is_refused(given):
    """An int, a str or a list as the key, a nonce or a counter string: TypeError naming
    it (pycryptodome refuses such a key too). ``bytes(16)`` is 16 zero bytes: an int key
    was an all-zero key, and an int nonce an all-zero nonce, the same in every call."""
    key = os.urandom(16)
    calls = {
        "key": lambda: aescl.new(given, aescl.MODE_ECB),
        "nonce": lambda: aescl.new(key, aescl.MODE_CTR, nonce=given),
        "initial_value": lambda: aescl.new(key, aescl.MODE_CTR, nonce=b"",
                                           initial_value=str(given)),
    }
    for what, call in [*calls.items(), ("nonce", lambda: aescl.new(key, aescl.MODE_GCM, given)),
                       ("nonce", lambda: aescl.new(key, aescl.MODE_GCM, nonce=given))]:
        with pytest.raises(TypeError, match=f"^{what} must be bytes-like"):
            call()
    with pytest.raises(TypeError):  # (pycryptodome: "cannot be passed to C code")
        AES.new(given, AES.MODE_ECB)


def test_every_selected_device_gives_identical_output():
    from conftest import an_opencl_device, selected_devices

    an_opencl_device()  # (skips where there is none)
    key, iv = os.urandom(32), os.urandom(16)
    data = os.urandom(16 * 4099 + 9)
    outputs = {
        d.id: aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device=d).encrypt(data)
        for d in selected_devices()
    }
    assert len(set(outputs.values())) == 1, sorted(outputs)


@pytest.mark.parametrize("offset, error", [(-1, ValueError), (1.5, TypeError),
                                           (None, TypeError)])
def test_seek_checks_its_offset(offset, error):
    cipher = aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8), device="host")
    with pytest.raises(error, match="offset"):
        cipher.seek(offset)


@pytest.mark.parametrize("nbytes, error", [(-1, ValueError), (1.5, TypeError)])
def test_pinned_empty_checks_its_size(nbytes, error):
    with pytest.raises(error, match="nbytes"):
        aescl.pinned_empty(nbytes, "host")


@pytest.mark.parametrize("shift", [-17, -16, -1, 1, 16, 40])
@pytest.mark.parametrize("mode", ["ecb", "ctr", "gcm"])
def test_an_output_that_partly_overlaps_the_input_is_refused(device, mode, shift):
    """It was taken, and the bytes came out wrong, differently by device and run. Exactly
    in place stays allowed (test_encrypting_in_place_over_the_input)."""
    key, nonce = bytes(range(16)), bytes(12)
    memory = bytearray(os.urandom(4096 + 80))
    view = memoryview(memory)
    source, output = view[40 : 40 + 4096], view[40 + shift : 40 + shift + 4096]
    before = bytes(memory)
    cipher = {"ecb": lambda: aescl.new(key, aescl.MODE_ECB, device=device),
              "ctr": lambda: aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8], device=device),
              "gcm": lambda: aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)}[mode]
    for call in ("encrypt", "decrypt"):
        with pytest.raises(ValueError, match="partly overlaps"):
            getattr(cipher(), call)(source, output=output)
    if mode == "gcm":
        with pytest.raises(ValueError, match="partly overlaps"):
            cipher().decrypt_and_verify(source, bytes(16), output=output)
    assert bytes(memory) == before


def test_a_ctr_encrypt_that_failed_partway_spends_its_keystream(device, monkeypatch):
    """A CTR encrypt that raised after part of its work used to leave the keystream free,
    so a retry encrypted other text under it."""
    cipher = aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8), device=device)
    real_run = cipher._job.run

    def fails_halfway(source, target, first_block=0):
        real_run(source[:64], target[:64], first_block)
        raise OSError("the device went away")

    monkeypatch.setattr(cipher._job, "run", fails_halfway)
    with pytest.raises(OSError):
        cipher.encrypt(bytes(4096))
    monkeypatch.undo()
    with pytest.raises(aescl.KeystreamReuseError):
        cipher.encrypt(bytes(4096))
    cipher.seek(4096)
    assert len(cipher.encrypt(bytes(32))) == 32


@pytest.mark.parametrize("size", [96, (2 << 20) + 16])
@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy"])
def test_a_plain_call_returns_new_bytes_for_every_kind_of_input(device, kind, size):
    """ECB and CTR, bytes in and bytes out: pycryptodome's type and bytes, and a new
    object apart from the input (the result is written in place, BytesResult)."""
    key, nonce, message = os.urandom(16), os.urandom(8), os.urandom(size)
    given = {"bytes": message, "bytearray": bytearray(message),
             "memoryview": memoryview(bytearray(message)),
             "numpy": np.frombuffer(message, np.uint8).copy()}[kind]
    ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(given)
    ecb = aescl.new(key, aescl.MODE_ECB, device=device).encrypt(given)
    assert type(ctr) is bytes and type(ecb) is bytes
    assert ctr == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(message)
    assert ecb == AES.new(key, AES.MODE_ECB).encrypt(message)
    assert bytes(given) == message  # (the input is not written)
    # A stream continued inside a block, in results of a megabyte and more: every byte of
    # each is written (a result written in place starts with whatever memory held).
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device)
    odd = (1 << 20) + 5
    joined = cipher.encrypt(message[:3]) + cipher.encrypt(given[3 : 3 + odd])
    assert joined == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(message[: 3 + odd])

