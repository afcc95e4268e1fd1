"""aescl/engines/cuda/arrays.py: CUDA device arrays (torch, CuPy, Numba, JAX, DLPack-only
objects) in ECB, CTR, GCM and the chunked format, on the producer's stream, and their
lifetime (docs/gpu-arrays.md). They need a CUDA GPU and skip, visibly, elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from Crypto.Cipher import AES as Reference
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as PycaAESGCM
from cuda_arrays import (
    CHUNK_SIZES,
    KEY_BITS,
    SPIN,
    LibraryStream,
    check_driver,
    cuda_gpu_present,
    libraries,
    needs_gpu,
    to_gpu,
    to_host,
    to_jax,
)

import aescl


@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("size", [16, 4096, (1 << 20) + 48])
def test_ecb_on_device_arrays_matches_pycryptodome(library, bits, size):
    key, data = os.urandom(bits // 8), os.urandom(size)
    gpu = to_gpu(library, data)
    sealed = aescl.new(key, aescl.MODE_ECB).encrypt(gpu)
    assert type(sealed) is type(gpu)
    assert to_host(sealed) == Reference.new(key, Reference.MODE_ECB).encrypt(data)
    opened = aescl.new(key, aescl.MODE_ECB).decrypt(sealed)
    assert to_host(opened) == data


@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
def test_ctr_calls_of_any_length_continue_the_stream(library, bits):
    key, nonce = os.urandom(bits // 8), os.urandom(8)
    sizes = [5, 16, 27, 4096, 1, (1 << 20) + 3, 0, 33]
    data = os.urandom(sum(sizes))
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce)
    out, at = b"", 0
    for size in sizes:
        out += to_host(cipher.encrypt(to_gpu(library, data[at : at + size])))
        at += size
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    assert out == expected


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_ctr_in_place_and_at_an_odd_offset(library):
    key, nonce, data = os.urandom(16), os.urandom(12), os.urandom(100_003)
    gpu = to_gpu(library, data)
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=2**32 - 3)
    assert cipher.encrypt(gpu, output=gpu) is None  # in place, across a 32-bit carry
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce,
                             initial_value=2**32 - 3).encrypt(data)
    assert to_host(gpu) == expected
    # A slice that starts 3 bytes into the array: not 16-byte aligned.
    odd = to_gpu(library, b"\0\0\0" + data)[3:]
    result = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=2**32 - 3).encrypt(odd)
    assert to_host(result) == expected


@needs_gpu
def test_other_dtypes_are_taken_as_their_bytes():
    torch = pytest.importorskip("torch")
    key, nonce = os.urandom(32), os.urandom(8)
    values = torch.arange(1000, dtype=torch.float32, device="cuda")
    sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(values)
    assert sealed.dtype == torch.float32 and sealed.shape == values.shape
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(
        values.cpu().numpy().tobytes())
    assert sealed.cpu().numpy().tobytes() == expected


@needs_gpu
def test_bad_device_arrays_are_refused_before_any_work():
    torch = pytest.importorskip("torch")
    key = os.urandom(16)
    grid = torch.zeros((64, 64), dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="not contiguous"):
        aescl.new(key, aescl.MODE_CTR, nonce=b"n").encrypt(grid.t())
    with pytest.raises(ValueError, match="bytes"):
        aescl.new(key, aescl.MODE_CTR, nonce=b"n").encrypt(
            grid, output=torch.empty(100, dtype=torch.uint8, device="cuda"))
    with pytest.raises(TypeError, match="CUDA array"):
        aescl.new(key, aescl.MODE_CTR, nonce=b"n").encrypt(grid, output=bytearray(4096))
    with pytest.raises(ValueError, match="aligned"):
        aescl.new(key, aescl.MODE_ECB).encrypt(grid.reshape(-1)[:15])


@needs_gpu
def test_the_state_dict_example_of_the_docs_round_trips(tmp_path, monkeypatch):
    """docs/gpu-arrays.md's example, run as written: a model's tensors sealed on the GPU,
    written, read back onto the GPU and loaded; a tensor under another name refused."""
    torch = pytest.importorskip("torch")
    doc = Path(__file__).parents[1] / "docs" / "gpu-arrays.md"
    if not doc.is_file():  # (tests/ copied out of a checkout, as on the GPU machine)
        pytest.skip(f"{doc} is not there: run from a checkout")
    page = doc.read_text()
    section = page[page.index("## PyTorch: sealing"):]
    example = section[section.index("```python") + len("```python"):section.index("```\n\n")]
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    exec(compile(example, "docs/gpu-arrays.md", "exec"), names)  # noqa: S102 - our own page
    model, key = names["model"], names["key"]
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    loaded = names["load_sealed"](key, "weights.sealed")
    assert loaded.keys() == expected.keys()
    for name, tensor in loaded.items():
        assert tensor.is_cuda and torch.equal(tensor, expected[name])
    sealed = (tmp_path / "weights.sealed").read_bytes()
    assert model.weight.detach().cpu().numpy().tobytes() not in sealed
    state = model.state_dict()
    names["save_sealed"]({"bias": state["weight"]}, key, "renamed.sealed")
    with pytest.raises(aescl.WrongKeyError):  # (a sealed tensor under another name)
        data = (tmp_path / "renamed.sealed").read_bytes().replace(b'"bias"', b'"bian"')
        (tmp_path / "renamed.sealed").write_bytes(data)
        names["load_sealed"](key, "renamed.sealed")


@needs_gpu
def test_the_device_named_decides_which_gpu_arrays_may_run_on():
    """``cuda`` and ``cuda:N`` take arrays on any GPU and on GPU N; a cipher made for an
    OpenCL device or the host refuses CUDA arrays. A refusal writes nothing."""
    torch = pytest.importorskip("torch")
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(4096)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    gpu = to_gpu(torch, data)
    here = torch.cuda.current_device()
    for spec in ("cuda", f"cuda:{here}"):
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=spec).encrypt(gpu)
        assert to_host(sealed) == expected
    elsewhere = torch.cuda.device_count()  # (no GPU has this ordinal)
    with pytest.raises(aescl.DeviceNotFound, match=f"no device matches 'cuda:{elsewhere}'"):
        aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=f"cuda:{elsewhere}")
    output = torch.zeros_like(gpu)
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="host")
    with pytest.raises(ValueError, match="runs on the CUDA engine"):
        cipher.encrypt(gpu, output=output)
    with pytest.raises(ValueError, match="runs on the CUDA engine"):
        aescl.chunked.encrypt(bytes(32), gpu, device="host")
    assert not output.any()


@needs_gpu
def test_work_is_ordered_on_the_producers_stream():
    """A producer kernel on a side stream, then encrypt, then a consumer, all on that
    stream with no synchronization between them."""
    torch = pytest.importorskip("torch")
    key, nonce = os.urandom(16), os.urandom(8)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        data = torch.full((64 << 20,), 7, dtype=torch.uint8, device="cuda")
        data.add_(1)  # producer: every byte 8, on the side stream
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(data)
        opened = aescl.new(key, aescl.MODE_CTR, nonce=nonce).decrypt(sealed)
        check = bool((opened == 8).all())  # consumer
    side.synchronize()
    assert check
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(bytes([8]) * 1024)
    assert sealed[:1024].cpu().numpy().tobytes() == expected


@needs_gpu
def test_a_cpu_tensor_takes_the_host_path():
    torch = pytest.importorskip("torch")
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(5000)
    tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="host").encrypt(tensor)
    assert sealed == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)


@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("nonce_bytes", [12, 16])
def test_gcm_on_device_arrays_matches_pycryptodome(library, bits, nonce_bytes):
    key, nonce = os.urandom(bits // 8), os.urandom(nonce_bytes)
    sizes = [3, 29, (1 << 20) + 5, 0, 100]
    data, aad = os.urandom(sum(sizes)), os.urandom(37)
    gpu = to_gpu(library, data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    pieces, at = [], 0
    for size in sizes:
        pieces.append(cipher.encrypt(gpu[at : at + size]))  # (odd offsets: misaligned)
        at += size
    tag = cipher.digest()
    reference = Reference.new(key, Reference.MODE_GCM, nonce=nonce).update(aad)
    expected, expected_tag = reference.encrypt_and_digest(data)
    assert b"".join(to_host(p) for p in pieces) == expected
    assert tag == expected_tag

    sealed = to_gpu(library, expected)
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert opener.decrypt_and_verify(sealed, tag, output=sealed) is None  # in place
    assert to_host(sealed) == data
    bad = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    untouched = to_gpu(library, bytes(len(data)))
    with pytest.raises(aescl.AuthenticationError):
        bad.decrypt_and_verify(to_gpu(library, expected), bytes(16), output=untouched)
    assert to_host(untouched) == bytes(len(data))


@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
def test_gcm_pieces_on_block_boundaries_match_pycryptodome(library, bits):
    """Aligned pieces of whole blocks (the kernels' own case, with no bytes split
    between calls): from further on the counter; into a new array, into output= and in
    place. A wrong tag in place leaves the ciphertext there."""
    key, nonce, aad = os.urandom(bits // 8), os.urandom(12), os.urandom(20)
    sizes = [16 * (5 * 1024 + 7), 16 * 3, 16 * 2048]
    data = os.urandom(sum(sizes))
    expected, expected_tag = Reference.new(key, Reference.MODE_GCM, nonce=nonce) \
        .update(aad).encrypt_and_digest(data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    first = cipher.encrypt(to_gpu(library, data[: sizes[0]]))
    second = to_gpu(library, bytes(sizes[1]))
    assert cipher.encrypt(to_gpu(library, data[sizes[0] : sizes[0] + sizes[1]]),
                          output=second) is None
    third = to_gpu(library, data[sizes[0] + sizes[1] :])
    assert cipher.encrypt(third, output=third) is None
    assert b"".join(to_host(a) for a in (first, second, third)) == expected
    assert cipher.digest() == expected_tag

    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert to_host(opener.decrypt_and_verify(to_gpu(library, expected), expected_tag)) == data
    reader = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert to_host(reader.decrypt(to_gpu(library, expected))) == data
    sealed = to_gpu(library, expected)
    refused = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    with pytest.raises(aescl.AuthenticationError):
        refused.decrypt_and_verify(sealed, bytes(16), output=sealed)
    assert to_host(sealed) == expected



@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("batch", [2, 4096], ids=["batches-of-2", "one-batch"])
@pytest.mark.parametrize("offset", [0, 3], ids=["aligned", "at-an-odd-offset"])
def test_chunked_on_cuda_arrays_is_byte_identical_to_the_host_path(library, batch, offset,
                                                                   monkeypatch):
    """Aligned arrays are sealed and opened straight between the layouts; an array at an
    offset no allocation starts at goes through scratch memory (device_chunks._Staging)."""
    from aescl.engines.programs import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", batch)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", batch)
    key, salt = os.urandom(32), os.urandom(24)
    for size in CHUNK_SIZES:
        data = os.urandom(size + offset)
        message = to_gpu(library, data)
        if offset:  # (Numba refuses any slice of an empty array, even the whole of it)
            message = message[offset:]
        sealed = aescl.chunked.encrypt(key, message, b"ctx", salt=salt)
        assert type(sealed) is type(message)
        expected = aescl.chunked.encrypt(key, data[offset:], b"ctx", salt=salt, device="host")
        assert to_host(sealed) == expected
        assert to_host(aescl.chunked.decrypt(key, sealed, b"ctx")) == data[offset:]
        # Uploaded as it is, its chunks lie after a 56-byte header (not 16-aligned).
        assert to_host(aescl.chunked.decrypt(key, to_gpu(library, expected), b"ctx")) \
            == data[offset:]


@needs_gpu
@pytest.mark.parametrize("library", libraries())
@pytest.mark.parametrize("fused", ["1", "0"], ids=["fused", "in-three-launches"])
def test_chunked_on_cuda_arrays_over_more_chunks_than_the_grid_takes_at_once(library, fused,
                                                                           monkeypatch):
    """3000 chunks in one batch: more than a launch's blocks take at once (an H100's 132
    blocks of 8 chunks each with the fused kernel), so blocks go round again. Sealed
    and opened byte-identical to the host with CTR, GHASH and the tags in one launch
    (aes_gcm.cl's gcm_crypt_hash) and in three; a damaged chunk late in the batch is
    named."""
    monkeypatch.setenv("AESCL_GCM_FUSED", fused)
    key, salt = os.urandom(32), os.urandom(24)
    data = os.urandom(3000 * 16384 + 9)
    expected = aescl.chunked.encrypt(key, data, salt=salt, device="host")
    sealed = aescl.chunked.encrypt(key, to_gpu(library, data), salt=salt)
    assert to_host(sealed) == expected
    assert to_host(aescl.chunked.decrypt(key, sealed)) == data
    damaged = bytearray(expected)
    damaged[56 + 2999 * 16400 + 100] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2999"):
        aescl.chunked.decrypt(key, to_gpu(library, bytes(damaged)))


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_chunked_on_cuda_arrays_rejects_what_the_host_path_rejects(library, monkeypatch):
    from aescl.engines.programs import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", 2)
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, os.urandom(4 * 16384 + 7), device="host")
    for where, lead in (("chunk", 5), ("tag", 16384)):  # of chunk 3, in the second batch
        tampered = bytearray(sealed)
        tampered[56 + 3 * 16400 + lead] ^= 1
        # As uploaded (chunks after the 56-byte header), and 8 bytes on: chunks aligned.
        for arrays in (to_gpu(library, bytes(tampered)),
                       to_gpu(library, bytes(8) + bytes(tampered))[8:]):
            with pytest.raises(aescl.AuthenticationError, match="chunk 3") as caught:
                aescl.chunked.decrypt(key, arrays)
            assert caught.value.chunk == 3, where
    tampered = bytearray(sealed)
    for chunk in (3, 1):  # (compared on the device: the first of them is named)
        tampered[56 + chunk * 16400 + 9] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 1") as caught:
        aescl.chunked.decrypt(key, to_gpu(library, bytes(tampered)))
    assert caught.value.chunk == 1
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt(key, to_gpu(library, sealed[: 56 + 4 * 16400]))
    with pytest.raises(aescl.WrongKeyError):
        aescl.chunked.decrypt(os.urandom(32), to_gpu(library, sealed))


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_chunked_output_on_cuda_arrays(library):
    """``output=`` on chunked calls: the result in the caller's array (any dtype, as its
    bytes), None returned; zeroed on a failed tag; refused before any work when it does
    not fit. A fresh array's chunks lie after the 56-byte header, not 16-aligned (the
    scratch route); a sealed array aescl returned lies right for the one-pass route."""
    key, salt = os.urandom(32), os.urandom(24)
    data = os.urandom(3 * 16384 + 100)
    expected = aescl.chunked.encrypt(key, data, b"ctx", salt=salt, device="host")
    message = to_gpu(library, data)
    placed = aescl.chunked.encrypt(key, message, b"ctx")
    for output in (to_gpu(library, b"\xee" * len(expected)), placed):
        assert aescl.chunked.encrypt(key, message, b"ctx", salt=salt, output=output) is None
        assert to_host(output) == expected
    as_floats = to_gpu(library, b"\xee" * len(data)).view(library.float32)
    assert aescl.chunked.decrypt(key, placed, b"ctx", output=as_floats) is None
    assert to_host(as_floats) == data
    damaged = bytearray(expected)
    damaged[56 + 2 * 16400 + 1] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        aescl.chunked.decrypt(key, to_gpu(library, bytes(damaged)), b"ctx", output=as_floats)
    assert to_host(as_floats) == bytes(len(data))
    short = to_gpu(library, b"\xee" * (len(expected) - 1))
    with pytest.raises(ValueError, match="bytes"):
        aescl.chunked.encrypt(key, message, output=short)
    assert to_host(short) == b"\xee" * (len(expected) - 1)
    with pytest.raises(TypeError, match="CUDA array"):
        aescl.chunked.encrypt(key, message, output=bytearray(len(expected)))
    with pytest.raises(ValueError, match="overlaps"):  # opened over its own ciphertext
        aescl.chunked.decrypt(key, placed, b"ctx", output=placed[56 : 56 + len(data)])
    assert to_host(aescl.chunked.decrypt(key, placed, b"ctx")) == data


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_decrypt_range_on_cuda_arrays_matches_the_host(library):
    key = os.urandom(32)
    message = os.urandom(4 * 16384 + 1234)
    sealed = aescl.chunked.encrypt(key, message, device="host")
    on_gpu = to_gpu(library, sealed)
    for offset, length in [(0, 0), (0, 1), (16383, 2), (16384, 16384), (3 * 16384 + 5, 10**6),
                           (len(message), 5), (len(message) - 1, 1), (777, 40000)]:
        got = aescl.chunked.decrypt_range(key, on_gpu, offset, length)
        assert type(got) is type(on_gpu)
        assert to_host(got) == message[offset : offset + length], (offset, length)
    damaged = bytearray(sealed)
    damaged[56 + 2 * 16400 + 1] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        aescl.chunked.decrypt_range(key, to_gpu(library, bytes(damaged)), 2 * 16384, 1)


@needs_gpu
def test_an_array_that_only_dlpack_describes_is_read_and_written_where_it_lies():
    """cuda.core's Buffer exports DLPack from GPU memory and has no CUDA array interface:
    it is taken as a CUDA array, in place and into ``output=`` (aescl cannot make a
    Buffer for a result, so a call without ``output=`` says so). Its bytes are written
    and read back here through torch's DLPack view of the same memory."""
    torch = pytest.importorskip("torch", reason="torch is not installed (it fills the buffers)")
    from cuda.core import Device

    from aescl.engines.registry import array_kind_of as kind_of

    gpu = Device(0)
    gpu.set_current()
    key, nonce, salt = os.urandom(32), os.urandom(8), os.urandom(24)
    data = os.urandom(5 * 16384 + 48)

    def buffer_of(content: bytes):
        made = gpu.allocate(max(1, len(content)), stream=gpu.default_stream)
        if content:
            torch.from_dlpack(made)[: len(content)].view(torch.uint8).copy_(
                torch.frombuffer(bytearray(content), dtype=torch.uint8).cuda())
        torch.cuda.synchronize()
        return made

    def bytes_of(buffer, nbytes: int) -> bytes:
        torch.cuda.synchronize()
        return torch.from_dlpack(buffer)[:nbytes].view(torch.uint8).cpu().numpy().tobytes()

    message = buffer_of(data)
    kind = kind_of(message)
    assert kind is not None and kind.name == "cuda" and kind.nbytes(message) == len(data)
    ciphertext = buffer_of(bytes(len(data)))
    assert aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(message, output=ciphertext) \
        is None
    assert bytes_of(ciphertext, len(data)) == \
        Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    aescl.new(key, aescl.MODE_CTR, nonce=nonce).decrypt(ciphertext, output=ciphertext)
    assert bytes_of(ciphertext, len(data)) == data  # (in place)
    expected = aescl.chunked.encrypt(key, data, salt=salt, device="host")
    sealed = buffer_of(bytes(len(expected)))
    aescl.chunked.encrypt(key, message, salt=salt, output=sealed)
    assert bytes_of(sealed, len(expected)) == expected
    opened = buffer_of(bytes(len(data)))
    aescl.chunked.decrypt(key, sealed, output=opened)
    assert bytes_of(opened, len(data)) == data
    for call in (lambda: aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(message),
                 lambda: aescl.chunked.encrypt(key, message)):
        with pytest.raises(TypeError, match="output="):
            call()


