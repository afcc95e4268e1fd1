"""cl/aes_gcm.cl and cl/ghash.cl: every NIST GCM vector, and the batch kernels.

The CAVP files in ``cryptography-vectors`` cover 96-bit and other nonce
lengths, empty and non-block-aligned AAD and text, and tag lengths from 32 to
128 bits; the decryption files include the cases that must FAIL. All of them
run on every selected device. The batch path (many messages per launch, tags
on the device) is compared with pycryptodome message by message.
"""

from __future__ import annotations

import os

import numpy as np
import pyopencl as cl
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import ghash
from aescl.engines.opencl.gcm import GcmCipher, GcmEngine
from vectors import load

SIZES = ["128", "192", "256"]
VECTORS_PER_FILE = 7875


def _gcm(vector, device, key_schedule):
    cipher = aescl.new(
        vector.bytes("KEY"), aescl.MODE_GCM, nonce=vector.bytes("IV"),
        mac_len=len(vector.bytes("TAG")), device=device, key_schedule=key_schedule,
    )
    cipher.update(vector.bytes("AAD"))
    return cipher


def _sample(vectors, key_schedule):
    # The full files run with host round keys; device key expansion (the same
    # AES core, checked by the ECB and CTR vectors) runs on every 16th vector.
    return vectors if key_schedule == "host" else vectors[::16]


@pytest.mark.parametrize("size", SIZES)
def test_nist_gcm_encrypt_vectors(size, device, key_schedule):
    vectors = load("ciphers", "AES", "GCM", f"gcmEncryptExtIV{size}.rsp")
    assert len(vectors) == VECTORS_PER_FILE
    for vector in _sample(vectors, key_schedule):
        ciphertext, tag = _gcm(vector, device, key_schedule).encrypt_and_digest(
            vector.bytes("PT")
        )
        assert (ciphertext, tag) == (vector.bytes("CT"), vector.bytes("TAG")), vector.id


@pytest.mark.parametrize("size", SIZES)
def test_nist_gcm_decrypt_vectors_including_every_fail_case(size, device, key_schedule):
    vectors = load("ciphers", "AES", "GCM", f"gcmDecrypt{size}.rsp")
    assert len(vectors) == VECTORS_PER_FILE
    failures = 0
    for vector in _sample(vectors, key_schedule):
        cipher = _gcm(vector, device, key_schedule)
        if "FAIL" in vector.fields:
            failures += 1
            with pytest.raises(aescl.AuthenticationError, match="MAC check failed"):
                cipher.decrypt_and_verify(vector.bytes("CT"), vector.bytes("TAG"))
        else:
            plaintext = cipher.decrypt_and_verify(vector.bytes("CT"), vector.bytes("TAG"))
            assert plaintext == vector.bytes("PT"), vector.id
    assert failures > len(_sample(vectors, key_schedule)) // 3  # the FAIL cases were all seen


def test_a_gcm_cipher_makes_h_its_tag_mask_and_split_blocks_on_the_host(device, monkeypatch):
    """H, E(J0) and the keystream of a block that calls end or begin inside are one AES
    block each, made on the host (OpenSSL): a message of less than a block, with AAD
    of less than one, encrypts and decrypts with no launch on the device, byte-identical
    to pycryptodome, for 96-bit nonces and others (J0 by GHASH)."""
    launched: list[str] = []
    launch = cl.enqueue_nd_range_kernel

    def recorded(queue, kernel, *args, **kwargs):
        launched.append(kernel.function_name)
        return launch(queue, kernel, *args, **kwargs)

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", recorded)
    for key, nonce in ((os.urandom(16), os.urandom(12)), (os.urandom(32), os.urandom(7))):
        expected = AES.new(key, AES.MODE_GCM, nonce=nonce).update(b"aad") \
            .encrypt_and_digest(b"fifteen bytes..")
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(b"aad")
        first = cipher.encrypt(b"fifteen")  # (the rest of the block in a second call)
        assert (first + cipher.encrypt(b" bytes.."), cipher.digest()) == expected
        opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(b"aad")
        assert opened.decrypt_and_verify(*expected) == b"fifteen bytes.."
    assert launched == []


def _slots(messages: list[bytes], slot_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    slots = np.zeros((len(messages), slot_bytes), dtype=np.uint8)
    for row, message in zip(slots, messages, strict=True):
        row[: len(message)] = np.frombuffer(message, np.uint8)
    return slots, np.array([len(m) for m in messages], dtype=np.uint64)


@pytest.mark.parametrize("last_length", [0, 1, 15, 16, 17, 1000, 1024])
def test_batch_of_messages_matches_pycryptodome(device, last_length):
    key = os.urandom(32)
    slot_bytes = 1024
    messages = [os.urandom(slot_bytes) for _ in range(6)] + [os.urandom(last_length)]
    nonces = [os.urandom(12) for _ in messages]
    engine = GcmEngine(key, device, "host")
    slots, lengths = _slots(messages, slot_bytes)
    j0s = np.frombuffer(b"".join(n + b"\0\0\0\1" for n in nonces), np.uint8).reshape(-1, 16)
    tags = engine.seal_messages(slots, lengths, j0s)
    for index, (message, nonce) in enumerate(zip(messages, nonces, strict=True)):
        expected, expected_tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(
            message
        )
        assert slots[index, : len(message)].tobytes() == expected, index
        assert tags[index].tobytes() == expected_tag, index
        assert not slots[index, len(message) :].any()  # padding stays zero for GHASH

    sealed = slots.copy()
    assert engine.open_messages(slots, lengths, j0s, tags) is None
    for index, message in enumerate(messages):
        assert slots[index, : len(message)].tobytes() == message

    # One flipped bit in message 3: reported, and nothing of the batch decrypted.
    sealed[3, 5] ^= 0x10
    tampered = sealed.copy()
    assert engine.open_messages(sealed, lengths, j0s, tags) == 3
    assert np.array_equal(sealed, tampered)


def test_ghash_of_long_messages_split_across_work_groups_and_slices(device):
    # A long message is hashed in segments of (items x 64) blocks, and in slices
    # when it exceeds one allocation; both splits must be invisible.
    key, nonce = os.urandom(16), os.urandom(12)
    data = os.urandom(16 * 5000 + 7)
    expected = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
    cipher = GcmCipher(key, nonce, 16, device, "host")  # (the engine's own stream)
    cipher._engine.slice_bytes = 16 * 777
    assert cipher.encrypt_and_digest(data) == expected


def test_the_power_tables_built_on_the_device_match_the_host_definition(device):
    engine = GcmEngine(os.urandom(32), device, "host")
    count = 37
    tables = np.empty((count * 16, 2), dtype=np.uint64)
    cl.enqueue_copy(engine.runtime.queue, tables, engine.h_tables(count), is_blocking=True)
    for k in range(1, count + 1):
        expected = ghash.nibble_table(ghash.power(engine.h, k))
        got = [(int(hi) << 64) | int(lo) for hi, lo in tables[16 * (k - 1) : 16 * k]]
        assert got == expected, k
