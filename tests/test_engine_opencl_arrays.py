"""aescl/engines/opencl/arrays.py (and engines/programs/device_runs.py): ECB and CTR calls on
pyopencl arrays in a context and queue the test makes, on every selected OpenCL device.
"""

from __future__ import annotations

import math
import re
from typing import Any

import gcm_call_order
import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest
from Crypto.Cipher import AES as Reference

import aescl

KEYS = [bytes(range(n)) for n in (16, 24, 32)]


@pytest.fixture
def queue(device):
    """A queue in a context of the test's own, as a caller of aescl would make it."""
    return cl.CommandQueue(cl.Context([device.cl_device]))


def _random(nbytes: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"aes{8 * len(k)}")
def test_ctr_on_arrays_matches_pycryptodome_across_any_cut(queue, key):
    # Cuts that start and end inside blocks, slices at offsets no sub-buffer may start
    # at, and whole aligned runs: every path of device_runs.run_blocks.
    data = _random(70_003)
    array = cl_array.to_device(queue, data)
    nonce = b"\x01" * 12
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=2**32 - 3)
    cuts = [0, 5, 16, 21, 4096, 4099, 60_000, 70_003]
    pieces = [cipher.encrypt(array[lo:hi]) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    got = b"".join(piece.get().tobytes() for piece in pieces)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce,
                             initial_value=2**32 - 3).encrypt(data.tobytes())
    assert got == expected


@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"aes{8 * len(k)}")
def test_ecb_on_arrays_matches_pycryptodome_and_decrypts_in_place(queue, key):
    data = _random(16 * 1000)
    array = cl_array.to_device(queue, data)
    cipher = aescl.new(key, aescl.MODE_ECB)
    sealed = cipher.encrypt(array)
    assert sealed.get().tobytes() == Reference.new(key, Reference.MODE_ECB).encrypt(
        data.tobytes())
    assert cipher.decrypt(sealed, output=sealed) is None
    assert np.array_equal(sealed.get(), data)


def test_the_result_is_an_array_like_the_input(queue):
    values = np.random.default_rng(2).random((64, 3), dtype=np.float32)
    array = cl_array.to_device(queue, values)
    key, nonce = bytes(16), bytes(8)
    sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(array)
    assert isinstance(sealed, cl_array.Array)
    assert (sealed.shape, sealed.dtype, sealed.queue) == (array.shape, array.dtype, queue)
    assert sealed.get().tobytes() == Reference.new(
        key, Reference.MODE_CTR, nonce=nonce).encrypt(values.tobytes())


def test_a_ctr_stream_continues_between_host_and_device_calls(queue):
    data = _random(1000, seed=3)
    key, nonce = bytes(32), bytes(8)
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce)
    head = cipher.encrypt(data[:333].tobytes())
    tail = cipher.encrypt(cl_array.to_device(queue, data[333:])).get().tobytes()
    assert head + tail == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(
        data.tobytes())
    with pytest.raises(aescl.KeystreamReuseError):
        cipher.seek(0)
        cipher.encrypt(cl_array.to_device(queue, data[:16]))


def test_work_follows_the_arrays_events_on_an_out_of_order_queue(device):
    properties = device.cl_device.queue_properties
    if not properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
        pytest.skip(f"{device.name} has no out-of-order queues")
    context = cl.Context([device.cl_device])
    queue = cl.CommandQueue(
        context, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    key, nonce = bytes(16), bytes(8)
    for _ in range(5):
        # A producer kernel of pyopencl's, then encrypt, decrypt and a consumer kernel,
        # ordered by the arrays' events alone.
        produced = cl_array.arange(queue, 12_501, dtype=np.uint32).view(np.uint8)
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(produced[7:])
        opened = aescl.new(key, aescl.MODE_CTR, nonce=nonce).decrypt(sealed)
        doubled = opened + opened
        expected = np.arange(12_501, dtype=np.uint32).view(np.uint8)[7:] * 2
        assert np.array_equal(doubled.get(), expected)


def test_bad_arrays_are_refused_before_anything_is_written(queue):
    cipher = aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8))
    array = cl_array.to_device(queue, _random(64))
    with pytest.raises(ValueError, match="not contiguous"):
        cipher.encrypt(array[::2])
    with pytest.raises(ValueError, match="output has 32 bytes; the input has 64"):
        cipher.encrypt(array, output=cl_array.empty(queue, 32, np.uint8))
    with pytest.raises(TypeError, match="pyopencl array like the input"):
        cipher.encrypt(array, output=np.empty(64, np.uint8))
    elsewhere = cl.CommandQueue(cl.Context([queue.device]))
    with pytest.raises(ValueError, match="another context"):
        cipher.encrypt(array, output=cl_array.empty(elsewhere, 64, np.uint8))
    with pytest.raises(TypeError, match=r"cl\.Buffer has no queue"):
        cipher.encrypt(array.base_data)
    for call in (lambda out: cipher.encrypt(array, output=out),
                 lambda out: aescl.chunked.decrypt(bytes(32), aescl.chunked.encrypt(
                     bytes(32), array), output=out)):
        with pytest.raises(ValueError, match="output has no queue"):
            call(cl_array.empty(queue, 64, np.uint8).with_queue(None))
    assert cipher.position == 0  # nothing was used of the keystream
    with pytest.raises(ValueError, match="aligned to block boundary"):
        aescl.new(bytes(16), aescl.MODE_ECB).encrypt(array[:20])


