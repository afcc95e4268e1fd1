"""aescl/aead.py: ``aescl.AESGCM`` against pyca ``cryptography``'s AESGCM, on every
device: the NIST vectors, pyca's argument rules, and many messages in one call."""

from __future__ import annotations

import os
import random
import threading
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as PycaAESGCM

import aescl
from aescl import aead
from vectors import load

SIZES = [128, 192, 256]
# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True


@pytest.fixture
def on_engines(monkeypatch):
    """Every message through aescl's engines, however short (below a MiB they go to pyca
    otherwise, and the engines would never be asked)."""
    monkeypatch.setattr(aead, "ENGINE_MIN_BYTES", 0)


def _usable(vector) -> bool:
    """A vector aescl.AESGCM takes, as pyca's AESGCM does: a 16-byte tag, a nonce of 8 to
    128 bytes."""
    return len(vector.bytes("TAG")) == 16 and 8 <= len(vector.bytes("IV")) <= 128


@pytest.mark.parametrize("size", SIZES)
def test_nist_gcm_vectors_on_every_device(size, device, on_engines):
    encrypt = [v for v in load("ciphers", "AES", "GCM", f"gcmEncryptExtIV{size}.rsp")
               if _usable(v)][::7]
    decrypt = [v for v in load("ciphers", "AES", "GCM", f"gcmDecrypt{size}.rsp")
               if _usable(v)][::7]
    assert encrypt and decrypt
    for vector in encrypt:
        sealed = aescl.AESGCM(vector.bytes("KEY"), device=device).encrypt(
            vector.bytes("IV"), vector.bytes("PT"), vector.bytes("AAD"))
        assert sealed == vector.bytes("CT") + vector.bytes("TAG"), vector.id
    failures = 0
    for vector in decrypt:
        cipher = aescl.AESGCM(vector.bytes("KEY"), device=device)
        sealed = vector.bytes("CT") + vector.bytes("TAG")
        if "FAIL" in vector.fields:
            failures += 1
            with pytest.raises(InvalidTag):
                cipher.decrypt(vector.bytes("IV"), sealed, vector.bytes("AAD"))
        else:
            assert cipher.decrypt(vector.bytes("IV"), sealed, vector.bytes("AAD")) == \
                vector.bytes("PT"), vector.id
    assert failures  # (the FAIL cases were seen)


def _array(dtype: str) -> Any:
    import numpy as np

    return np.zeros(64, dtype)


_BAD_CALLS = {
    "a key of 15 bytes": lambda c: c(bytes(15)),
    "a key that is text": lambda c: c("k" * 16),
    "a nonce of 7 bytes": lambda c: c(bytes(16)).encrypt(bytes(7), b"x", None),
    "a nonce of 129 bytes": lambda c: c(bytes(16)).encrypt(bytes(129), b"x", None),
    "a nonce that is text": lambda c: c(bytes(16)).encrypt("n" * 12, b"x", None),
    "data that is text": lambda c: c(bytes(16)).encrypt(bytes(12), "x", None),
    "associated data that is text": lambda c: c(bytes(16)).encrypt(bytes(12), b"x", "a"),
    "data of signed bytes": lambda c: c(bytes(16)).encrypt(bytes(12), _array("int8"), None),
    "data of 32-bit words": lambda c: c(bytes(16)).encrypt(bytes(12), _array("uint32"), None),
    "data that is not contiguous": lambda c: c(bytes(16)).encrypt(
        bytes(12), _array("uint8")[::2], None),
    "a sealed message shorter than a tag": lambda c: c(bytes(16)).decrypt(bytes(12),
                                                                          bytes(15), None),
    "a wrong tag": lambda c: c(bytes(16)).decrypt(bytes(12), bytes(40), None),
    "a key size of 100 bits": lambda c: c.generate_key(100),
    "a key size that is text": lambda c: c.generate_key("128"),
}


def _raised(call) -> type[BaseException] | None:
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return InvalidTag if isinstance(error, InvalidTag) else type(error)
    return None