@needs_gpu
@pytest.mark.parametrize("call", ["ctr", "chunked"])
def test_a_dlpack_buffer_dropped_as_the_call_returns_keeps_its_bytes_until_read(call):
    """cuda.core frees a Buffer on the stream it was allocated on, and hands the memory
    out again there at once; aescl's work on an array that only DLPack describes runs on
    the legacy default stream, which a non-blocking stream does not wait for. That stream
    held up behind a kernel that spins, the input (allocated on a non-blocking stream)
    dropped as the call returns, and a new Buffer of its size allocated there and zeroed
    at once: the new Buffer is not put in the input's memory, and the result is the
    input's."""
    torch = pytest.importorskip("torch", reason="torch is not installed (it fills the buffers)")
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (it runs the spin)")
    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device

    gpu = Device(0)
    gpu.set_current()
    side = gpu.create_stream()  # (non-blocking: it waits for no other stream)
    key, nonce, salt, data = os.urandom(32), os.urandom(8), os.urandom(24), os.urandom(4 << 20)

    def buffer_of(content: bytes):
        made = gpu.allocate(len(content), stream=side)
        side.sync()
        torch.from_dlpack(made)[: len(content)].view(torch.uint8).copy_(
            torch.frombuffer(bytearray(content), dtype=torch.uint8).cuda())
        torch.cuda.synchronize()
        return made

    first = buffer_of(bytes(len(data)))
    address = int(first.handle)
    del first
    again = gpu.allocate(len(data), stream=side)
    if int(again.handle) != address:
        pytest.skip("cuda.core did not hand a freed Buffer's memory out again")
    del again

    if call == "ctr":
        expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    else:
        expected = aescl.chunked.encrypt(key, data, salt=salt, device="host")
    output = torch.empty(len(expected), dtype=torch.uint8, device="cuda:0")

    def run(x) -> None:  # (on the legacy default stream, where the Buffer's work goes)
        if call == "ctr":
            aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(x, output=output)
        else:
            aescl.chunked.encrypt(key, x, salt=salt, output=output)

    run(buffer_of(data))  # (the kernels built before the race)
    torch.cuda.synchronize()
    output.zero_()
    array = buffer_of(data)
    where = int(array.handle)
    spin = cupy.RawKernel(SPIN, "spin")
    with cupy.cuda.Device(0), cupy.cuda.Stream.null:  # (the legacy default stream)
        spin((1,), (1,), (np.int64(300_000_000),))  # (about 0.15 s)
        run(array)
        in_flight = not cupy.cuda.Stream.null.done
    del array
    later = gpu.allocate(len(data), stream=side)
    moved = int(later.handle) != where
    check_driver(driver.cuMemsetD8Async(int(later.handle), 0, len(data), int(side.handle)))
    side.sync()
    torch.cuda.synchronize()
    got = output.cpu().numpy().tobytes()
    if not in_flight:
        pytest.skip("the spin was over before the call returned: no work was in flight")
    assert moved, "the next Buffer was put in memory that aescl's work still read"
    assert got == expected


