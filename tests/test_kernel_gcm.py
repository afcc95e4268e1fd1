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
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from held_queue import runs_while_its_queue_waits

import aescl
from aescl import ghash
from aescl.engines.cuda import workers as cuda_workers
from aescl.engines.opencl import gcm_kernels
from aescl.engines.opencl import runtime as opencl_runtime
from aescl.engines.opencl.gcm import OpenclHostGcm
from aescl.engines.opencl.gcm_kernels import GcmKernels
from aescl.engines.opencl.kernels import kernel_in
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


# Where the GHASH of a run of at most ghash.HOST_RUN_BLOCKS blocks is made, which holds
# every vector's AAD and text: on the host, as a GCM cipher does, or, as for longer
# runs, on the device.
SHORT_RUNS = ["hashed on the host", "hashed on the device"]


@pytest.fixture(params=SHORT_RUNS)
def short_runs(request, monkeypatch):
    if request.param == "hashed on the device":
        monkeypatch.setattr(ghash, "HOST_RUN_BLOCKS", 0)
    return request.param


def _sample(vectors, key_schedule, short_runs):
    # The full files run with host round keys and a GCM cipher's own choice of where to
    # hash; device key expansion (the same AES core, checked by the ECB and CTR vectors)
    # and the device's GHASH of every run (checked by longer messages, below, too) each
    # run on every 16th vector.
    if key_schedule == "host" and short_runs == SHORT_RUNS[0]:
        return vectors
    return vectors[::16]


@pytest.mark.parametrize("size", SIZES)
def test_nist_gcm_encrypt_vectors(size, device, key_schedule, short_runs):
    vectors = load("ciphers", "AES", "GCM", f"gcmEncryptExtIV{size}.rsp")
    assert len(vectors) == VECTORS_PER_FILE
    for vector in _sample(vectors, key_schedule, short_runs):
        ciphertext, tag = _gcm(vector, device, key_schedule).encrypt_and_digest(
            vector.bytes("PT")
        )
        assert (ciphertext, tag) == (vector.bytes("CT"), vector.bytes("TAG")), vector.id


@pytest.mark.parametrize("size", SIZES)
def test_nist_gcm_decrypt_vectors_including_every_fail_case(size, device, key_schedule,
                                                           short_runs):
    vectors = load("ciphers", "AES", "GCM", f"gcmDecrypt{size}.rsp")
    assert len(vectors) == VECTORS_PER_FILE
    failures = 0
    sample = _sample(vectors, key_schedule, short_runs)
    for vector in sample:
        cipher = _gcm(vector, device, key_schedule)
        if "FAIL" in vector.fields:
            failures += 1
            with pytest.raises(aescl.AuthenticationError, match="MAC check failed"):
                cipher.decrypt_and_verify(vector.bytes("CT"), vector.bytes("TAG"))
        else:
            plaintext = cipher.decrypt_and_verify(vector.bytes("CT"), vector.bytes("TAG"))
            assert plaintext == vector.bytes("PT"), vector.id
    assert failures > len(sample) // 3  # the FAIL cases were all seen


@pytest.fixture
def launched(monkeypatch) -> list[str]:
    """The names of the kernels launched during the test, in order."""
    names: list[str] = []
    launch = cl.enqueue_nd_range_kernel

    def recorded(queue, kernel, *args, **kwargs):
        names.append(kernel.function_name)
        return launch(queue, kernel, *args, **kwargs)

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", recorded)
    return names