@pytest.mark.parametrize("engines", [False, True], ids=["short", "on the engines"])
@pytest.mark.parametrize("case", list(_BAD_CALLS))
def test_each_of_pycas_argument_rules(case, engines, monkeypatch):
    if engines:
        monkeypatch.setattr(aead, "ENGINE_MIN_BYTES", 0)
    expected = _raised(lambda: _BAD_CALLS[case](PycaAESGCM))
    assert expected is not None
    assert _raised(lambda: _BAD_CALLS[case](aescl.AESGCM)) is expected


def test_bytes_of_any_shape_are_taken_as_pyca_takes_them(on_engines):
    import numpy as np

    key, nonce = os.urandom(16), os.urandom(12)
    rows = np.frombuffer(os.urandom(96), np.uint8).reshape(4, 24)
    expected = PycaAESGCM(key).encrypt(nonce, rows, memoryview(b"aad"))
    assert aescl.AESGCM(key).encrypt(nonce, rows, memoryview(b"aad")) == expected


def test_generate_key_gives_keys_of_the_size_asked():
    for bits in SIZES:
        keys = {aescl.AESGCM.generate_key(bits) for _ in range(4)}
        assert len(keys) == 4 and all(len(k) == bits // 8 for k in keys)


def _batch(rng: random.Random, count: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    nonces = [os.urandom(rng.choice([8, 12, 16, 60])) for _ in range(count)]
    messages = [os.urandom(rng.choice([0, 1, 15, 16, 17, 1000, 5000])) for _ in range(count)]
    aads = [os.urandom(rng.choice([0, 5, 40])) for _ in range(count)]
    return nonces, messages, aads


@pytest.mark.parametrize("aad_form", ["none", "one", "one array", "each"])
def test_many_messages_are_each_pycas_message(device, on_engines, aad_form):
    import numpy as np

    rng = random.Random(aad_form)
    key = os.urandom(32)
    nonces, messages, aads = _batch(rng, 12)
    one = os.urandom(12)  # (as long as the batch: one value, not one byte a message)
    given = {"none": None, "one": one, "one array": np.frombuffer(one, np.uint8),
             "each": aads}[aad_form]
    each = {"none": [None] * 12, "one": [one] * 12, "one array": [one] * 12,
            "each": aads}[aad_form]
    pyca = PycaAESGCM(key)
    sealed = aescl.AESGCM(key, device=device).encrypt_many(nonces, messages, given)
    assert sealed == [pyca.encrypt(n, m, a) for n, m, a in zip(nonces, messages, each,
                                                                strict=True)]
    assert aescl.AESGCM(key, device=device).decrypt_many(nonces, sealed, given) == messages


def test_a_tampered_message_in_a_batch_is_named_and_zeroed(device, on_engines):
    key = os.urandom(16)
    nonces, messages, _ = _batch(random.Random(3), 6)
    messages[4] = os.urandom(300)
    cipher = aescl.AESGCM(key, device=device)
    sealed = cipher.encrypt_many(nonces, messages)
    sealed[4] = sealed[4][:7] + bytes([sealed[4][7] ^ 1]) + sealed[4][8:]
    with pytest.raises(InvalidTag) as failure:
        cipher.decrypt_many(nonces, sealed)
    assert failure.value.failed == [4]
    assert failure.value.results[4] == bytes(300)
    assert failure.value.results[:4] + failure.value.results[5:] == messages[:4] + messages[5:]


def test_a_nonce_repeated_within_a_batch_is_refused():
    cipher = aescl.AESGCM(bytes(32))
    nonce = os.urandom(12)
    with pytest.raises(ValueError, match="repeated"):
        cipher.encrypt_many([nonce, os.urandom(12), bytearray(nonce)], [b"a", b"b", b"c"])
    with pytest.raises(ValueError, match="nonces for"):
        cipher.encrypt_many([nonce], [b"a", b"b"])


def test_a_nonce_repeated_in_a_nonce_array_is_refused():
    import numpy as np

    cipher = aescl.AESGCM(bytes(32))
    nonces = np.frombuffer(os.urandom(12 * 1000), np.uint8).reshape(1000, 12).copy()
    messages = [b"m"] * 1000
    assert len(cipher.encrypt_many(nonces, messages)) == 1000
    nonces[777] = nonces[3]
    with pytest.raises(ValueError, match="repeated"):
        cipher.encrypt_many(nonces, messages)
    with pytest.raises(ValueError, match="repeated"):
        cipher.decrypt_many(nonces, [bytes(17)] * 1000)


def test_rows_whose_folded_numbers_collide_are_compared_as_bytes():
    """Two different 16-byte nonces made to fold to the same number (the second word is
    free to cancel the first's difference) are not a repeat; a true repeat among them is."""
    import numpy as np

    constant = 0x9E3779B97F4A7C15
    first, other = 5, 6
    second = 77
    other_second = (first * constant % 2**64) ^ second ^ (other * constant % 2**64)
    words = np.array([[first, second], [other, other_second], [9, 10]], np.uint64)
    rows = words.view(np.uint8).reshape(3, 16)
    folded = [int(w[0]) * constant % 2**64 ^ int(w[1]) for w in words]
    assert folded[0] == folded[1]  # (the collision the check must see through)
    assert not aead._repeated_rows(rows)
    assert aead._repeated_rows(np.concatenate([rows, rows[1:2]]))
    assert aead._repeated_rows(np.concatenate([rows[2:], rows]))


def test_a_long_message_runs_on_the_engines_and_is_pycas():
    key, nonce, aad = os.urandom(32), os.urandom(12), os.urandom(33)
    data = os.urandom(aead.ENGINE_MIN_BYTES + 12345)
    sealed = aescl.AESGCM(key).encrypt(nonce, data, aad)
    assert type(sealed) is bytes and sealed == PycaAESGCM(key).encrypt(nonce, data, aad)
    assert aescl.AESGCM(key).decrypt(nonce, bytearray(sealed), aad) == data
    with pytest.raises(InvalidTag):
        aescl.AESGCM(key).decrypt(nonce, sealed[:-1] + bytes([sealed[-1] ^ 1]), aad)


def _opencl_queue():
    pytest.importorskip("pyopencl.array")
    import pyopencl as cl

    from conftest import an_opencl_device

    return cl.CommandQueue(cl.Context([an_opencl_device().cl_device]))


def _device_array_kinds():
    """(to the device, back to bytes) for pyopencl arrays here and, where a CUDA GPU
    is, each CUDA array library installed."""
    from cuda_arrays import cuda_gpu_present, libraries, to_gpu, to_host

    def opencl() -> tuple[Any, Any]:
        import numpy as np
        import pyopencl.array as cl_array

        queue = _opencl_queue()
        return (lambda data: cl_array.to_device(queue, np.frombuffer(data, np.uint8).copy()),
                lambda array: array.get().tobytes())

    kinds = [pytest.param(opencl, id="pyopencl")]
    for param in libraries():
        library = param.values[0]

        def cuda(library=library) -> tuple[Any, Any]:
            if library is None or not cuda_gpu_present():
                pytest.skip("no CUDA GPU here, or its library is not installed")
            return (lambda data: to_gpu(library, data)), to_host
        kinds.append(pytest.param(cuda, id=param.id))
    return kinds


@pytest.mark.parametrize("kind", _device_array_kinds())
@pytest.mark.parametrize("size", [0, 1, 48, 100, 16 * 1024, 16 * 1024 + 5])
def test_a_device_array_is_sealed_beside_it_as_pycas_message(kind, size):
    to_device, to_bytes = kind()
    key, nonce, data = os.urandom(32), os.urandom(12), os.urandom(size)
    cipher, pyca = aescl.AESGCM(key), PycaAESGCM(key)
    sealed = cipher.encrypt(nonce, to_device(data), b"header")
    assert type(sealed) is type(to_device(b"x")) and len(sealed) == size + 16
    assert to_bytes(sealed) == pyca.encrypt(nonce, data, b"header")
    assert to_bytes(cipher.decrypt(nonce, sealed, b"header")) == data
    tampered = bytearray(to_bytes(sealed))
    tampered[-1 if not size else 0] ^= 1
    with pytest.raises(InvalidTag):
        cipher.decrypt(nonce, to_device(bytes(tampered)), b"header")
    with pytest.raises(InvalidTag):
        cipher.decrypt(nonce, sealed, b"other header")


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_one_message_of_whole_blocks_has_its_tag_made_and_checked_on_the_device(
        kind, monkeypatch):
    """Whole blocks go as a batch of one through the many-messages program: no MODE_GCM
    cipher (whose tag is made on the host) is asked for, and a failed tag still raises."""
    to_device, to_bytes = kind()
    key, nonce, data = os.urandom(16), os.urandom(12), os.urandom(4096)
    cipher = aescl.AESGCM(key)

    def no_host_tag(*args):
        raise AssertionError("a MODE_GCM cipher was made: the tag went through the host")

    monkeypatch.setattr(cipher, "_cipher", no_host_tag)
    sealed = cipher.encrypt(nonce, to_device(data), b"ad")
    assert to_bytes(sealed) == PycaAESGCM(key).encrypt(nonce, data, b"ad")
    assert to_bytes(cipher.decrypt(nonce, sealed, b"ad")) == data
    with pytest.raises(InvalidTag):
        cipher.decrypt(nonce, sealed, b"other")


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_a_long_message_on_a_device_goes_through_mode_gcm(kind, monkeypatch):
    """One message of the many-messages program runs on one block of threads: past
    ONE_MESSAGE_MOST_BYTES a device array goes through MODE_GCM, over the whole device."""
    to_device, to_bytes = kind()
    monkeypatch.setattr(aead, "ONE_MESSAGE_MOST_BYTES", 32)
    key, nonce, data = os.urandom(16), os.urandom(12), os.urandom(48)
    cipher = aescl.AESGCM(key)
    made = []
    through = cipher._cipher
    monkeypatch.setattr(cipher, "_cipher", lambda *args: made.append(1) or through(*args))
    sealed = cipher.encrypt(nonce, to_device(data), None)
    assert made and to_bytes(sealed) == PycaAESGCM(key).encrypt(nonce, data, None)


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_device_arrays_in_a_batch_and_as_associated_data(kind):
    to_device, to_bytes = kind()
    key = os.urandom(16)
    nonces = [os.urandom(12) for _ in range(3)]
    messages = [os.urandom(n) for n in (0, 40, 5000)]
    pyca = PycaAESGCM(key)
    cipher = aescl.AESGCM(key)
    sealed = cipher.encrypt_many(nonces, [to_device(m) for m in messages],
                                 [b"", to_device(b"in device memory"), b"x"])
    expected = [pyca.encrypt(n, m, a) for n, m, a in
                zip(nonces, messages, [b"", b"in device memory", b"x"], strict=True)]
    assert [to_bytes(s) for s in sealed] == expected
    tampered = [to_device(e) for e in expected]
    tampered[2] = to_device(expected[2][:100] + bytes([expected[2][100] ^ 1])
                            + expected[2][101:])
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, tampered, [b"", b"in device memory", b"x"])
    assert caught.value.failed == [2]
    assert [to_bytes(r) for r in caught.value.results] == [*messages[:2], bytes(5000)]


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_a_list_of_device_arrays_of_one_size_goes_in_one_launch(kind, monkeypatch):
    """Device arrays of one library and size (whole blocks) are stacked into one 2-D
    array's rows and sealed and opened in one launch: no MODE_GCM cipher, message by
    message, is asked for. A failed one is named, and its result zeroed."""
    to_device, to_bytes = kind()
    key, count = os.urandom(32), 5
    nonces = [os.urandom(12) for _ in range(count)]
    messages = [os.urandom(64) for _ in range(count)]
    pyca, cipher = PycaAESGCM(key), aescl.AESGCM(key)

    def no_message_by_message(*args):
        raise AssertionError("a message went on its own, not in the launch")

    monkeypatch.setattr(cipher, "_cipher", no_message_by_message)
    sealed = cipher.encrypt_many(nonces, [to_device(m) for m in messages], b"ad")
    assert isinstance(sealed, list) and len(sealed) == count
    expected = [pyca.encrypt(n, m, b"ad") for n, m in zip(nonces, messages, strict=True)]
    assert [to_bytes(s) for s in sealed] == expected
    opened = cipher.decrypt_many(nonces, sealed, b"ad")
    assert [to_bytes(o) for o in opened] == messages
    tampered = [to_device(e) for e in expected]
    tampered[2] = to_device(expected[2][:-1] + bytes([expected[2][-1] ^ 1]))
    monkeypatch.undo()  # (from the failed row on, rows are opened again one by one)
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, tampered, b"ad")
    assert caught.value.failed == [2]
    assert [to_bytes(r) for r in caught.value.results] == [*messages[:2], bytes(64),
                                                           *messages[3:]]