@needs_gpu
@pytest.mark.parametrize("bits", KEY_BITS)
def test_jax_arrays_through_ecb_and_ctr_match_pycryptodome(jax_gpu, bits):
    import numpy as np

    jax, gpu = jax_gpu
    key, nonce, data = os.urandom(bits // 8), os.urandom(8), os.urandom((1 << 20) + 48)
    array = to_jax(jax, gpu, data)
    sealed = aescl.new(key, aescl.MODE_ECB).encrypt(array)
    assert isinstance(sealed, jax.Array) and sealed.devices() == {gpu}
    assert np.asarray(sealed).tobytes() == Reference.new(key, Reference.MODE_ECB).encrypt(data)
    assert np.asarray(aescl.new(key, aescl.MODE_ECB).decrypt(sealed)).tobytes() == data
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce)
    parts = [cipher.encrypt(to_jax(jax, gpu, data[a:b]))
             for a, b in ((0, 5), (5, 70000), (70000, len(data)))]  # (inside blocks)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    assert b"".join(np.asarray(part).tobytes() for part in parts) == expected


@needs_gpu
@pytest.mark.parametrize("call", ["ctr", "chunked"])
def test_a_jax_input_dropped_as_the_call_returns_keeps_its_bytes_until_read(jax_gpu, call):
    """JAX frees an array's memory once nothing of JAX's uses it, and aescl's work on a
    JAX input runs on CuPy's stream, which JAX does not know of. That stream held up
    behind a kernel that spins, the input dropped as the call returns and a new JAX
    array of its size made at once: the new array is not put in the input's memory
    (where JAX's allocator would put it, were the input free), and the result is the
    input's."""
    import cupy
    import numpy as np

    jax, gpu = jax_gpu
    key, nonce, salt, data = os.urandom(32), os.urandom(8), os.urandom(24), os.urandom(4 << 20)
    zeros = bytes(len(data))
    first = to_jax(jax, gpu, zeros)
    first.block_until_ready()
    address = first.unsafe_buffer_pointer()
    del first
    if to_jax(jax, gpu, zeros).unsafe_buffer_pointer() != address:
        pytest.skip("JAX's allocator did not hand freed memory out again")
    warm = data[: 1 << 16]

    def run(x):  # (CTR is also what GCM runs on arrays, after the tag's check)
        if call == "ctr":
            return aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(x)
        return aescl.chunked.encrypt(key, x, salt=salt)

    if call == "ctr":
        expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    else:
        expected = aescl.chunked.encrypt(key, data, salt=salt, device="host")
    spin = cupy.RawKernel(SPIN, "spin")
    # (a stream of CuPy's own, which no other waits for, JAX's included)
    with cupy.cuda.Device(gpu.id), cupy.cuda.Stream(non_blocking=True) as stream:
        run(to_jax(jax, gpu, warm))  # (the kernels built before the race)
        stream.synchronize()
        array = to_jax(jax, gpu, data)
        array.block_until_ready()
        where = array.unsafe_buffer_pointer()
        spin((1,), (1,), (np.int64(300_000_000),))  # (about 0.15 s)
        result = run(array)
        in_flight = not stream.done
        del array
        later = to_jax(jax, gpu, zeros)  # (written on JAX's stream while the spin runs)
        later.block_until_ready()
        moved = later.unsafe_buffer_pointer() != where
        got = np.asarray(result).tobytes()
    if not in_flight:
        pytest.skip("the spin was over before the call returned: no work was in flight")
    assert moved, "the next JAX array was put in memory that aescl's work still read"
    assert got == expected