def test_an_array_on_another_device_than_the_cipher_names_is_refused(device, queue):
    others = [d for d in aescl.devices() if d.is_opencl and d.id != device.id]
    if not others:
        pytest.skip("one OpenCL device here: no other to name")
    array = cl_array.to_device(queue, _random(32))
    for named in (others[0], "host"):
        cipher = aescl.new(bytes(16), aescl.MODE_ECB, device=named)
        with pytest.raises(ValueError, match=re.escape(f"the input is on {device.name}")):
            cipher.encrypt(array)
        with pytest.raises(ValueError, match=re.escape(f"the input is on {device.name}")):
            aescl.chunked.encrypt(bytes(32), array, device=named)


@pytest.mark.skipif(not aescl.devices.cuda_devices(),
                    reason="no CUDA GPU: a cipher for 'cuda' is refused when it is made "
                           "(tests/test_teams.py)")
def test_a_cipher_made_for_the_cuda_engine_refuses_pyopencl_arrays(queue):
    array = cl_array.to_device(queue, _random(32))
    before = array.get()
    for spec in ("cuda", "cuda:0"):
        cipher = aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8), device=spec)
        with pytest.raises(ValueError, match=f"made for '{spec}'"):
            cipher.encrypt(array, output=array)
        with pytest.raises(ValueError, match=f"made for '{spec}'"):
            aescl.chunked.encrypt(bytes(32), array, device=spec)
    assert np.array_equal(array.get(), before)


# ---- GCM on arrays (aescl.modes.ArrayGcmCipher over the OpenCL engine) ---------------

@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"aes{8 * len(k)}")
@pytest.mark.parametrize("nonce", [b"\x07" * 12, b"\x09" * 16], ids=["96-bit", "128-bit"])
def test_gcm_on_arrays_matches_pycryptodome_across_any_cut(queue, key, nonce):
    # Long enough for several GHASH segments, the last one short, folded on the device.
    data = _random(300_011, seed=4)
    aad = b"associated data of 29 bytes.."
    array = cl_array.to_device(queue, data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce)
    cipher.update(aad[:10]).update(aad[10:])
    cuts = [0, 3, 16, 29, 40_003, 300_011]
    pieces = [cipher.encrypt(array[lo:hi]) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    tag = cipher.digest()
    reference = Reference.new(key, Reference.MODE_GCM, nonce=nonce)
    reference.update(aad)
    expected, expected_tag = reference.encrypt_and_digest(data.tobytes())
    assert b"".join(piece.get().tobytes() for piece in pieces) == expected
    assert tag == expected_tag

    sealed = cl_array.to_device(queue, np.frombuffer(expected, np.uint8))
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce)
    opener.update(aad)
    assert opener.decrypt_and_verify(sealed, tag, output=sealed) is None  # in place
    assert np.array_equal(sealed.get(), data)


def test_gcm_on_arrays_releases_nothing_on_a_wrong_tag(queue):
    key, nonce = bytes(16), bytes(12)
    plaintext = _random(1000, seed=5)
    sealed, tag = Reference.new(key, Reference.MODE_GCM, nonce=nonce).encrypt_and_digest(
        plaintext.tobytes())
    array = cl_array.to_device(queue, np.frombuffer(sealed, np.uint8))
    for output in (cl_array.zeros(queue, 1000, np.uint8), array):  # apart, and in place
        opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce)
        with pytest.raises(aescl.AuthenticationError):
            opener.decrypt_and_verify(array, bytes([tag[0] ^ 1]) + tag[1:], output=output)
        assert output.get().tobytes() in (bytes(1000), sealed)


def test_one_gcm_message_is_all_host_data_or_all_device_arrays(queue):
    cipher = aescl.new(bytes(16), aescl.MODE_GCM, nonce=bytes(12))
    cipher.encrypt(cl_array.to_device(queue, _random(32)))
    with pytest.raises(TypeError, match="text is in pyopencl arrays"):
        cipher.encrypt(b"more on the host")


# ---- the chunked format on arrays (aescl/engines/programs/device_chunks.py) -------------------

SIZES = [0, 5, 16384, 3 * 16384 + 100, 5 * 16384]


@pytest.mark.parametrize("batch", [2, 4096], ids=["batches-of-2", "one-batch"])
@pytest.mark.parametrize("offset", [0, 3], ids=["aligned", "at-an-odd-offset"])
def test_chunked_on_arrays_is_byte_identical_to_the_host_path(queue, monkeypatch, batch,
                                                              offset):
    """Aligned arrays are sealed and opened straight between the layouts; an array at an
    offset no buffer starts at goes through scratch memory (device_chunks._Staging)."""
    from aescl.engines.programs import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", batch)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", batch)
    key, salt = bytes(range(32)), bytes(range(24))
    for size in SIZES:
        data = _random(size + offset, seed=size)
        message = cl_array.to_device(queue, data)[offset:]
        sealed = aescl.chunked.encrypt(key, message, b"ctx", salt=salt)
        assert isinstance(sealed, cl_array.Array)
        expected = aescl.chunked.encrypt(key, data[offset:].tobytes(), b"ctx", salt=salt,
                                         device="host")
        assert sealed.get().tobytes() == expected
        opened = aescl.chunked.decrypt(key, sealed, b"ctx")
        assert opened.get().tobytes() == data[offset:].tobytes()
        # A sealed message uploaded as it is: its chunks lie after a 56-byte header.
        uploaded = cl_array.to_device(queue, np.frombuffer(expected, np.uint8))
        assert aescl.chunked.decrypt(key, uploaded, b"ctx").get().tobytes() == \
            data[offset:].tobytes()