def test_a_list_over_two_devices_goes_a_launch_a_device_and_each_result_stays_on_its_own(
        monkeypatch):
    """pyopencl arrays in two devices' contexts (PoCL and Oclgrind here; two GPUs where
    there are): each device's arrays are stacked and sealed there, the devices at once,
    and the results come back in the list's order, each in its input's context. A failed
    message on either device is named by its index in the list."""
    pytest.importorskip("pyopencl.array")
    import numpy as np
    import pyopencl as cl
    import pyopencl.array as cl_array

    devices = [d for d in aescl.devices() if d.is_opencl][:2]
    if len(devices) < 2:
        pytest.skip("fewer than two OpenCL devices here")
    queues = [cl.CommandQueue(cl.Context([d.cl_device])) for d in devices]
    key, count = os.urandom(16), 5
    nonces = [os.urandom(12) for _ in range(count)]
    messages = [os.urandom(32) for _ in range(count)]
    arrays = [cl_array.to_device(queues[index % 2], np.frombuffer(m, np.uint8).copy())
              for index, m in enumerate(messages)]
    pyca, cipher = PycaAESGCM(key), aescl.AESGCM(key)
    stacked = []
    stack = aead._stacked_groups
    monkeypatch.setattr(aead, "_stacked_groups", lambda *args: stacked.append(
        stack(*args)) or stacked[-1])
    # Each device's rows wait at a barrier of both before their launch, which neither
    # passes until both are there: had the devices gone one after the other, it would
    # time out.
    barrier, seal_rows = threading.Barrier(2, timeout=60), aead.AESGCM._seal_rows

    def together(*args, **kwargs):
        barrier.wait()
        return seal_rows(*args, **kwargs)

    monkeypatch.setattr(aead.AESGCM, "_seal_rows", together)
    sealed = cipher.encrypt_many(nonces, arrays, b"ad")
    monkeypatch.setattr(aead.AESGCM, "_seal_rows", seal_rows)
    assert [sorted(indices) for _, indices, _ in stacked[0]] == [[0, 2, 4], [1, 3]]
    expected = [pyca.encrypt(n, m, b"ad") for n, m in zip(nonces, messages, strict=True)]
    assert [s.get().tobytes() for s in sealed] == expected
    assert [s.context for s in sealed] == [a.context for a in arrays]
    assert [o.get().tobytes() for o in cipher.decrypt_many(nonces, sealed, b"ad")] == messages
    tampered = [cl_array.to_device(queues[index % 2], np.frombuffer(e, np.uint8).copy())
                for index, e in enumerate(expected)]
    for bad in (1, 2):  # (one on each device)
        tampered[bad][0] = tampered[bad][0] ^ 1
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, tampered, b"ad")
    assert caught.value.failed == [1, 2]
    assert [r.get().tobytes() for r in caught.value.results] == [
        messages[0], bytes(32), bytes(32), messages[3], messages[4]]