@needs_gpu
def test_jax_arrays_through_gcm_and_the_chunked_format(jax_gpu):
    import numpy as np

    jax, gpu = jax_gpu
    key, nonce, data = os.urandom(32), os.urandom(12), os.urandom(3 * 16384 + 100)
    sealed, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce).encrypt_and_digest(
        to_jax(jax, gpu, data))
    expected, expected_tag = Reference.new(key, Reference.MODE_GCM, nonce=nonce) \
        .encrypt_and_digest(data)
    assert isinstance(sealed, jax.Array)
    assert (np.asarray(sealed).tobytes(), tag) == (expected, expected_tag)
    opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce).decrypt_and_verify(sealed, tag)
    assert np.asarray(opened).tobytes() == data
    salt = os.urandom(24)
    message = aescl.chunked.encrypt(key, to_jax(jax, gpu, data), b"ctx", salt=salt)
    assert isinstance(message, jax.Array)
    assert np.asarray(message).tobytes() == aescl.chunked.encrypt(key, data, b"ctx", salt=salt,
                                                                  device="host")
    assert np.asarray(aescl.chunked.decrypt(key, message, b"ctx")).tobytes() == data
    tampered = bytearray(np.asarray(message).tobytes())
    tampered[56 + 16400 + 7] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 1"):
        aescl.chunked.decrypt(key, to_jax(jax, gpu, bytes(tampered)), b"ctx")


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_an_input_freed_at_once_is_read_before_its_memory_is_written_again(library):
    """As the JAX test below, for torch and CuPy: the input dropped as the call returns,
    the next array of its size (its library's allocator gives the same memory on the
    same stream) written at once; the result is still the input's."""
    key, nonce = os.urandom(32), os.urandom(12)
    reused = 0
    for _ in range(3):
        plaintext = os.urandom(1 << 28)
        data = to_gpu(library, plaintext)
        where = data.__cuda_array_interface__["data"][0]
        result = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(data)
        sealed = aescl.chunked.encrypt(key, data, salt=nonce * 2)
        del data
        written = to_gpu(library, bytes(1 << 28))
        reused += written.__cuda_array_interface__["data"][0] == where
        expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce[:8]).encrypt(plaintext)
        assert to_host(result) == expected
        # (and the same call on host bytes, on whichever device the default team picks)
        assert aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(plaintext) == expected
        assert to_host(sealed) == aescl.chunked.encrypt(key, plaintext, salt=nonce * 2,
                                                        device="host")
    if not reused:
        pytest.skip(f"{library.__name__} put none of the next arrays where a freed input was")