def test_a_gcm_cipher_makes_h_its_tag_mask_and_split_blocks_on_the_host(device, launched):
    """H, E(J0) and the keystream of a block that calls end or begin inside are one AES
    block each, made on the host (OpenSSL): a message of less than a block, with AAD
    of less than one, encrypts and decrypts with no launch on the device, byte-identical
    to pycryptodome, for 96-bit nonces and others (J0 by GHASH)."""
    for key, nonce in ((os.urandom(16), os.urandom(12)), (os.urandom(32), os.urandom(7))):
        expected = AES.new(key, AES.MODE_GCM, nonce=nonce).update(b"aad") \
            .encrypt_and_digest(b"fifteen bytes..")
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(b"aad")
        first = cipher.encrypt(b"fifteen")  # (the rest of the block in a second call)
        assert (first + cipher.encrypt(b" bytes.."), cipher.digest()) == expected
        opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(b"aad")
        assert opened.decrypt_and_verify(*expected) == b"fifteen bytes.."
    assert launched == []


@pytest.mark.parametrize("blocks", [1, ghash.HOST_RUN_BLOCKS, ghash.HOST_RUN_BLOCKS + 1])
def test_a_gcm_cipher_hashes_short_runs_on_the_host_and_longer_ones_on_the_device(
        device, launched, blocks):
    """AAD and text of up to ghash.HOST_RUN_BLOCKS whole blocks are hashed on the host,
    where the device's GHASH was a launch (two more for a new key's tables) and a wait;
    longer runs on the device. Either way byte-identical to pycryptodome, split calls
    and decrypt_and_verify included."""
    key, nonce = os.urandom(16), os.urandom(12)
    aad, text = os.urandom(16 * blocks + 5), os.urandom(16 * blocks)
    expected = AES.new(key, AES.MODE_GCM, nonce=nonce).update(aad).encrypt_and_digest(text)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    cipher.update(aad[:7]).update(aad[7:])
    assert (cipher.encrypt(text), cipher.digest()) == expected
    opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(aad)
    assert opened.decrypt_and_verify(*expected) == text
    hashed_on_the_device = [name for name in launched if "ghash" in name]
    assert launched.count("gcm_ctr_xor") == 2  # the text: on the device either way
    if blocks <= ghash.HOST_RUN_BLOCKS:
        assert hashed_on_the_device == []
    else:
        assert "gcm_ghash" in hashed_on_the_device


def test_a_gcm_ciphers_keystream_lets_other_threads_run_while_its_queue_waits(device):
    runs_while_its_queue_waits(device.id, "gcm keystream")


def test_ghash_of_long_messages_split_across_work_groups_and_pieces(device):
    # A long message is hashed in segments of (items x 64) blocks, and in the pipeline's
    # pieces; both splits, and calls that end inside a block, must be invisible.
    key, nonce, aad = os.urandom(16), os.urandom(12), os.urandom(16 * 300 + 5)
    data = os.urandom(16 * 5000 + 7)
    expected, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).update(aad).encrypt_and_digest(data)

    def small_pieces() -> OpenclHostGcm:
        cipher = OpenclHostGcm(key, nonce, 16, device, "host")  # (the engine's own stream)
        cipher._piece_bytes = 16 * 777  # pieces of the pipeline
        return cipher.update(aad)

    assert small_pieces().encrypt_and_digest(data) == (expected, tag)
    # Decrypted in place, in calls that begin and end inside blocks, then the rest verified.
    text = np.frombuffer(bytearray(expected), np.uint8)
    cipher = small_pieces()
    for lo, hi in ((0, 5), (5, 16 * 1000 + 3), (16 * 1000 + 3, 16 * 3000)):
        assert cipher.decrypt(text[lo:hi], output=text[lo:hi]) is None
    assert cipher.decrypt_and_verify(text[16 * 3000 :], tag, output=text[16 * 3000 :]) is None
    assert text.tobytes() == data