def test_arrays_from_a_memory_pool_take_every_call(queue):
    """Arrays a pyopencl MemoryPool serves (its buffers are not cl.Buffer and have no
    sub-regions, and are larger than asked): CTR, GCM and the chunked format, whose
    results come from the same pool."""
    import pyopencl.tools as cl_tools

    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    key, nonce = bytes(range(32)), bytes(range(12))
    data = _random(3 * 16384 + 100, seed=7)
    array = cl_array.to_device(queue, data, allocator=pool)
    assert not isinstance(array.base_data, cl.Buffer)
    ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(array[5:])
    assert ctr.get().tobytes() == Reference.new(key, Reference.MODE_CTR, nonce=nonce[:8]) \
        .encrypt(data[5:].tobytes())
    sealed, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(array)
    assert (sealed.get().tobytes(), tag) == Reference.new(key, Reference.MODE_GCM,
                                                          nonce=nonce).encrypt_and_digest(
        data.tobytes())
    chunks = aescl.chunked.encrypt(key, array)
    assert aescl.chunked.decrypt(key, chunks).get().tobytes() == data.tobytes()
    assert aescl.chunked.decrypt(key, chunks.get().tobytes(), device="host") == data.tobytes()


def _table_buffers(tables: dict) -> list:
    """One base's kept table buffers (runtime.ghash_tables)."""
    return [value[0] if isinstance(value, tuple) else value for value in tables.values()]


def test_ghash_tables_are_kept_for_the_keys_used_last(queue):
    """Each GCM message makes a new engine: the GHASH tables of H stay with the array's
    runtime for the next message under that key, for the last eight bases; an evicted
    base's buffers go back to the runtime's scratch (a free waits, in NVIDIA's OpenCL,
    for the whole device), from which the next tables may take them."""
    from aescl import ghash
    from aescl.engines.opencl.arrays import device_of
    from aescl.engines.opencl.runtime import device_runtime

    array = cl_array.to_device(queue, _random(4096, seed=3))
    here = device_runtime(device_of(array), queue.context)
    keys = [bytes([k]) * 16 for k in range(9)]
    first = None
    for key in keys:
        aescl.new(key, aescl.MODE_GCM, nonce=bytes(12)).encrypt_and_digest(array)
        if first is None:
            first = _table_buffers(here.ghash_tables[ghash.hash_subkey(key)])
    kept = here.ghash_tables
    assert list(kept) == [ghash.hash_subkey(key) for key in keys[1:]]
    # (``first`` holds the buffers themselves: a handle freed could come back as another's)
    reused = {buffer.int_ptr for tables in kept.values() for buffer in _table_buffers(tables)}
    spare = {buffer.int_ptr for buffers in here.spare.values() for buffer in buffers}
    assert first and {buffer.int_ptr for buffer in first} <= reused | spare
    again = aescl.new(keys[3], aescl.MODE_GCM, nonce=bytes(12)).encrypt_and_digest(array)
    assert again[1] == Reference.new(keys[3], Reference.MODE_GCM, nonce=bytes(12)) \
        .encrypt_and_digest(array.get().tobytes())[1]
    assert list(kept)[-1] == ghash.hash_subkey(keys[3])


@pytest.mark.parametrize("fused", ["1", "0"], ids=["fused", "in-three-launches"])
def test_chunked_on_arrays_with_ghash_by_tables_fused_or_not(queue, monkeypatch, fused):
    """GHASH by position tables (GPUs; a CPU held to the T-table rounds): CTR, GHASH and
    the tags of a batch in one launch (aes_gcm.cl's gcm_crypt_hash, several messages
    to a work-group where they fit) or in three, byte-identical to the host both ways,
    between the layouts and through scratch; a damaged chunk or tag names its chunk."""
    from aescl.engines.opencl.gcm_kernels import GcmKernels
    from aescl.engines.programs import device_chunks

    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")
    monkeypatch.setenv("AESCL_GCM_FUSED", fused)
    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", 2)
    key, salt = bytes(range(32)), bytes(range(24))
    device = next(d for d in aescl.devices() if d.is_opencl and d.cl_device == queue.device)
    assert GcmKernels(key, device, "host").fused  # (the kernel is there either way)
    for size in SIZES:
        for offset in (0, 3):
            data = _random(size + offset, seed=size + offset)
            message = cl_array.to_device(queue, data)[offset:]
            expected = aescl.chunked.encrypt(key, data[offset:].tobytes(), salt=salt,
                                             device="host")
            sealed = aescl.chunked.encrypt(key, message, salt=salt)
            assert sealed.get().tobytes() == expected, (size, offset)
            assert aescl.chunked.decrypt(key, sealed).get().tobytes() == \
                data[offset:].tobytes(), (size, offset)
    sealed = aescl.chunked.encrypt(key, _random(4 * 16384 + 7).tobytes(), device="host")
    for lead in (5, 16384, 16384 + 15):  # in chunk 3, in its tag (the second batch's)
        tampered = bytearray(sealed)
        tampered[56 + 3 * 16400 + lead] ^= 1
        with pytest.raises(aescl.AuthenticationError, match="chunk 3"):
            aescl.chunked.decrypt(key, cl_array.to_device(queue,
                                                          np.frombuffer(tampered, np.uint8)))
    final = bytearray(sealed)
    final[-20] ^= 1  # the final chunk's last byte
    with pytest.raises(aescl.AuthenticationError, match="chunk 4"):
        aescl.chunked.decrypt(key, cl_array.to_device(queue, np.frombuffer(final, np.uint8)))