@needs_gpu
@pytest.mark.parametrize("call", ["ctr", "chunked"])
@pytest.mark.parametrize("library", libraries()[:2])  # (allocators that reuse in order)
def test_an_input_freed_while_the_work_waits_keeps_its_bytes_until_read(library, call):
    """The test above meets the race it is named for only when the GPU is busy: alone,
    aescl's work (a quarter of a millisecond) is done before the call has returned. Here
    a kernel that spins holds the library's stream, the input is made behind it on that
    stream, and so aescl's work is still waiting when the input is dropped and the next
    array of its size is put in the same memory and zeroed. The result is the input's
    only if aescl reads the input after the work that makes it and before the work the
    caller queues next, which is the lifetime rule of docs/gpu-arrays.md."""
    import numpy as np

    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (it runs the spin)")
    key, nonce, salt = os.urandom(32), os.urandom(8), os.urandom(24)
    plaintext = os.urandom(64 << 20)
    if call == "ctr":
        expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(plaintext)
    else:
        expected = aescl.chunked.encrypt(key, plaintext, salt=salt, device="host")

    def run(x):
        if call == "ctr":
            return aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(x)
        return aescl.chunked.encrypt(key, x, salt=salt)

    spin = cupy.RawKernel(SPIN, "spin")
    staged = to_gpu(library, plaintext)
    run(staged[: 1 << 16])  # (the kernels built before the race)
    cupy.cuda.runtime.deviceSynchronize()
    with LibraryStream(library) as stream:
        spin((1,), (1,), (np.int64(300_000_000),), stream=stream.as_cupy)  # (about 0.15 s)
        data = stream.copy(staged)  # (made behind the spin)
        where = data.__cuda_array_interface__["data"][0]
        result = run(data)
        in_flight = not stream.done()
        del data
        written = stream.zeros_like(staged)
        reused = written.__cuda_array_interface__["data"][0] == where
        got = to_host(result)
    if not in_flight:
        pytest.skip("the spin was over before the call returned: no work was in flight")
    assert reused, f"{library.__name__} put the next array elsewhere: the race was not run"
    assert got == expected