@pytest.mark.parametrize("kind", _device_array_kinds())
@pytest.mark.parametrize("length", [0, 1000])
def test_a_2d_device_array_is_n_messages_and_comes_back_n_rows(kind, length):
    import numpy as np

    to_device, to_bytes = kind()
    count, key = 5, os.urandom(32)
    nonce_rows = np.frombuffer(os.urandom(12 * count), np.uint8).reshape(count, 12)
    nonces = [row.tobytes() for row in nonce_rows]
    messages = [os.urandom(length) for _ in range(count)]
    pyca, cipher = PycaAESGCM(key), aescl.AESGCM(key)
    grid = to_device(b"".join(messages) or b"").reshape(count, length)
    sealed = cipher.encrypt_many(nonce_rows, grid, b"ad")
    assert tuple(sealed.shape) == (count, length + 16)
    expected = [pyca.encrypt(n, m, b"ad") for n, m in zip(nonces, messages, strict=True)]
    assert to_bytes(sealed) == b"".join(expected)
    opened = cipher.decrypt_many(nonces, sealed, b"ad")
    assert tuple(opened.shape) == (count, length) and to_bytes(opened) == b"".join(messages)
    tampered = bytearray(b"".join(expected))
    tampered[3 * (length + 16) + length // 2] ^= 1  # (row 3: its text, or its tag)
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, to_device(bytes(tampered)).reshape(count, length + 16),
                            b"ad")
    assert caught.value.failed == [3]
    rows = to_bytes(caught.value.results)
    assert rows == b"".join([*messages[:3], bytes(length), messages[4]])