@pytest.mark.parametrize("fused", ["1", "0"], ids=["fused", "in-three-launches"])
def test_an_opening_names_the_first_damaged_chunk_wherever_its_tag_is_compared(
        queue, monkeypatch, fused):
    """Opening compares every chunk's tag on the device: in the fused kernel as it makes
    it, or by gathering them all; and an empty final chunk's (a message of whole chunks)
    on the host against the received one. The first damaged chunk is named wherever
    the damage is: two batches, the ciphertext where a kernel takes it (offset 0) or
    staged (offset 3), the empty final chunk's tag, or a whole chunk cut off."""
    from aescl.engines.programs import device_chunks

    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")
    monkeypatch.setenv("AESCL_GCM_FUSED", fused)
    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", 2)
    key = bytes(range(32))
    data = _random(3 * 16384)  # (three whole chunks: the final one is empty)
    sealed = aescl.chunked.encrypt(key, data.tobytes(), device="host")

    def opened(ciphertext: bytes, offset: int) -> Any:
        array = cl_array.to_device(queue, np.frombuffer(bytes(offset) + ciphertext, np.uint8))
        return aescl.chunked.decrypt(key, array[offset:])

    for offset in (0, 3):
        assert opened(sealed, offset).get().tobytes() == data.tobytes()
        # (chunk, byte of its 16,400) damaged, and the chunk named: a tag in the second
        # batch; two chunks in two batches; a tag in the first batch and a later chunk
        for damage, chunk in (([(2, 16384 + 15)], 2), ([(1, 2), (2, 5)], 1),
                              ([(2, 9), (0, 16390)], 0)):
            damaged = bytearray(sealed)
            for index, at in damage:
                damaged[56 + index * 16400 + at] ^= 0x80
            with pytest.raises(aescl.AuthenticationError, match=f"chunk {chunk} .*modified"):
                opened(bytes(damaged), offset)
        final = bytearray(sealed)
        final[-1] ^= 1  # the empty final chunk's tag
        with pytest.raises(aescl.AuthenticationError, match="chunk 3 .*truncated"):
            opened(bytes(final), offset)
        with pytest.raises(aescl.AuthenticationError, match="chunk 2 .*truncated"):
            opened(sealed[: 56 + 2 * 16400] + sealed[-16:], offset)  # chunk 2 cut off


def test_an_opening_from_arrays_a_kernel_takes_launches_only_the_fused_kernel(
        queue, monkeypatch):
    """With the fused kernel, a batch's J0s and lengths are made and its tags compared
    inside the one launch, and the verdict word it lowers comes preset from the call
    before: an opening's commands on the device are its launches, then the empty final
    chunk's received tag copied beside the verdict and both read back at once (each
    command before the launch is host time in which the device idles; after it, device
    time). A failed opening does not give its verdict back."""
    from aescl.engines.opencl import runtime as opencl_runtime
    from aescl.engines.programs import device_chunks

    # Batches of as few chunks as leave the next batch where a kernel takes it (else it
    # is copied through scratch), three of them.
    align = queue.device.mem_base_addr_align // 8
    per_batch = align // math.gcd(align, 16400)
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", per_batch)
    key = bytes(range(32))
    data = _random((2 * per_batch + 1) * 16384)
    sealed = aescl.chunked.encrypt(key, cl_array.to_device(queue, data))
    assert aescl.chunked.decrypt(key, sealed).get().tobytes() == data.tobytes()
    commands: list[str] = []

    def recorded(name: str) -> None:
        enqueue = getattr(cl, name)

        def record(*args: Any, **kwargs: Any) -> Any:
            commands.append(args[1].function_name if name == "enqueue_nd_range_kernel"
                            else name)
            return enqueue(*args, **kwargs)
        monkeypatch.setattr(cl, name, record)

    for name in ("enqueue_nd_range_kernel", "enqueue_fill_buffer", "enqueue_copy"):
        recorded(name)
    assert aescl.chunked.decrypt(key, sealed).get().tobytes() == data.tobytes()
    # (the header's read first; the result's read by .get() last)
    assert commands == ["enqueue_copy"] + ["gcm_crypt_hash"] * 3 + ["enqueue_copy"] * 3
    device = next(d for d in aescl.devices() if d.is_opencl and d.cl_device == queue.device)
    verdicts = opencl_runtime.device_runtime(device, queue.context).verdicts
    kept = len(verdicts)
    for at, chunk, left in ((-1, 2 * per_batch + 1, kept), (56 + 2 * 16400 + 5, 2, kept - 1)):
        damaged = sealed.get()
        damaged[at] ^= 1  # the empty final chunk's tag (compared on the host), chunk 2
        with pytest.raises(aescl.AuthenticationError, match=f"chunk {chunk}"):
            aescl.chunked.decrypt(key, cl_array.to_device(queue, damaged))
        assert len(verdicts) == left