@needs_gpu
def test_jax_input_is_read_after_the_jax_work_that_makes_it(jax_gpu):
    """The input comes from a JAX computation not yet waited for; JAX arrays are
    immutable, so output= one is refused before any work."""
    import numpy as np

    jax, gpu = jax_gpu
    import jax.numpy as jnp

    key, nonce = os.urandom(16), os.urandom(8)
    with jax.default_device(gpu):
        made = (jnp.arange(1 << 22, dtype=jnp.uint32) * jnp.uint32(2654435761) >> 24).astype(
            jnp.uint8)
    sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(made)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(
        np.asarray(made).tobytes())
    assert np.asarray(sealed).tobytes() == expected
    with pytest.raises(TypeError, match="JAX array, which is immutable"):
        aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(made, output=sealed)


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_an_output_that_partly_overlaps_the_input_array_is_refused(library):
    memory = to_gpu(library, os.urandom(8192 + 64))
    before = to_host(memory)
    for shift in (-16, 16, 32):
        source, output = memory[32 : 32 + 8192], memory[32 + shift : 32 + shift + 8192]
        for mode, extra in ((aescl.MODE_CTR, {"nonce": bytes(8)}), (aescl.MODE_ECB, {}),
                            (aescl.MODE_GCM, {"nonce": bytes(12)})):
            with pytest.raises(ValueError, match="partly overlaps"):
                aescl.new(bytes(16), mode, **extra).encrypt(source, output=output)
    assert to_host(memory) == before