@pytest.mark.parametrize("kind", _device_array_kinds())
@pytest.mark.parametrize("aad", ["none", "common", "each"])
def test_rows_in_one_launch_name_every_failed_row_and_zero_it(kind, aad):
    """Rows of whole blocks go in one launch (device_messages.py), whose opening finds
    only the first failed tag; every failed row is still named, and zeroed."""
    import numpy as np

    to_device, to_bytes = kind()
    count, length, key = 6, 64, os.urandom(16)
    nonces = [os.urandom(12) for _ in range(count)]
    messages = [os.urandom(length) for _ in range(count)]
    given = {"none": None, "common": b"shared", "each": [os.urandom(i) for i in range(count)]}
    aads = given[aad] if aad == "each" else [given[aad]] * count
    pyca, cipher = PycaAESGCM(key), aescl.AESGCM(key)
    grid = to_device(b"".join(messages)).reshape(count, length)
    nonce_rows = np.frombuffer(b"".join(nonces), np.uint8).reshape(count, 12)
    sealed = cipher.encrypt_many(nonce_rows, grid, given[aad])
    expected = [pyca.encrypt(n, m, a) for n, m, a in zip(nonces, messages, aads, strict=True)]
    assert to_bytes(sealed) == b"".join(expected)
    assert to_bytes(cipher.decrypt_many(nonces, sealed, given[aad])) == b"".join(messages)
    tampered = bytearray(b"".join(expected))
    tampered[1 * (length + 16) + length + 15] ^= 0x80  # (row 1's tag)
    tampered[4 * (length + 16)] ^= 1  # (row 4's text)
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, to_device(bytes(tampered)).reshape(count, length + 16),
                            given[aad])
    assert caught.value.failed == [1, 4]
    assert to_bytes(caught.value.results) == b"".join(
        bytes(length) if index in (1, 4) else message
        for index, message in enumerate(messages))


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_a_repeat_in_a_batch_of_rows_is_refused_though_checked_beside_the_work(kind):
    """A batch of rows has its nonces checked once its launch is enqueued, or while the
    device works (aead._RepeatCheck); a repeat is still refused, sealing and opening,
    and no result leaves the call."""
    import numpy as np

    to_device, to_bytes = kind()
    count, length, key = 8, 32, os.urandom(32)
    cipher, pyca = aescl.AESGCM(key), PycaAESGCM(key)
    nonces = np.frombuffer(os.urandom(12 * count), np.uint8).reshape(count, 12).copy()
    messages = os.urandom(count * length)
    grid = to_device(messages).reshape(count, length)
    sealed = cipher.encrypt_many(nonces, grid)
    assert to_bytes(sealed) == b"".join(
        pyca.encrypt(bytes(nonce), messages[i * length : (i + 1) * length], None)
        for i, nonce in enumerate(nonces))
    nonces[6] = nonces[1]
    with pytest.raises(ValueError, match="repeated"):
        cipher.encrypt_many(nonces, grid)
    with pytest.raises(ValueError, match="repeated"):
        cipher.decrypt_many(nonces, sealed)