def test_threads_opening_arrays_in_one_context_each_get_their_own_verdict(queue):
    """Four threads, each with its queue in one context, open messages in turn intact and
    with a chunk damaged: each intact one comes back as it was sealed and each damaged
    one names its chunk (a verdict word a failed opening lowered never serves a later
    one, and no two openings share one)."""
    from concurrent.futures import ThreadPoolExecutor

    key = bytes(range(32))
    context = queue.context

    def opener(worker: int) -> list[str]:
        mine = cl.CommandQueue(context)
        wrong = []
        for n in range(6):
            data = _random(3 * 16384 + 100 * worker + n, seed=8 * worker + n)
            sealed = bytearray(aescl.chunked.encrypt(key, data.tobytes(), device="host"))
            damaged = n % 2 == 1
            if damaged:
                sealed[56 + (n % 3) * 16400 + 9] ^= 4
            array = cl_array.to_device(mine, np.frombuffer(sealed, np.uint8))
            try:
                opened = aescl.chunked.decrypt(key, array).get().tobytes()
            except aescl.AuthenticationError as error:
                if not damaged or f"chunk {n % 3} " not in str(error):
                    wrong.append(f"worker {worker}, message {n}: {error}")
                continue
            if damaged or opened != data.tobytes():
                wrong.append(f"worker {worker}, message {n}: opened wrongly")
        return wrong

    with ThreadPoolExecutor(4) as pool:
        assert [w for found in pool.map(opener, range(4)) for w in found] == []