def test_verifying_into_bytes_passes_over_the_text_once_and_into_output_twice(
        device, monkeypatch):
    """decrypt_and_verify into the bytes it returns decrypts and hashes in one pass (its
    result is released only once the tag matched); into a caller's output= it hashes
    first and decrypts only after the check, so a wrong tag leaves output as it was."""
    key, nonce = os.urandom(32), os.urandom(12)
    data = os.urandom(16 * 700 + 9)
    sealed, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
    passes: list[tuple[bool, str | None]] = []  # (CTR in it, the side hashed)
    through = OpenclHostGcm._through
    monkeypatch.setattr(OpenclHostGcm, "_through", lambda self, source, target, *rest: (
        passes.append((target is not None, rest[-1])), through(self, source, target, *rest))[1])

    def opener() -> OpenclHostGcm:
        return OpenclHostGcm(key, nonce, 16, device, "host")

    assert opener().decrypt_and_verify(sealed, tag) == data
    assert passes == [(True, "input")]
    passes.clear()
    with pytest.raises(aescl.AuthenticationError):
        opener().decrypt_and_verify(sealed, bytes(16))
    output = np.zeros(len(sealed), np.uint8)
    with pytest.raises(aescl.AuthenticationError):
        opener().decrypt_and_verify(sealed, bytes(16), output=output)
    assert not output.any()
    passes.clear()
    assert opener().decrypt_and_verify(sealed, tag, output=output) is None
    assert output.tobytes() == data and passes == [(False, "input"), (True, None)]


def test_the_power_tables_built_on_the_device_match_the_host_definition(device):
    engine = GcmKernels(os.urandom(32), device, "host")
    count = 37
    tables = np.empty((count * 16, 2), dtype=np.uint64)
    cl.enqueue_copy(engine.runtime.queue, tables, engine.h_tables(count), is_blocking=True)
    for k in range(1, count + 1):
        expected = ghash.nibble_table(ghash.power(engine.h, k))
        got = [(int(hi) << 64) | int(lo) for hi, lo in tables[16 * (k - 1) : 16 * k]]
        assert got == expected, k


def test_the_position_tables_built_on_the_device_match_the_host_definition(device):
    # Entry k·16 + n of table j: nibble entry n of H^(2^j) times x^(4(31 - k)); each
    # table holds its entries' high words, then their low words (cl/aes_gcm.cl).
    engine = GcmKernels(os.urandom(32), device, "host")
    words = np.empty((9, 2, 512), dtype=np.uint64)
    cl.enqueue_copy(engine.runtime.queue, words, engine.positions_of(engine.h),
                    is_blocking=True)
    for j in range(9):
        entries = ghash.nibble_table(ghash.power(engine.h, 2**j))
        for k in range(31, -1, -1):
            got = [(int(words[j, 0, 16 * k + n]) << 64) | int(words[j, 1, 16 * k + n])
                   for n in range(16)]
            assert got == entries, (j, k)
            entries = [_times_x4(entry) for entry in entries]


def test_an_engine_made_after_its_devices_runtime_was_made_anew_is_in_the_new_one(device):
    # Engines share what does not depend on the key (gcm._shape): a runtime made anew
    # for the device (a new context, queue and lock) must not meet the old one's.
    key = os.urandom(16)
    GcmKernels(key, device, "host")
    opencl_runtime._runtimes.pop(device.id, None)
    engine = GcmKernels(key, device, "host")
    assert engine.runtime is opencl_runtime.device_runtime(device)
    data = os.urandom(4096)
    nonce = os.urandom(12)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
    assert cipher.encrypt_and_digest(data) == AES.new(key, AES.MODE_GCM,
                                                      nonce=nonce).encrypt_and_digest(data)


def _times_x4(value: int) -> int:
    for _ in range(4):
        value = ghash.times_x(value)
    return value