def test_a_device_array_is_taken_in_any_shape_to_seal_and_flat_to_open():
    import numpy as np
    import pyopencl.array as cl_array

    queue = _opencl_queue()
    key, nonce, data = os.urandom(16), os.urandom(12), os.urandom(4000)
    grid = cl_array.to_device(queue, np.frombuffer(data, np.uint8).reshape(40, 100).copy())
    sealed = aescl.AESGCM(key).encrypt(nonce, grid, None)
    assert sealed.get().tobytes() == PycaAESGCM(key).encrypt(nonce, data, None)
    folded = cl_array.to_device(queue, sealed.get().reshape(2, -1))
    with pytest.raises(TypeError, match="flat array of bytes"):
        aescl.AESGCM(key).decrypt(nonce, folded, None)
    with pytest.raises(TypeError, match="nonce: must be in host memory"):
        aescl.AESGCM(key).encrypt(cl_array.to_device(queue, np.zeros(12, np.uint8)), grid,
                                  None)


def test_lone_messages_on_a_tensor_share_their_streams_kernels_and_stay_pycas():
    """A cipher's lone messages with no AAD reuse the kernels kept for their GPU and
    stream (engines/cuda/arrays.py, _lone_kernels): many calls, on two streams, each
    with its own nonce, are each pyca's message and open again; one with AAD between
    them (its own kernels) too."""
    from cuda_arrays import cuda_gpu_present

    torch = pytest.importorskip("torch")
    if not cuda_gpu_present():
        pytest.skip("no CUDA GPU on this machine")
    key = os.urandom(32)
    cipher, pyca = aescl.AESGCM(key), PycaAESGCM(key)
    streams = [torch.cuda.current_stream(), torch.cuda.Stream()]
    for round_ in range(6):
        stream = streams[round_ % 2]
        with torch.cuda.stream(stream):
            data = os.urandom(4096)
            nonce, aad = os.urandom(12), (b"header" if round_ == 3 else None)
            tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).to("cuda")
            sealed = cipher.encrypt(nonce, tensor, aad)
            opened = cipher.decrypt(nonce, sealed, aad)
            stream.synchronize()
            assert sealed.cpu().numpy().tobytes() == pyca.encrypt(nonce, data, aad)
            assert opened.cpu().numpy().tobytes() == data
    (job,) = cipher._jobs.values()
    assert len(job._lone_kernels) == 2  # (one a stream, made once each)
    with pytest.raises(InvalidTag):
        tampered = sealed.clone()
        tampered[0] ^= 1
        cipher.decrypt(nonce, tampered, aad)