def test_threads_a_device_each_run_their_arrays_at_once(monkeypatch):
    """Issue 57: one thread a device, each encrypting arrays in a context of its own
    device, enqueue their work at once (a device's lock, no lock of the process): the
    first two OpenCL devices (PoCL and Oclgrind here; two GPUs where there are). Each
    call's work waits, inside its device's lock, at a barrier of both threads, which
    neither passes until both are there: had one device's call waited for the other's,
    it would time out."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from aescl.engines.opencl import arrays

    devices = [d for d in aescl.devices() if d.is_opencl][:2]
    if len(devices) < 2:
        pytest.skip("fewer than two OpenCL devices here")
    barrier = threading.Barrier(len(devices), timeout=60)
    real = arrays.run_blocks

    def together(*args, **kwargs):
        barrier.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(arrays, "run_blocks", together)
    key, nonce, data = KEYS[0], b"\x02" * 8, _random(1 << 16)

    def encrypt(device: aescl.Device) -> bytes:
        queue = cl.CommandQueue(cl.Context([device.cl_device]))
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(
            cl_array.to_device(queue, data))
        assert sealed.context == queue.context
        return sealed.get().tobytes()

    with ThreadPoolExecutor(len(devices)) as pool:
        results = list(pool.map(encrypt, devices))
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data.tobytes())
    assert results == [expected] * len(devices)


def test_the_fused_gcm_setting_is_0_or_1(monkeypatch):
    from aescl.engines.programs.device_chunks import fused_gcm

    for value, fused in (("", True), ("1", True), (" 0 ", False)):
        monkeypatch.setenv("AESCL_GCM_FUSED", value)
        assert fused_gcm() is fused
    monkeypatch.setenv("AESCL_GCM_FUSED", "no")
    with pytest.raises(ValueError, match="AESCL_GCM_FUSED must be 0 or 1, not 'no'"):
        fused_gcm()


def test_chunked_sealing_is_ordered_after_the_producer_and_before_what_follows(queue):
    """Sealing returns once enqueued: it runs after the work queued on the input's queue
    (a fill not yet waited for), and pyopencl work on the input queued after it (another
    fill) waits for it, through the event it adds to both arrays."""
    key, salt = bytes(range(32)), bytes(range(24))
    message = cl_array.empty(queue, 3 * 16384 + 9, np.uint8)
    message.fill(np.uint8(7))
    sealed = aescl.chunked.encrypt(key, message, salt=salt)
    message.fill(np.uint8(1))
    assert sealed.get().tobytes() == aescl.chunked.encrypt(
        key, bytes([7]) * (3 * 16384 + 9), salt=salt, device="host")
    assert message.get().tobytes() == bytes([1]) * (3 * 16384 + 9)


def test_arrays_a_memory_pool_serves_again_wait_for_the_sealing_that_used_them(queue):
    """Sealing returns before its work is done (on aescl's queue). An input or a result
    dropped as it returns goes back to the caller's memory pool, which serves the same
    memory to the next array of its size: what that array is written with on the
    caller's queue must not reach the sealing, and the sealing must not write into it."""
    import pyopencl.tools as cl_tools

    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    key, salt, size = bytes(range(32)), bytes(range(24)), (1 << 20) + 9
    for seed in range(3):
        data = _random(size, seed=seed)
        message = cl_array.to_device(queue, data, allocator=pool)
        dropped = aescl.chunked.encrypt(key, message, salt=salt)
        del dropped  # (the pool's again, where nothing holds it, while the sealing runs)
        zeros = cl_array.to_device(queue, np.zeros(aescl.chunked.sealed_size(size), np.uint8),
                                   allocator=pool)
        sealed = aescl.chunked.encrypt(key, message, salt=salt)
        del message
        ones = cl_array.to_device(queue, np.ones(size, np.uint8), allocator=pool)
        sealed.finish()  # (and what aescl's queue ran before it)
        assert sealed.get().tobytes() == aescl.chunked.encrypt(key, data.tobytes(), salt=salt,
                                                               device="host")
        assert not zeros.get().any() and ones.get().all()


def test_chunked_calls_in_a_row_reuse_scratch_only_once_its_work_is_done(queue):
    """Sealing returns before its work is done and lets go of its scratch only once a
    later call finds that work complete (arrays._park): the scratch then serves later
    calls (kernels.DeviceRuntime.take_scratch). Eight messages sealed back to back under
    different salts, none waited for, each come out as the host seals it."""
    from aescl.engines.opencl import runtime as opencl_runtime

    key = bytes(range(32))
    messages = [cl_array.to_device(queue, _random(2 * 16384 + 5 * n, seed=n)) for n in range(8)]
    salts = [bytes([n]) * 24 for n in range(8)]
    sealed = [aescl.chunked.encrypt(key, m, salt=s) for m, s in zip(messages, salts, strict=True)]
    for message, salt, result in zip(messages, salts, sealed, strict=True):
        assert result.get().tobytes() == aescl.chunked.encrypt(
            key, message.get().tobytes(), salt=salt, device="host")
    # Their work is done now (read back above): the next call lets go of what it held,
    # however busy the machine was while they ran.
    aescl.chunked.encrypt(key, messages[0], salt=salts[0]).finish()
    runtime = opencl_runtime.device_runtime(next(d for d in aescl.devices()
                                   if d.is_opencl and d.cl_device == queue.device),
                              queue.context)
    assert runtime.spare  # (sizes of scratch given back; a later call may hold it again)


def test_opening_returns_with_its_work_done_and_leaves_nothing_to_wait_for(queue):
    """chunked.decrypt waits for its tags, so when it returns its work is done: its
    scratch is given back at once, and neither array gets an event of it (a marker,
    events and parking cost host time before the next call's first launch, in which
    the device idles: docs/benchmarks, 2026-11-26). A later call reuses the scratch."""
    from aescl.engines.opencl import arrays
    from aescl.engines.opencl import runtime as opencl_runtime

    key = bytes(range(32))
    message = cl_array.to_device(queue, _random(3 * 16384 + 9))
    sealed = aescl.chunked.encrypt(key, message)
    sealed.finish()
    before = list(sealed.events)
    runtime = opencl_runtime.device_runtime(next(d for d in aescl.devices()
                                   if d.is_opencl and d.cl_device == queue.device),
                              queue.context)
    for _ in range(2):
        opened = aescl.chunked.decrypt(key, sealed)
        assert opened.events == [] and sealed.events == before
        assert arrays._parked == [] and runtime.spare
        assert opened.get().tobytes() == message.get().tobytes()


def test_scratch_an_earlier_call_wrote_leaves_no_trace_in_a_later_one(queue):
    """Scratch memory comes back to later calls as the earlier ones left it
    (device_chunks.ChunkKernels.scratch): here every spare buffer of a final chunk's
    slot size is all ones when a call takes it. GHASH reads the slot's padding as zeros,
    so sealed and opened, each message is still byte-identical to the host's."""
    from aescl.engines.opencl import runtime as opencl_runtime

    device = next(d for d in aescl.devices() if d.is_opencl and d.cl_device == queue.device)
    runtime = opencl_runtime.device_runtime(device, queue.context)

    def leave_ones_in_spare_slots() -> None:
        taken = [runtime.take_scratch(16384) for _ in range(8)]
        for buffer in taken:
            cl.enqueue_fill_buffer(runtime.queue, buffer, np.uint8(0xFF), 0, buffer.size)
        runtime.queue.finish()
        runtime.give_back_scratch(taken)

    key, salt = bytes(range(32)), bytes(range(24))
    for size in (3, 16384 + 1000, 2 * 16384 + 16383):
        data = _random(size, seed=size)
        expected = aescl.chunked.encrypt(key, data.tobytes(), salt=salt, device="host")
        leave_ones_in_spare_slots()
        sealed = aescl.chunked.encrypt(key, cl_array.to_device(queue, data), salt=salt)
        assert sealed.get().tobytes() == expected
        uploaded = cl_array.to_device(queue, np.frombuffer(expected, np.uint8))
        leave_ones_in_spare_slots()
        assert aescl.chunked.decrypt(key, uploaded).get().tobytes() == data.tobytes()


def test_decrypt_range_on_arrays_opens_only_the_range_and_matches_the_host(queue):
    """Only the chunks that hold the range are opened (a damaged chunk outside it goes
    unnoticed, one inside raises), the end is always checked, and every range gives
    what the host path gives."""
    import random

    key = bytes(range(32))
    message = _random(4 * 16384 + 1234, seed=9).tobytes()
    sealed = aescl.chunked.encrypt(key, message, device="host")
    on_device = cl_array.to_device(queue, np.frombuffer(sealed, np.uint8))
    rng = random.Random(3)
    ranges = [(0, 0), (0, 1), (16383, 2), (16384, 16384), (3 * 16384 + 5, 10**6),
              (len(message), 5), (len(message) + 100, 5), (len(message) - 1, 1)]
    ranges += [(rng.randrange(len(message)), rng.randrange(3 * 16384)) for _ in range(6)]
    for offset, length in ranges:
        got = aescl.chunked.decrypt_range(key, on_device, offset, length)
        assert isinstance(got, cl_array.Array)
        assert got.get().tobytes() == message[offset : offset + length], (offset, length)
    damaged = bytearray(sealed)
    damaged[56 + 2 * 16400 + 1] ^= 1
    damaged_array = cl_array.to_device(queue, np.frombuffer(damaged, np.uint8))
    assert aescl.chunked.decrypt_range(key, damaged_array, 0, 16384).get().tobytes() == \
        message[:16384]
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        aescl.chunked.decrypt_range(key, damaged_array, 2 * 16384, 1)
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt_range(key, on_device[: 56 + 4 * 16400], 0, 1)


def test_chunked_on_arrays_rejects_what_the_host_path_rejects(queue, monkeypatch):
    from aescl.engines.programs import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", 2)
    key = bytes(range(32))
    sealed = aescl.chunked.encrypt(key, _random(4 * 16384 + 7).tobytes(), device="host")
    align = queue.device.mem_base_addr_align // 8
    for where, lead in (("chunk", 5), ("tag", 16384)):  # of chunk 3, in the second batch
        tampered = bytearray(sealed)
        tampered[56 + 3 * 16400 + lead] ^= 1
        # As uploaded (chunks after the 56-byte header), and with the chunks placed
        # where a buffer may start (opened straight from the sealed layout).
        placed = bytes(align - 56 % align) + bytes(tampered)
        for arrays in (cl_array.to_device(queue, np.frombuffer(tampered, np.uint8)),
                       cl_array.to_device(queue, np.frombuffer(placed, np.uint8))[
                           align - 56 % align:]):
            with pytest.raises(aescl.AuthenticationError, match="chunk 3") as caught:
                aescl.chunked.decrypt(key, arrays)
            assert caught.value.chunk == 3, where
    tampered = bytearray(sealed)
    for chunk in (3, 1):  # (compared on the device: the first of them is named)
        tampered[56 + chunk * 16400 + 9] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 1") as caught:
        aescl.chunked.decrypt(key, cl_array.to_device(queue, np.frombuffer(tampered, np.uint8)))
    assert caught.value.chunk == 1
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt(key, cl_array.to_device(
            queue, np.frombuffer(sealed[: 56 + 4 * 16400], np.uint8)))
    with pytest.raises(aescl.WrongKeyError):
        aescl.chunked.decrypt(bytes(32), cl_array.to_device(queue, np.frombuffer(sealed,
                                                                                  np.uint8)))


def test_chunked_output_takes_the_result_in_the_arrays_own_bytes(queue):
    """``output=`` on chunked calls: the sealed message and the plaintext go into the
    caller's arrays (any dtype, taken as its bytes) and None is returned. A fresh array
    has its chunks after the 56-byte header, where no sub-buffer starts (the scratch
    route); a sealed array that aescl returned lies right for the one-pass route."""
    key, salt = bytes(range(32)), bytes(range(24))
    data = _random(3 * 16384 + 100)
    expected = aescl.chunked.encrypt(key, data.tobytes(), b"ctx", salt=salt, device="host")
    message = cl_array.to_device(queue, data)
    fresh = cl_array.to_device(queue, np.full(len(expected), 0xEE, np.uint8))
    placed = aescl.chunked.encrypt(key, message, b"ctx", salt=bytes(24))
    for output in (fresh, placed):
        assert aescl.chunked.encrypt(key, message, b"ctx", salt=salt, output=output) is None
        assert output.get().tobytes() == expected
    whole = data[: len(data) // 4 * 4]  # (opened into float32: 4 bytes an element)
    sealed = aescl.chunked.encrypt(key, cl_array.to_device(queue, whole), b"ctx")
    for plaintext in (cl_array.to_device(queue, np.full(len(whole), 0xEE, np.uint8)),
                      cl_array.to_device(queue, np.full(len(whole) // 4, -1.5, np.float32))):
        assert aescl.chunked.decrypt(key, sealed, b"ctx", output=plaintext) is None
        assert plaintext.get().tobytes() == whole.tobytes()


def test_chunked_output_is_zeroed_on_a_failed_tag(queue):
    key = bytes(range(32))
    data = _random(5 * 16384 + 3)
    damaged = bytearray(aescl.chunked.encrypt(key, data.tobytes(), device="host"))
    damaged[56 + 4 * 16400 + 20] ^= 1
    output = cl_array.to_device(queue, np.full(len(data), 0xEE, np.uint8))
    with pytest.raises(aescl.AuthenticationError, match="chunk 4"):
        aescl.chunked.decrypt(key, cl_array.to_device(queue, np.frombuffer(damaged, np.uint8)),
                              output=output)
    assert not output.get().any()


def test_a_chunked_output_that_does_not_fit_is_refused_before_any_work(queue):
    key = bytes(range(32))
    data = _random(2 * 16384 + 5)
    message = cl_array.to_device(queue, data)
    size = len(data) + 56 + 3 * 16
    sealed = aescl.chunked.encrypt(key, message)
    other_context = cl.CommandQueue(cl.Context([queue.device]))
    both = cl_array.to_device(queue, np.zeros(size + len(data), np.uint8))
    untouched = np.full(size, 0xEE, np.uint8)
    for output, error, match in (
            (cl_array.to_device(queue, untouched[:-1]), ValueError, "bytes"),
            (untouched.copy(), TypeError, "pyopencl array"),
            (cl_array.to_device(other_context, untouched), ValueError, "context"),
            (both[: size], None, None)):
        if error is None:  # (the input lies in the second part: apart, so it is taken)
            both[size:] = message
            aescl.chunked.encrypt(key, both[size:], output=output)
            assert aescl.chunked.decrypt(key, output).get().tobytes() == data.tobytes()
            continue
        with pytest.raises(error, match=match):
            aescl.chunked.encrypt(key, message, output=output)
        got = output if isinstance(output, np.ndarray) else output.get()
        assert (got == 0xEE).all()
    with pytest.raises(ValueError, match="overlaps"):  # opened over its own ciphertext
        aescl.chunked.decrypt(key, sealed, output=sealed[56 : 56 + len(data)])
    assert aescl.chunked.decrypt(key, sealed).get().tobytes() == data.tobytes()


def test_gcm_call_order_on_arrays_is_pycryptodomes_and_a_failed_verify_releases_no_tag(
        queue):
    """On pyopencl arrays ``digest()`` after a failed verify returned the valid tag of the
    attacker's ciphertext; every sequence of up to three calls against pycryptodome's."""
    def to_text(data: bytes) -> Any:
        return cl_array.to_device(queue, np.frombuffer(data, np.uint8))

    def to_bytes(value: Any) -> bytes:
        return value if isinstance(value, bytes) else value.get().tobytes()

    for sequence in gcm_call_order.sequences(3):
        assert gcm_call_order.run(sequence, None, to_text, to_bytes) == [], sequence


@pytest.mark.parametrize("mode", ["ecb", "ctr", "gcm"])
def test_an_output_array_that_partly_overlaps_the_input_is_refused(queue, mode):
    key = bytes(16)
    memory = cl_array.to_device(queue, _random(4096 + 64))
    before = memory.get()
    make = {"ecb": lambda: aescl.new(key, aescl.MODE_ECB),
            "ctr": lambda: aescl.new(key, aescl.MODE_CTR, nonce=bytes(8)),
            "gcm": lambda: aescl.new(key, aescl.MODE_GCM, nonce=bytes(12))}[mode]
    for shift in (-16, 16, 32):
        source, output = memory[32 : 32 + 4096], memory[32 + shift : 32 + shift + 4096]
        with pytest.raises(ValueError, match="partly overlaps"):
            make().encrypt(source, output=output)
    assert np.array_equal(memory.get(), before)
    make().encrypt(memory[32 : 32 + 4096], output=memory[32 : 32 + 4096])  # in place: fine


def test_arrays_over_a_sub_buffer_and_their_slices(queue):
    """A slice of an array over a sub-buffer failed with INVALID_MEM_OBJECT (a traceback):
    OpenCL makes no sub-buffer of a sub-buffer. And two sub-buffers of one buffer that
    overlap are one memory: an output over the input's is refused."""
    buffer = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 1 << 16)
    array = cl_array.Array(queue, 1 << 15, np.uint8, data=buffer.get_sub_region(4096, 1 << 15))
    data = _random(1 << 15, seed=9)
    array.set(data)
    key, nonce = bytes(range(16)), bytes(8)
    for lo, hi in ((4096, 8192), (7, 8192), (4096, 4096 + 1000)):
        got = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(array[lo:hi]).get()
        assert got.tobytes() == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(
            data[lo:hi].tobytes())
    gcm, tag = aescl.new(key, aescl.MODE_GCM, nonce=bytes(12)).encrypt_and_digest(
        array[4096:9000])
    assert (gcm.get().tobytes(), tag) == Reference.new(
        key, Reference.MODE_GCM, nonce=bytes(12)).encrypt_and_digest(data[4096:9000].tobytes())
    overlapping = cl_array.Array(queue, 8192, np.uint8, data=buffer.get_sub_region(0, 8192))
    with pytest.raises(ValueError, match="partly overlaps"):
        aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(array[:8192], output=overlapping)


@pytest.mark.parametrize("cuts", [[0, 3, 1 << 20, (1 << 20) + 21], [0, 256, 4096 + 7]])
def test_long_aad_with_text_in_arrays_is_hashed_on_the_device_and_matches(queue, cuts):
    """AAD given with text in device arrays was hashed a block at a time in Python (about
    4 MB/s: a minute per 256 MiB); long runs now go through the device's GHASH."""
    key, nonce = bytes(range(32)), bytes(12)
    aad = _random(cuts[-1], seed=11).tobytes()
    text = _random(5000, seed=12)
    ours = aescl.new(key, aescl.MODE_GCM, nonce=nonce)
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        ours.update(aad[lo:hi])
    sealed, tag = ours.encrypt_and_digest(cl_array.to_device(queue, text))
    expected = Reference.new(key, Reference.MODE_GCM, nonce=nonce).update(aad) \
        .encrypt_and_digest(text.tobytes())
    assert (sealed.get().tobytes(), tag) == expected


def test_a_callers_context_is_let_go_once_newer_ones_come_and_serves_again(device):
    """aescl keeps what it builds in a caller's context (its runtime: programs, kernels,
    scratch, GCM's launch shapes) for the last few contexts only: each NVIDIA OpenCL
    context holds device memory, and a caller that makes a context per job filled the
    GPU (CL_OUT_OF_HOST_MEMORY on a 4-GPU host under pytest -n 8). A context used again
    after that gets a new runtime and the same bytes."""
    import gc
    import weakref

    from aescl.engines.opencl import runtime

    key, nonce, salt = bytes(range(32)), b"\x07" * 12, b"\x08" * 24
    data = _random(50_000, seed=11)

    def seal(queue: Any) -> bytes:  # GCM and the chunked format on arrays in its context
        array = cl_array.to_device(queue, data)
        sealed, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(array)
        return sealed.get().tobytes() + tag + aescl.chunked.encrypt(
            key, array, salt=salt).get().tobytes()

    first = cl.CommandQueue(cl.Context([device.cl_device]))
    expected = seal(first)
    kept = weakref.ref(runtime.device_runtime(device, first.context))
    for _ in range(runtime._CALLER_RUNTIMES_KEPT):
        assert seal(cl.CommandQueue(cl.Context([device.cl_device]))) == expected
    gc.collect()
    assert kept() is None
    assert seal(first) == expected
    assert runtime.device_runtime(device, first.context) is not runtime.device_runtime(device)