@needs_gpu
@pytest.mark.parametrize("where", [None, "cuda"], ids=["arrays", "host-data"])
def test_long_aad_is_hashed_on_the_gpu_and_matches(where):
    """AAD with a CUDA array's text (and on the CUDA engine's host-data stream) was
    hashed a block at a time in Python, about 4 MB/s."""
    torch = pytest.importorskip("torch")

    key, nonce = os.urandom(32), os.urandom(12)
    aad, text = os.urandom((3 << 20) + 5), os.urandom(10_000)
    ours = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=where)
    ours.update(aad[:7]).update(aad[7:])
    given = torch.frombuffer(bytearray(text), dtype=torch.uint8).cuda() if where is None \
        else text
    sealed, tag = ours.encrypt_and_digest(given)
    expected = Reference.new(key, Reference.MODE_GCM, nonce=nonce).update(aad) \
        .encrypt_and_digest(text)
    assert (to_host(sealed) if where is None else sealed, tag) == expected


def _two_gpus() -> bool:
    from cuda.bindings import driver

    if not cuda_gpu_present():
        return False
    error, count = driver.cuDeviceGetCount()
    return not error and count >= 2


needs_two_gpus = pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs")


@needs_two_gpus
def test_a_call_on_another_gpus_array_leaves_the_callers_device_and_is_right():
    """On a host of several GPUs a call on GPU 1's arrays leaves torch's and CuPy's current
    device where the caller had it, and CuPy's default stream (handle 0: the current
    context's) is GPU 1's during aescl's work. Seen on 2 x H200: after a torch call on
    GPU 1 the caller's next tensor went to GPU 1; after a chunked call on a CuPy array there,
    AESGCM on it stopped on an illegal address (kernels launched in GPU 0's context)."""
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    key, nonce, data = os.urandom(32), os.urandom(12), os.urandom((1 << 20) + 100)
    salt = os.urandom(24)

    def where() -> tuple[int, int]:
        return torch.cuda.current_device(), cupy.cuda.runtime.getDevice()

    from aescl.engines.cuda.runtime import Gpu

    before = where()
    Gpu(1)  # (as listing the GPUs makes it: once it left GPU 1's context current)
    assert where() == before
    on_one = torch.frombuffer(bytearray(data), dtype=torch.uint8).to("cuda:1")
    sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(on_one)
    assert where() == before and sealed.device.index == 1
    assert to_host(sealed) == Reference.new(key, Reference.MODE_CTR,
                                            nonce=nonce[:8]).encrypt(data)
    with cupy.cuda.Device(1):
        array = cupy.asarray(np.frombuffer(data, np.uint8))
    message = aescl.chunked.encrypt(key, array, salt=salt)
    assert where() == before and message.device.id == 1
    assert to_host(message) == aescl.chunked.encrypt(key, data, salt=salt, device="host")
    aead = aescl.AESGCM(key).encrypt(nonce, array, b"aad")
    assert where() == before and aead.device.id == 1
    assert to_host(aead) == PycaAESGCM(key).encrypt(nonce, data, b"aad")
    assert to_host(aescl.AESGCM(key).decrypt(nonce, aead, b"aad")) == data
    # A kept cipher's lone messages on GPU 1: the first keeps the kernels, the later ones
    # take the lone way, which makes GPU 1's context current only for its launch.
    cipher, small = aescl.AESGCM(key), on_one[:4096]
    for _ in range(3):
        lone = cipher.encrypt(nonce, small, None)
        assert where() == before and lone.device.index == 1
    assert to_host(lone) == PycaAESGCM(key).encrypt(nonce, data[:4096], None)
    # Host bytes for GPU 1 too.
    aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8], device="cuda:1").encrypt(data)
    aescl.chunked.encrypt(key, data, device="cuda:1")
    aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda:1").encrypt_and_digest(data)
    assert where() == before