@pytest.mark.parametrize("items, lengths", [
    (256, [1]), (256, [256]), (256, [300]), (256, [1024]),  # a lone message, as CUDA's
    (8, [5, 5, 5]), (8, [130, 130, 130, 130, 130]),          # several in a work-group
])
def test_the_sums_by_powers_give_every_message_its_gcm_tag(device, monkeypatch, items,
                                                           lengths):
    """gcm_crypt_hash with GCM_SUMS_BY_POWERS (the CUDA engine's build for a lone
    message: each work-item's Horner sum times its own power of H, then a tree of XORs)
    seals and opens as AES-GCM does: lead blocks, items with no block, several Horner
    steps, several messages a work-group. Run here on the OpenCL engine's tables route,
    with H's powers after its position tables as the CUDA engine keeps them."""
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")  # (the tables route has the kernel)
    built_options = gcm_kernels.aes_options
    monkeypatch.setattr(gcm_kernels, "aes_options", lambda *args: built_options(*args)
                        + " -DGCM_SUMS_BY_POWERS=1")
    opencl_runtime._runtimes.pop(device.id, None)  # (builds kept by a runtime of its own)
    try:
        key = os.urandom(32)
        engine = GcmKernels(key, device, "host")
        assert engine.fused, "the tables route runs gcm_crypt_hash"
        engine._crypt_hash_items = items
        engine._crypt_hash_group = max(items, 16)
        engine._max_work_groups = 1  # (a wave of one group: message_items keeps `items`)
        rt = engine.runtime
        h_tables = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE,
                             cuda_workers._H_TABLES_BYTES)
        position_tables = kernel_in(rt, "aes_gcm.cl", engine.options, "ghash_position_tables")
        powers = kernel_in(rt, "aes_gcm.cl", engine.options, "ghash_powers")
        position_tables(rt.queue, (16 * 9,), (16,), np.uint64(engine.h >> 64),
                        np.uint64(engine.h & (2**64 - 1)), h_tables)
        powers(rt.queue, (cuda_workers._POWERS,), None, np.uint64(engine.h >> 64),
               np.uint64(engine.h & (2**64 - 1)),
               h_tables.get_sub_region(cuda_workers._POSITION_TABLES_BYTES,
                                       cuda_workers._POWERS * 16))
        engine._kept_tables(engine.h)["positions"] = h_tables
        count, message_blocks = len(lengths), lengths[0]
        nonces = [os.urandom(12) for _ in range(count)]
        texts = [os.urandom(16 * message_blocks) for _ in range(count)]
        j0s = engine.constant(np.frombuffer(b"".join(n + b"\0\0\0\1" for n in nonces),
                                            np.uint8))
        expected = [AESGCM(key).encrypt(n, t, None) for n, t in zip(nonces, texts,
                                                                     strict=True)]
        size = 16 * message_blocks * count
        source = engine.constant(np.frombuffer(b"".join(texts), np.uint8))
        target = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, size)
        tags = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, 16 * count)
        engine.enqueue_crypt_hash(source, target, size // 16, message_blocks, count,
                                  (message_blocks, message_blocks), j0s, tags, 1, True)
        sealed, got_tags = np.empty(size, np.uint8), np.empty(16 * count, np.uint8)
        cl.enqueue_copy(rt.queue, sealed, target)
        cl.enqueue_copy(rt.queue, got_tags, tags, is_blocking=True)
        step = 16 * message_blocks
        assert [sealed[m * step : (m + 1) * step].tobytes() + got_tags[16 * m : 16 * m + 16]
                .tobytes() for m in range(count)] == expected
        # Opening: the ciphertext hashed (not the output), each tag compared on the device.
        opened = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, size)
        verdict = engine.constant(np.array([0xFFFFFFFF], np.uint32))
        received = bytearray(got_tags.tobytes())
        received[16 * (count - 1)] ^= 1  # the last message's tag damaged
        check = (engine.constant(np.frombuffer(bytes(received), np.uint8)), 0, 1, verdict, 0)
        engine.enqueue_crypt_hash(target, opened, size // 16, message_blocks, count,
                                  (message_blocks, message_blocks), j0s, None, 0, False,
                                  check=check)
        plain, first_failed = np.empty(size, np.uint8), np.empty(1, np.uint32)
        cl.enqueue_copy(rt.queue, plain, opened)
        cl.enqueue_copy(rt.queue, first_failed, verdict, is_blocking=True)
        assert plain.tobytes() == b"".join(texts)
        assert int(first_failed[0]) == count - 1
    finally:
        opencl_runtime._runtimes.pop(device.id, None)