def test_kept_lone_sealings_of_other_lengths_and_threads_stay_pycas():
    """A lone message is sealed and opened through launches kept for its length and
    stream (engines/cuda/workers.py, _kept_lone), of which only the
    addresses, J0 and the verdict's place change a call: lengths taken in turn each get
    their own, threads on one stream at once each get their own message back (the kept
    buffer is packed and launched under a lock), and a changed message still fails."""
    import threading

    from cuda_arrays import cuda_gpu_present

    torch = pytest.importorskip("torch")
    if not cuda_gpu_present():
        pytest.skip("no CUDA GPU on this machine")
    key = os.urandom(16)
    cipher, pyca = aescl.AESGCM(key), PycaAESGCM(key)

    def sealed_matches(length: int) -> bool:
        data, nonce = os.urandom(length), os.urandom(12)
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).to("cuda")
        sealed = cipher.encrypt(nonce, tensor, None)
        opened = cipher.decrypt(nonce, sealed, None)
        return (sealed.cpu().numpy().tobytes() == pyca.encrypt(nonce, data, None)
                and opened.cpu().numpy().tobytes() == data)

    lengths = [4096, 16, 65536, 4096, 48, 16, 65536]
    assert all(sealed_matches(length) for length in lengths)
    (job,) = cipher._jobs.values()
    (kernels,) = job._lone_kernels.values()
    assert set(kernels._lone_launches) == {(length, sealing) for length in lengths
                                           for sealing in (True, False)}
    nonce = os.urandom(12)
    sealed = cipher.encrypt(nonce, torch.zeros(4096, dtype=torch.uint8, device="cuda"), None)
    for at in (0, 4095, 4096, 4111):  # (the text's first and last bytes, the tag's)
        tampered = sealed.clone()
        tampered[at] ^= 1
        with pytest.raises(InvalidTag):
            cipher.decrypt(nonce, tampered, None)
    assert cipher.decrypt(nonce, sealed, None).cpu().numpy().tobytes() == bytes(4096)

    results: list[bool] = []

    def seal_many() -> None:
        results.extend(sealed_matches(4096) for _ in range(40))

    threads = [threading.Thread(target=seal_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 160


def test_a_cipher_dropped_while_its_work_waits_on_a_stream_still_gives_pycas_bytes():
    """A cipher's kept tables of H (engines/cuda/workers.py, KeyTables) record no event a
    call: freed with the cipher, they wait for all the work of their GPU first. Here the
    cipher is dropped while its launches sit behind a long sleep on the stream, and more
    memory is allocated and written meanwhile; every sealed message is still pyca's."""
    import gc

    from cuda_arrays import cuda_gpu_present

    torch = pytest.importorskip("torch")
    if not cuda_gpu_present():
        pytest.skip("no CUDA GPU on this machine")
    key = os.urandom(32)
    pyca = PycaAESGCM(key)
    cipher = aescl.AESGCM(key)
    messages = [(os.urandom(12), os.urandom(4096)) for _ in range(8)]
    tensors = [torch.frombuffer(bytearray(data), dtype=torch.uint8).to("cuda")
               for _, data in messages]
    cipher.encrypt(messages[0][0], tensors[0], None)  # (the kernels kept for the stream)
    torch.cuda.synchronize()
    torch.cuda._sleep(500_000_000)  # (a few hundred ms of the GPU's clock)
    sealed = [cipher.encrypt(nonce, tensor, None)
              for (nonce, _), tensor in zip(messages, tensors, strict=True)]
    del cipher
    gc.collect()
    scribbles = [torch.full((1 << 20,), 0xA5, dtype=torch.uint8, device="cuda")
                 for _ in range(4)]
    torch.cuda.synchronize()
    assert all(s.cpu().numpy().tobytes() == pyca.encrypt(nonce, data, None)
               for s, (nonce, data) in zip(sealed, messages, strict=True))
    assert all(int(scribble[0]) == 0xA5 for scribble in scribbles)


def test_a_jax_array_that_fails_its_tag_raises_invalid_tag_and_zeroes_its_rows(jax_gpu):
    """A JAX array is immutable, so aescl makes its results in CuPy and hands them to JAX
    last. A failed tag must still raise InvalidTag (InvalidTags naming the rows of a
    batch), with the failed rows zeroed in the batch's result: the zeroing writes to the
    result before it becomes JAX's (a JAX result refuses to be written)."""
    import numpy as np
    from cuda_arrays import to_jax

    jax, gpu = jax_gpu
    key = os.urandom(16)
    cipher, pyca = aescl.AESGCM(key), PycaAESGCM(key)
    nonce, data = os.urandom(12), os.urandom(4096)
    sealed = cipher.encrypt(nonce, to_jax(jax, gpu, data), None)
    assert isinstance(sealed, jax.Array)
    assert np.asarray(sealed).tobytes() == pyca.encrypt(nonce, data, None)
    tampered = bytearray(np.asarray(sealed).tobytes())
    tampered[0] ^= 1
    with pytest.raises(InvalidTag):
        cipher.decrypt(nonce, to_jax(jax, gpu, bytes(tampered)), None)

    nonces = [os.urandom(12) for _ in range(4)]
    rows = [os.urandom(64) for _ in range(4)]
    grid = jax.device_put(np.frombuffer(b"".join(rows), np.uint8).reshape(4, 64), gpu)
    batch = np.asarray(cipher.encrypt_many(nonces, grid)).copy()
    batch[2, 0] ^= 1
    with pytest.raises(aead.InvalidTags) as caught:
        cipher.decrypt_many(nonces, jax.device_put(batch, gpu))
    assert caught.value.failed == [2]
    opened = np.asarray(caught.value.results)
    assert opened[2].tobytes() == bytes(64)
    assert [opened[i].tobytes() for i in (0, 1, 3)] == [rows[i] for i in (0, 1, 3)]