@needs_two_gpus
def test_threads_a_gpu_each_run_their_tensors_at_once(monkeypatch):
    """Issue 57: one thread a GPU, each encrypting a tensor on its own GPU, enqueue their
    launches at once (a GPU's lock, no lock of the process). Each launch waits at a
    barrier of all the threads, which none passes until every one is there: had one GPU's
    call waited for another's, it would time out."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    torch = pytest.importorskip("torch")
    from aescl.engines.cuda import workers

    gpus = torch.cuda.device_count()
    barrier = threading.Barrier(gpus, timeout=60)
    real = workers.CudaBlocks.launch

    def together(self, *args):
        barrier.wait()
        return real(self, *args)

    monkeypatch.setattr(workers.CudaBlocks, "launch", together)
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(3 << 20)

    def encrypt(ordinal: int) -> bytes:
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(f"cuda:{ordinal}")
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(tensor)
        assert sealed.device.index == ordinal
        return to_host(sealed)

    with ThreadPoolExecutor(gpus) as pool:
        results = list(pool.map(encrypt, range(gpus)))
    assert results == [Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)] * gpus


def _on_gpu_one(library, data: bytes):
    host = np.frombuffer(data, np.uint8).copy()
    if library.__name__ == "torch":
        return library.from_numpy(host).to("cuda:1")
    if library.__name__ == "cupy":
        with library.cuda.Device(1):
            return library.asarray(host)
    from numba import cuda

    with cuda.gpus[1]:
        return cuda.to_device(host)


def _gpu_of(array) -> int:
    """The GPU an array lies on, as its library says it."""
    if type(array).__module__.startswith("torch"):
        return array.device.index
    if hasattr(array, "copy_to_host"):  # (Numba's: the context it was made in)
        return array.gpu_data.context.device.id
    return array.device.id


@needs_two_gpus
@pytest.mark.parametrize("library", libraries())
def test_every_result_for_an_array_on_gpu_one_lies_on_gpu_one(library):
    """Each library's array on the second GPU gives its results there, right. The driver's
    word on a pointer's GPU named GPU 0 for CuPy 14's arrays on GPU 1 (2 x H200), and
    every result was made on GPU 0: right only where peer access happened to be on."""
    key, nonce, salt = os.urandom(32), os.urandom(12), os.urandom(24)
    data = os.urandom(3 * 16384 + 100)
    array = _on_gpu_one(library, data)
    ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(array)
    message = aescl.chunked.encrypt(key, array, salt=salt)
    sealed = aescl.AESGCM(key).encrypt(nonce, array, None)
    assert [_gpu_of(ctr), _gpu_of(message), _gpu_of(sealed)] == [1, 1, 1]
    assert to_host(ctr) == Reference.new(key, Reference.MODE_CTR, nonce=nonce[:8]).encrypt(data)
    assert to_host(message) == aescl.chunked.encrypt(key, data, salt=salt, device="host")
    assert to_host(sealed) == PycaAESGCM(key).encrypt(nonce, data, None)


@needs_gpu
@pytest.mark.parametrize("call", ["ctr", "chunked"])
def test_a_thread_with_no_current_context_has_none_after_a_call(call):
    """The rule above, on one GPU: a thread that made no context current (a new thread)
    has none after aescl's call on host bytes for cuda:0 (no array library's own work in
    it, which makes its GPU's context current as it likes)."""
    import threading

    from cuda.bindings import driver

    key, nonce, data = os.urandom(32), os.urandom(8), os.urandom(1 << 20)
    seen = {}

    def run() -> None:
        seen["before"] = int(check_context(driver.cuCtxGetCurrent()))
        if call == "ctr":
            seen["result"] = aescl.new(key, aescl.MODE_CTR, nonce=nonce,
                                       device="cuda:0").encrypt(data)
        else:
            seen["result"] = aescl.chunked.decrypt(
                key, aescl.chunked.encrypt(key, data, device="cuda:0"), device="cuda:0")
        seen["after"] = int(check_context(driver.cuCtxGetCurrent()))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen["before"] == 0 and seen["after"] == 0
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data) \
        if call == "ctr" else data
    assert seen["result"] == expected


def check_context(result: tuple) -> object:
    check_driver(result[:1])
    return result[1]


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_a_cipher_keeps_its_keys_tables_on_the_gpu_once_made(library):
    """aescl.AESGCM keeps its many-messages job: H's position tables are made on a GPU
    once, and every later call (another stream's too) reads them and is right."""
    key = os.urandom(32)
    cipher = aescl.AESGCM(key)
    pyca = PycaAESGCM(key)
    for round_ in range(3):
        nonce, data = os.urandom(12), os.urandom(4096 + 16 * round_)
        sealed = cipher.encrypt(nonce, to_gpu(library, data), b"ad")
        assert to_host(sealed) == pyca.encrypt(nonce, data, b"ad")
        assert to_host(cipher.decrypt(nonce, sealed, b"ad")) == data
    (job,) = cipher._jobs.values()
    assert len(job._tables._on) == 1
