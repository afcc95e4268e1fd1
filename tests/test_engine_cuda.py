"""aescl/engines/cuda: the cl/ kernels through NVRTC, and CUDA device arrays in the
ECB and CTR calls.

The build tests run wherever NVRTC is installed (the test extra brings it; no GPU is
needed). The array tests need a CUDA GPU and PyTorch or CuPy, and are skipped,
visibly, elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from Crypto.Cipher import AES as Reference

import aescl

KEY_BITS = [128, 192, 256]


def _nvrtc_available() -> bool:
    try:
        from aescl.engines.cuda.kernels import nvrtc_version

        nvrtc_version()
    except Exception:  # noqa: BLE001 - any failure to load NVRTC means "absent"
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _nvrtc_available(),
                                 reason="NVRTC (pip install 'aescl[cuda]') is not installed")


@needs_nvrtc
@pytest.mark.parametrize("arch, tables", [("75", 1), ("80", 4), ("86", 2), ("90", 4)])
@pytest.mark.parametrize("rounds", [10, 12, 14])
def test_every_cuda_kernel_compiles_from_the_one_core(arch, tables, rounds):
    from aescl.engines.cuda import KERNELS, compile_cubin, cuda_defines
    from aescl.engines.cuda.kernels import crypt_hash_defines
    from aescl.engines.cuda.workers import _CRYPT_HASH_SHAPE

    # gcm_crypt_hash's own build too: its tables, block and stride tables as the engine
    # sets them, on a GPU whose blocks hold ``tables``. (Several compiles at a time: one
    # after another, this test took a minute of the suite on the 2-core CI kind.)
    _, threads, in_local = _CRYPT_HASH_SHAPE
    builds = [(filename, cuda_defines(rounds, tables), names)
              for filename, names in KERNELS.items()]
    builds.append(("aes_gcm.cl", crypt_hash_defines(rounds, tables, threads, in_local),
                   ("gcm_crypt_hash",)))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        cubins = list(pool.map(lambda build: compile_cubin(build[0], build[1], arch), builds))
    for (filename, _, names), cubin in zip(builds, cubins, strict=True):
        assert cubin[:4] == b"\x7fELF", filename
        for name in names:  # extern "C": the OpenCL kernel names, unmangled
            assert name.encode() + b"\0" in cubin, (filename, name)


@pytest.mark.parametrize("block_shared_kib, tables", [
    (227, 4), (163, 4), (129, 4), (128, 2), (99, 2), (96, 2), (65, 2), (64, 1), (48, 1)])
def test_a_gpu_gets_the_round_tables_its_blocks_hold(block_shared_kib, tables):
    from aescl.engines.cuda.kernels import round_tables_for, table_bytes

    assert round_tables_for(block_shared_kib * 1024) == tables
    assert table_bytes(tables) < block_shared_kib * 1024


@pytest.mark.parametrize("block_shared_kib, tables", [
    (227, 4), (163, 4), (153, 4), (152, 2), (129, 2), (99, 2), (89, 2), (88, 1), (64, 1)])
def test_the_fused_gcm_kernel_gets_the_round_tables_its_blocks_hold_beside_its_sums(
        block_shared_kib, tables):
    """gcm_crypt_hash's blocks of 1024 threads keep 16 KiB of sums and 8 KiB of stride
    tables beside the round tables: a GPU whose blocks hold 4 tables for the other
    kernels (129 KiB) may hold only 2 for this one."""
    from aescl.engines.cuda.kernels import crypt_hash_tables, table_bytes

    assert crypt_hash_tables(block_shared_kib * 1024, 4, 1024, 1) == tables
    assert table_bytes(tables) + (16 + 8 + 1) * 1024 <= block_shared_kib * 1024 or tables == 1
    assert crypt_hash_tables(227 * 1024, 2, 1024, 1) == 2  # never more than the GPU's own


def test_a_launchs_parameters_point_at_each_arguments_bytes():
    """cuLaunchKernel reads each argument from its pointer, as many bytes as the kernel's
    parameter: an int as 64 bits, a numpy scalar or array as its own bytes."""
    import ctypes

    import numpy as np

    from aescl.engines.cuda.runtime import kernel_parameters

    key = np.arange(60, dtype="<u4")  # (a 240-byte argument by value, as the key's)
    arguments = [0x1122334455667788, np.uint32(7), np.frombuffer(bytes(range(16)), np.uint8),
                 key, 5, np.uint32(0xFFFFFFFF)]
    expected = [(0x1122334455667788).to_bytes(8, "little"), (7).to_bytes(4, "little"),
                bytes(range(16)), key.tobytes(), (5).to_bytes(8, "little"), b"\xff" * 4]
    storage, pointers = kernel_parameters(arguments)
    assert len(pointers) == len(arguments)
    for pointer, value in zip(pointers, expected, strict=True):
        assert ctypes.string_at(pointer, len(value)) == value
    assert pointers[0] == storage.buffer_info()[0]
    assert all((pointer - pointers[0]) % 16 == 0 for pointer in pointers)  # (uint4's 16)


@needs_nvrtc
def test_a_cuda_build_error_carries_nvrtcs_log(monkeypatch):
    from aescl.engines import sources
    from aescl.engines.cuda import compile_cubin

    monkeypatch.setattr(sources, "load_source", lambda _: "__kernel void k() { nope; }")
    monkeypatch.setattr("aescl.engines.cuda.kernels.load_source", sources.load_source)
    with pytest.raises(aescl.KernelBuildError) as caught:
        compile_cubin("broken.cl", {}, "90")
    assert "nope" in caught.value.build_log


# ---- CUDA device arrays (a GPU) ---------------------------------------------------


def _cuda_gpu() -> bool:
    if not _nvrtc_available():
        return False
    try:
        from cuda.core import Device

        Device(0)
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return False
    return True


needs_gpu = pytest.mark.skipif(not _cuda_gpu(), reason="no CUDA GPU on this machine")


def _numba():
    """Numba's CUDA arrays, as the tests below use a library (``asarray``, ``float32``,
    ``__name__``)."""
    import types

    import numpy as np
    from numba import cuda

    return types.SimpleNamespace(__name__="numba", asarray=cuda.to_device, float32=np.float32)


def _libraries() -> list:
    found = []
    for name in ("torch", "cupy", "numba"):
        try:
            library = _numba() if name == "numba" else __import__(name)
            found.append(pytest.param(library, id=name))
        except ImportError:
            found.append(pytest.param(None, id=name, marks=pytest.mark.skip(
                reason=f"{name} is not installed")))
    return found


def _to_gpu(library, data: bytes):
    import numpy as np

    host = np.frombuffer(data, np.uint8).copy()
    return library.from_numpy(host).cuda() if library.__name__ == "torch" else \
        library.asarray(host)


def _to_host(array) -> bytes:
    if type(array).__module__.startswith("torch"):
        return array.cpu().numpy().tobytes()
    if hasattr(array, "copy_to_host"):  # (Numba's)
        return array.copy_to_host().tobytes()
    return array.get().tobytes()


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("size", [16, 4096, (1 << 20) + 48])
def test_ecb_on_device_arrays_matches_pycryptodome(library, bits, size):
    key, data = os.urandom(bits // 8), os.urandom(size)
    gpu = _to_gpu(library, data)
    sealed = aescl.new(key, aescl.MODE_ECB).encrypt(gpu)
    assert type(sealed) is type(gpu)
    assert _to_host(sealed) == Reference.new(key, Reference.MODE_ECB).encrypt(data)
    opened = aescl.new(key, aescl.MODE_ECB).decrypt(sealed)
    assert _to_host(opened) == data


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
def test_ctr_calls_of_any_length_continue_the_stream(library, bits):
    key, nonce = os.urandom(bits // 8), os.urandom(8)
    sizes = [5, 16, 27, 4096, 1, (1 << 20) + 3, 0, 33]
    data = os.urandom(sum(sizes))
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce)
    out, at = b"", 0
    for size in sizes:
        out += _to_host(cipher.encrypt(_to_gpu(library, data[at : at + size])))
        at += size
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    assert out == expected


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_ctr_in_place_and_at_an_odd_offset(library):
    key, nonce, data = os.urandom(16), os.urandom(12), os.urandom(100_003)
    gpu = _to_gpu(library, data)
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=2**32 - 3)
    assert cipher.encrypt(gpu, output=gpu) is None  # in place, across a 32-bit carry
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce,
                             initial_value=2**32 - 3).encrypt(data)
    assert _to_host(gpu) == expected
    # A slice that starts 3 bytes into the array: not 16-byte aligned.
    odd = _to_gpu(library, b"\0\0\0" + data)[3:]
    result = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=2**32 - 3).encrypt(odd)
    assert _to_host(result) == expected


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
def test_aescl_devices_lists_the_gpus_torch_sees():
    torch = pytest.importorskip("torch")
    gpus = aescl.devices.cuda_devices()
    assert [g.name for g in gpus] == [torch.cuda.get_device_name(n)
                                      for n in range(torch.cuda.device_count())]
    major, minor = torch.cuda.get_device_capability(0)
    assert gpus[0].platform_version == f"sm_{major}{minor}"
    assert gpus[0].compute_units == torch.cuda.get_device_properties(0).multi_processor_count
    assert gpus[0].is_cuda and not gpus[0].is_opencl and gpus[0].type == "gpu"
    listed = subprocess.run([sys.executable, "-m", "aescl", "devices"], capture_output=True,
                            text=True, timeout=120)
    assert any(line.startswith("cuda:0 ") and gpus[0].name in line
               for line in listed.stdout.splitlines()), listed.stdout


@needs_gpu
def test_the_device_named_decides_which_gpu_arrays_may_run_on():
    """``cuda`` and ``cuda:N`` take arrays on any GPU and on GPU N; a cipher made for an
    OpenCL device or the host refuses CUDA arrays. A refusal writes nothing."""
    torch = pytest.importorskip("torch")
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(4096)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    gpu = _to_gpu(torch, data)
    here = torch.cuda.current_device()
    for spec in ("cuda", f"cuda:{here}"):
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=spec).encrypt(gpu)
        assert _to_host(sealed) == expected
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
@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("nonce_bytes", [12, 16])
def test_gcm_on_device_arrays_matches_pycryptodome(library, bits, nonce_bytes):
    key, nonce = os.urandom(bits // 8), os.urandom(nonce_bytes)
    sizes = [3, 29, (1 << 20) + 5, 0, 100]
    data, aad = os.urandom(sum(sizes)), os.urandom(37)
    gpu = _to_gpu(library, data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    pieces, at = [], 0
    for size in sizes:
        pieces.append(cipher.encrypt(gpu[at : at + size]))  # (odd offsets: misaligned)
        at += size
    tag = cipher.digest()
    reference = Reference.new(key, Reference.MODE_GCM, nonce=nonce).update(aad)
    expected, expected_tag = reference.encrypt_and_digest(data)
    assert b"".join(_to_host(p) for p in pieces) == expected
    assert tag == expected_tag

    sealed = _to_gpu(library, expected)
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert opener.decrypt_and_verify(sealed, tag, output=sealed) is None  # in place
    assert _to_host(sealed) == data
    bad = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    untouched = _to_gpu(library, bytes(len(data)))
    with pytest.raises(aescl.AuthenticationError):
        bad.decrypt_and_verify(_to_gpu(library, expected), bytes(16), output=untouched)
    assert _to_host(untouched) == bytes(len(data))


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
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
    first = cipher.encrypt(_to_gpu(library, data[: sizes[0]]))
    second = _to_gpu(library, bytes(sizes[1]))
    assert cipher.encrypt(_to_gpu(library, data[sizes[0] : sizes[0] + sizes[1]]),
                          output=second) is None
    third = _to_gpu(library, data[sizes[0] + sizes[1] :])
    assert cipher.encrypt(third, output=third) is None
    assert b"".join(_to_host(a) for a in (first, second, third)) == expected
    assert cipher.digest() == expected_tag

    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert _to_host(opener.decrypt_and_verify(_to_gpu(library, expected), expected_tag)) == data
    reader = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    assert _to_host(reader.decrypt(_to_gpu(library, expected))) == data
    sealed = _to_gpu(library, expected)
    refused = aescl.new(key, aescl.MODE_GCM, nonce=nonce).update(aad)
    with pytest.raises(aescl.AuthenticationError):
        refused.decrypt_and_verify(sealed, bytes(16), output=sealed)
    assert _to_host(sealed) == expected


@needs_gpu
def test_a_failed_driver_call_raises_with_the_drivers_name_for_it():
    from cuda.bindings import driver

    from aescl.engines.cuda.runtime import checked, cuda_device

    cuda_device(0)  # (its context current here)
    assert checked((driver.CUresult.CUDA_SUCCESS, 7)) == 7
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        checked((driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        checked(driver.cuMemAlloc(0))  # (a size of zero is refused)


@needs_gpu
def test_the_ghash_tables_of_the_last_four_hash_keys_stay_on_the_gpu():
    """A GCM message is a new cipher: the GHASH tables of its key's H are kept for the
    next message under that key, for the four keys used last on each GPU."""
    torch = pytest.importorskip("torch")
    from aescl import ghash
    from aescl.engines.cuda import workers

    keys = [os.urandom(16) for _ in range(5)]
    text = torch.zeros(4096, dtype=torch.uint8, device="cuda")
    for key in keys:
        aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12)).encrypt(text)
    on_gpu = text.device.index or 0
    kept = [h for (gpu, h) in workers._tables_kept if gpu == on_gpu]
    assert kept == [ghash.hash_subkey(key) for key in keys[1:]]


# ---- the chunked format on CUDA arrays (engines/device_chunks.py) ---------------------

CHUNK_SIZES = [0, 5, 16384, 3 * 16384 + 100, 5 * 16384]


@needs_gpu
def test_chunked_scratch_stays_in_aescls_pool_and_leaves_no_trace_in_later_calls():
    """Opening waits for its tags. Its freed scratch then stays mapped in aescl's own pool
    on the GPU (runtime.Gpu.memory_pool, up to POOL_KEEPS), where the device's
    default pool would give it back to the driver at that wait. Scratch comes back as
    earlier calls left it: here as all ones, and a short final chunk's slot (whose
    padding GHASH reads as zeros) still seals and opens as the host does."""
    torch = pytest.importorskip("torch")
    from cuda.bindings import driver

    from aescl.engines.cuda import runtime, workers
    from aescl.engines.cuda.arrays import cuda_bytes

    key, salt = bytes(range(32)), bytes(range(24))
    gpu = torch.cuda.current_device()
    attribute = driver.CUmemPool_attribute
    for size in (3, 16384 + 1000, 2 * 16384 + 16383):
        data = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
        like = cuda_bytes(data, "data")
        memory = workers.StreamMemory(None, like)
        spans = [memory.scratch(16384, zeroed=False) for _ in range(8)]
        for span in spans:
            driver.cuMemsetD8Async(span.pointer, 0xFF, span.nbytes, like.stream)
            memory.release(span)
        expected = aescl.chunked.encrypt(key, data.cpu().numpy().tobytes(), salt=salt,
                                         device="host")
        sealed = aescl.chunked.encrypt(key, data, salt=salt)
        assert sealed.cpu().numpy().tobytes() == expected
        assert torch.equal(aescl.chunked.decrypt(key, sealed), data)
    torch.cuda.synchronize()
    pool = runtime.cuda_device(gpu).memory_pool()
    threshold = runtime.checked(driver.cuMemPoolGetAttribute(
        pool, attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD))
    assert int(threshold) == runtime.POOL_KEEPS
    assert int(runtime.checked(driver.cuMemPoolGetAttribute(
        pool, attribute.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT))) > 0


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("batch", [2, 4096], ids=["batches-of-2", "one-batch"])
@pytest.mark.parametrize("offset", [0, 3], ids=["aligned", "at-an-odd-offset"])
def test_chunked_on_cuda_arrays_is_byte_identical_to_the_host_path(library, batch, offset,
                                                                   monkeypatch):
    """Aligned arrays are sealed and opened straight between the layouts; an array at an
    offset no allocation starts at goes through scratch memory (device_chunks._Staging)."""
    from aescl.engines import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", batch)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", batch)
    key, salt = os.urandom(32), os.urandom(24)
    for size in CHUNK_SIZES:
        data = os.urandom(size + offset)
        message = _to_gpu(library, data)
        if offset:  # (Numba refuses any slice of an empty array, even the whole of it)
            message = message[offset:]
        sealed = aescl.chunked.encrypt(key, message, b"ctx", salt=salt)
        assert type(sealed) is type(message)
        expected = aescl.chunked.encrypt(key, data[offset:], b"ctx", salt=salt, device="host")
        assert _to_host(sealed) == expected
        assert _to_host(aescl.chunked.decrypt(key, sealed, b"ctx")) == data[offset:]
        # Uploaded as it is, its chunks lie after a 56-byte header (not 16-aligned).
        assert _to_host(aescl.chunked.decrypt(key, _to_gpu(library, expected), b"ctx")) \
            == data[offset:]


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
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
    sealed = aescl.chunked.encrypt(key, _to_gpu(library, data), salt=salt)
    assert _to_host(sealed) == expected
    assert _to_host(aescl.chunked.decrypt(key, sealed)) == data
    damaged = bytearray(expected)
    damaged[56 + 2999 * 16400 + 100] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2999"):
        aescl.chunked.decrypt(key, _to_gpu(library, bytes(damaged)))


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_chunked_on_cuda_arrays_rejects_what_the_host_path_rejects(library, monkeypatch):
    from aescl.engines import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    monkeypatch.setattr(device_chunks, "DIRECT_BATCH_CHUNKS", 2)
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, os.urandom(4 * 16384 + 7), device="host")
    for where, lead in (("chunk", 5), ("tag", 16384)):  # of chunk 3, in the second batch
        tampered = bytearray(sealed)
        tampered[56 + 3 * 16400 + lead] ^= 1
        # As uploaded (chunks after the 56-byte header), and 8 bytes on: chunks aligned.
        for arrays in (_to_gpu(library, bytes(tampered)),
                       _to_gpu(library, bytes(8) + bytes(tampered))[8:]):
            with pytest.raises(aescl.AuthenticationError, match="chunk 3") as caught:
                aescl.chunked.decrypt(key, arrays)
            assert caught.value.chunk == 3, where
    tampered = bytearray(sealed)
    for chunk in (3, 1):  # (compared on the device: the first of them is named)
        tampered[56 + chunk * 16400 + 9] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 1") as caught:
        aescl.chunked.decrypt(key, _to_gpu(library, bytes(tampered)))
    assert caught.value.chunk == 1
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt(key, _to_gpu(library, sealed[: 56 + 4 * 16400]))
    with pytest.raises(aescl.WrongKeyError):
        aescl.chunked.decrypt(os.urandom(32), _to_gpu(library, sealed))


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_chunked_openings_on_cuda_arrays_each_get_their_own_verdict(library):
    """The fused kernel lowers a verdict word kept from call to call (workers.
    CudaChunkKernels.verdict): four threads open messages of whole chunks in turn intact
    and damaged (a chunk, or the empty final chunk's tag, compared on the host); each
    intact one comes back as sealed, each damaged one names its chunk, and a word a
    failed opening lowered serves no later one."""
    key = os.urandom(32)

    def opener(worker: int) -> list[str]:
        wrong = []
        for n in range(6):
            data = os.urandom(3 * 16384)
            sealed = bytearray(aescl.chunked.encrypt(key, data, device="host"))
            chunk = None if n % 2 == 0 else (n // 2 + worker) % 4  # (3: the final tag)
            if chunk is not None:
                sealed[-1 if chunk == 3 else 56 + chunk * 16400 + 9] ^= 2
            try:
                opened = _to_host(aescl.chunked.decrypt(key, _to_gpu(library, bytes(sealed))))
            except aescl.AuthenticationError as error:
                if error.chunk != chunk:
                    wrong.append(f"worker {worker}, message {n}: {error}")
                continue
            if opened != data or chunk is not None:
                wrong.append(f"worker {worker}, message {n}: opened wrongly")
        return wrong

    with ThreadPoolExecutor(4) as pool:
        assert [w for found in pool.map(opener, range(4)) for w in found] == []


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_chunked_output_on_cuda_arrays(library):
    """``output=`` on chunked calls: the result in the caller's array (any dtype, as its
    bytes), None returned; zeroed on a failed tag; refused before any work when it does
    not fit. A fresh array's chunks lie after the 56-byte header, not 16-aligned (the
    scratch route); a sealed array aescl returned lies right for the one-pass route."""
    key, salt = os.urandom(32), os.urandom(24)
    data = os.urandom(3 * 16384 + 100)
    expected = aescl.chunked.encrypt(key, data, b"ctx", salt=salt, device="host")
    message = _to_gpu(library, data)
    placed = aescl.chunked.encrypt(key, message, b"ctx")
    for output in (_to_gpu(library, b"\xee" * len(expected)), placed):
        assert aescl.chunked.encrypt(key, message, b"ctx", salt=salt, output=output) is None
        assert _to_host(output) == expected
    as_floats = _to_gpu(library, b"\xee" * len(data)).view(library.float32)
    assert aescl.chunked.decrypt(key, placed, b"ctx", output=as_floats) is None
    assert _to_host(as_floats) == data
    damaged = bytearray(expected)
    damaged[56 + 2 * 16400 + 1] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        aescl.chunked.decrypt(key, _to_gpu(library, bytes(damaged)), b"ctx", output=as_floats)
    assert _to_host(as_floats) == bytes(len(data))
    short = _to_gpu(library, b"\xee" * (len(expected) - 1))
    with pytest.raises(ValueError, match="bytes"):
        aescl.chunked.encrypt(key, message, output=short)
    assert _to_host(short) == b"\xee" * (len(expected) - 1)
    with pytest.raises(TypeError, match="CUDA array"):
        aescl.chunked.encrypt(key, message, output=bytearray(len(expected)))
    with pytest.raises(ValueError, match="overlaps"):  # opened over its own ciphertext
        aescl.chunked.decrypt(key, placed, b"ctx", output=placed[56 : 56 + len(data)])
    assert _to_host(aescl.chunked.decrypt(key, placed, b"ctx")) == data


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_decrypt_range_on_cuda_arrays_matches_the_host(library):
    key = os.urandom(32)
    message = os.urandom(4 * 16384 + 1234)
    sealed = aescl.chunked.encrypt(key, message, device="host")
    on_gpu = _to_gpu(library, sealed)
    for offset, length in [(0, 0), (0, 1), (16383, 2), (16384, 16384), (3 * 16384 + 5, 10**6),
                           (len(message), 5), (len(message) - 1, 1), (777, 40000)]:
        got = aescl.chunked.decrypt_range(key, on_gpu, offset, length)
        assert type(got) is type(on_gpu)
        assert _to_host(got) == message[offset : offset + length], (offset, length)
    damaged = bytearray(sealed)
    damaged[56 + 2 * 16400 + 1] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        aescl.chunked.decrypt_range(key, _to_gpu(library, bytes(damaged)), 2 * 16384, 1)


# ---- JAX arrays: read in place, results made in CuPy and handed to JAX by DLPack -------


@needs_gpu
def test_an_array_that_only_dlpack_describes_is_read_and_written_where_it_lies():
    """cuda.core's Buffer exports DLPack from GPU memory and has no CUDA array interface:
    it is taken as a CUDA array, in place and into ``output=`` (aescl cannot make a
    Buffer for a result, so a call without ``output=`` says so). Its bytes are written
    and read back here through torch's DLPack view of the same memory."""
    torch = pytest.importorskip("torch", reason="torch is not installed (it fills the buffers)")
    from cuda.core import Device

    from aescl.engines.device_arrays import kind_of

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
    spin = cupy.RawKernel(_SPIN, "spin")
    with cupy.cuda.Device(0), cupy.cuda.Stream.null:  # (the legacy default stream)
        spin((1,), (1,), (np.int64(300_000_000),))  # (about 0.15 s)
        run(array)
        in_flight = not cupy.cuda.Stream.null.done
    del array
    later = gpu.allocate(len(data), stream=side)
    moved = int(later.handle) != where
    _check_driver(driver.cuMemsetD8Async(int(later.handle), 0, len(data), int(side.handle)))
    side.sync()
    torch.cuda.synchronize()
    got = output.cpu().numpy().tobytes()
    if not in_flight:
        pytest.skip("the spin was over before the call returned: no work was in flight")
    assert moved, "the next Buffer was put in memory that aescl's work still read"
    assert got == expected


def _check_driver(result: tuple) -> None:
    from cuda.bindings import driver

    assert result[0] == driver.CUresult.CUDA_SUCCESS, result


@pytest.fixture
def jax_gpu():
    """JAX on a CUDA GPU, with CuPy beside it (skipped, visibly, without them). JAX is
    told not to take most of the GPU's memory up front, as it does by default."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    pytest.importorskip("cupy", reason="CuPy is not installed (results for JAX go through it)")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU here")
    return jax, gpu


def _to_jax(jax, gpu, data: bytes):
    import numpy as np

    return jax.device_put(np.frombuffer(data, np.uint8).copy(), gpu)


@needs_gpu
@pytest.mark.parametrize("bits", KEY_BITS)
def test_jax_arrays_through_ecb_and_ctr_match_pycryptodome(jax_gpu, bits):
    import numpy as np

    jax, gpu = jax_gpu
    key, nonce, data = os.urandom(bits // 8), os.urandom(8), os.urandom((1 << 20) + 48)
    array = _to_jax(jax, gpu, data)
    sealed = aescl.new(key, aescl.MODE_ECB).encrypt(array)
    assert isinstance(sealed, jax.Array) and sealed.devices() == {gpu}
    assert np.asarray(sealed).tobytes() == Reference.new(key, Reference.MODE_ECB).encrypt(data)
    assert np.asarray(aescl.new(key, aescl.MODE_ECB).decrypt(sealed)).tobytes() == data
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce)
    parts = [cipher.encrypt(_to_jax(jax, gpu, data[a:b]))
             for a, b in ((0, 5), (5, 70000), (70000, len(data)))]  # (inside blocks)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    assert b"".join(np.asarray(part).tobytes() for part in parts) == expected


_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}"""


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
    first = _to_jax(jax, gpu, zeros)
    first.block_until_ready()
    address = first.unsafe_buffer_pointer()
    del first
    if _to_jax(jax, gpu, zeros).unsafe_buffer_pointer() != address:
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
    spin = cupy.RawKernel(_SPIN, "spin")
    # (a stream of CuPy's own, which no other waits for, JAX's included)
    with cupy.cuda.Device(gpu.id), cupy.cuda.Stream(non_blocking=True) as stream:
        run(_to_jax(jax, gpu, warm))  # (the kernels built before the race)
        stream.synchronize()
        array = _to_jax(jax, gpu, data)
        array.block_until_ready()
        where = array.unsafe_buffer_pointer()
        spin((1,), (1,), (np.int64(300_000_000),))  # (about 0.15 s)
        result = run(array)
        in_flight = not stream.done
        del array
        later = _to_jax(jax, gpu, zeros)  # (written on JAX's stream while the spin runs)
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
        _to_jax(jax, gpu, data))
    expected, expected_tag = Reference.new(key, Reference.MODE_GCM, nonce=nonce) \
        .encrypt_and_digest(data)
    assert isinstance(sealed, jax.Array)
    assert (np.asarray(sealed).tobytes(), tag) == (expected, expected_tag)
    opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce).decrypt_and_verify(sealed, tag)
    assert np.asarray(opened).tobytes() == data
    salt = os.urandom(24)
    message = aescl.chunked.encrypt(key, _to_jax(jax, gpu, data), b"ctx", salt=salt)
    assert isinstance(message, jax.Array)
    assert np.asarray(message).tobytes() == aescl.chunked.encrypt(key, data, b"ctx", salt=salt,
                                                                  device="host")
    assert np.asarray(aescl.chunked.decrypt(key, message, b"ctx")).tobytes() == data
    tampered = bytearray(np.asarray(message).tobytes())
    tampered[56 + 16400 + 7] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 1"):
        aescl.chunked.decrypt(key, _to_jax(jax, gpu, bytes(tampered)), b"ctx")


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_an_input_freed_at_once_is_read_before_its_memory_is_written_again(library):
    """As the JAX test below, for torch and CuPy: the input dropped as the call returns,
    the next array of its size (its library's allocator gives the same memory on the
    same stream) written at once; the result is still the input's."""
    key, nonce = os.urandom(32), os.urandom(12)
    reused = 0
    for _ in range(3):
        plaintext = os.urandom(1 << 28)
        data = _to_gpu(library, plaintext)
        where = data.__cuda_array_interface__["data"][0]
        result = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(data)
        sealed = aescl.chunked.encrypt(key, data, salt=nonce * 2)
        del data
        written = _to_gpu(library, bytes(1 << 28))
        reused += written.__cuda_array_interface__["data"][0] == where
        assert _to_host(result) == aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8]).encrypt(
            plaintext)
        assert _to_host(sealed) == aescl.chunked.encrypt(key, plaintext, salt=nonce * 2)
    if not reused:
        pytest.skip(f"{library.__name__} put none of the next arrays where a freed input was")


class _LibraryStream:
    """A stream of torch's or CuPy's own (not the default one), made current for that
    library: what the library enqueues next, and aescl's work on its arrays, go on it."""

    def __init__(self, library) -> None:
        import cupy

        self._library = library
        if library.__name__ == "torch":
            self._stream = library.cuda.Stream()
            self._context = library.cuda.stream(self._stream)
            self.handle = self._stream.cuda_stream
        else:
            self._stream = self._context = cupy.cuda.Stream(non_blocking=True)
            self.handle = self._stream.ptr
        self.as_cupy = cupy.cuda.ExternalStream(self.handle)

    def __enter__(self) -> _LibraryStream:
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def done(self) -> bool:
        return self._stream.query() if self._library.__name__ == "torch" else self._stream.done

    def copy(self, array):
        return array.clone() if self._library.__name__ == "torch" else array.copy()

    def zeros_like(self, array):
        return self._library.zeros_like(array)


@needs_gpu
@pytest.mark.parametrize("call", ["ctr", "chunked"])
@pytest.mark.parametrize("library", _libraries()[:2])  # (allocators that reuse in order)
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

    spin = cupy.RawKernel(_SPIN, "spin")
    staged = _to_gpu(library, plaintext)
    run(staged[: 1 << 16])  # (the kernels built before the race)
    cupy.cuda.runtime.deviceSynchronize()
    with _LibraryStream(library) as stream:
        spin((1,), (1,), (np.int64(300_000_000),), stream=stream.as_cupy)  # (about 0.15 s)
        data = stream.copy(staged)  # (made behind the spin)
        where = data.__cuda_array_interface__["data"][0]
        result = run(data)
        in_flight = not stream.done()
        del data
        written = stream.zeros_like(staged)
        reused = written.__cuda_array_interface__["data"][0] == where
        got = _to_host(result)
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


# ---- Host data on the CUDA engine (cuda:N as a device like any other) ----------------


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 64 KiB, so that a few MiB cross every feeding thread many times."""
    from aescl.engines.cuda import pipeline

    monkeypatch.setattr(pipeline, "PIECE_BYTES", 64 << 10)


@needs_gpu
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("size", [16, 4096, (3 << 20) + 48])
def test_host_data_ecb_and_ctr_on_cuda_match_pycryptodome(bits, size, small_pieces):
    key, nonce, data = os.urandom(bits // 8), os.urandom(8), os.urandom(size)
    ecb = Reference.new(key, Reference.MODE_ECB)
    assert aescl.new(key, aescl.MODE_ECB, device="cuda").encrypt(data) == ecb.encrypt(data)
    assert aescl.new(key, aescl.MODE_ECB, device="cuda:0").decrypt(data) == ecb.decrypt(data)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data + b"tail")
    cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="cuda")
    # Calls of any length continue the stream (partial blocks at either end).
    assert cipher.encrypt(data[:5]) + cipher.encrypt(data[5:] + b"tail") == expected


@needs_gpu
def test_host_data_on_cuda_into_pinned_memory_and_in_place(small_pieces):
    key, nonce = os.urandom(32), os.urandom(8)
    data = os.urandom(5 << 20)
    expected = Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    source = aescl.pinned_empty(len(data), "cuda")
    target = aescl.pinned_empty(len(data), "cuda")
    source[:] = memoryview(data)
    engine = aescl.engines.engine_for(aescl.get_device("cuda"))
    assert not engine.stages(source, target) and engine.stages(bytearray(16))
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="cuda").encrypt(source, output=target)
    assert target.tobytes() == expected
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="cuda").encrypt(source, output=source)
    assert source.tobytes() == expected


@needs_gpu
@pytest.mark.parametrize("bits", KEY_BITS)
@pytest.mark.parametrize("nonce_bytes", [12, 16])
def test_host_data_gcm_on_cuda_matches_pycryptodome(bits, nonce_bytes, monkeypatch):
    from aescl.engines.cuda import gcm

    monkeypatch.setattr(gcm, "_PIECE_BYTES", 1 << 20)  # (a message of several pieces)
    key, nonce = os.urandom(bits // 8), os.urandom(nonce_bytes)
    data, aad = os.urandom((3 << 20) + 21), os.urandom(37)
    reference = Reference.new(key, Reference.MODE_GCM, nonce=nonce)
    reference.update(aad)
    expected, tag = reference.encrypt_and_digest(data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    cipher.update(aad)
    sealed = cipher.encrypt(data[:7]) + cipher.encrypt(data[7:])
    assert (sealed, cipher.digest()) == (expected, tag)
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    opener.update(aad)
    assert opener.decrypt(sealed[:100]) + opener.decrypt_and_verify(sealed[100:], tag) == data
    output = bytearray(len(sealed))
    refused = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    refused.update(aad)
    with pytest.raises(aescl.AuthenticationError):
        refused.decrypt_and_verify(sealed, bytes(16), output=output)
    assert output == bytearray(len(sealed))  # no plaintext released


@needs_gpu
@pytest.mark.parametrize("pieces", [[16], [7, 9, 250], [256], [257], [100, 300]])
def test_host_data_gcm_on_cuda_hashes_short_texts_on_the_host(pieces, monkeypatch):
    """A call's text of up to ghash.HOST_RUN_BLOCKS blocks is hashed on the host (a call
    longer than that, on the GPU); either way, in pieces that split blocks, in place
    and through decrypt_and_verify, the bytes and tags are pycryptodome's."""
    from aescl import ghash
    from aescl.engines.cuda.gcm import CudaHostGcm

    hashed_on_the_gpu = []
    gpu_sum = CudaHostGcm.partial_sum
    monkeypatch.setattr(CudaHostGcm, "partial_sum", lambda self, *args: (
        hashed_on_the_gpu.append(args[-1]), gpu_sum(self, *args))[1])
    key, nonce, aad = os.urandom(32), os.urandom(12), os.urandom(20)
    data = os.urandom(sum(pieces))
    reference = Reference.new(key, Reference.MODE_GCM, nonce=nonce)
    reference.update(aad)
    expected, tag = reference.encrypt_and_digest(data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    cipher.update(aad)
    sealed, at = b"", 0
    for size in pieces:
        sealed, at = sealed + cipher.encrypt(data[at : at + size]), at + size
    assert (sealed, cipher.digest()) == (expected, tag)
    short = all(ghash.hashed_on_the_host(size) for size in pieces)
    assert (hashed_on_the_gpu == []) == short
    hashed_on_the_gpu.clear()
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    opener.update(aad)
    in_place, at = bytearray(sealed), 0
    for size in pieces:
        view = memoryview(in_place)[at : at + size]
        opener.decrypt(view, output=view)
        at += size
    assert bytes(in_place) == data
    opener.verify(tag)
    checked = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    checked.update(aad)
    assert checked.decrypt_and_verify(sealed, tag) == data
    assert (hashed_on_the_gpu == []) == (short and ghash.hashed_on_the_host(len(sealed)))
    refused = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    refused.update(aad)
    output = bytearray(len(sealed))
    with pytest.raises(aescl.AuthenticationError):
        refused.decrypt_and_verify(sealed, bytes(16), output=output)
    assert output == bytearray(len(sealed))


@needs_gpu
def test_host_data_chunked_on_cuda_is_byte_identical_to_the_host_engine(small_pieces):
    key, salt = os.urandom(32), os.urandom(24)
    for size in [*CHUNK_SIZES, (2 << 20) + 9]:
        data = os.urandom(size)
        sealed = aescl.chunked.encrypt(key, data, b"ctx", salt=salt, device="cuda")
        assert sealed == aescl.chunked.encrypt(key, data, b"ctx", salt=salt, device="host")
        assert aescl.chunked.decrypt(key, sealed, b"ctx", device="cuda") == data
    tampered = bytearray(sealed)
    tampered[56 + 70 * 16400 + 5] ^= 1  # chunk 70: in a later piece than the first
    with pytest.raises(aescl.AuthenticationError, match="chunk 70") as caught:
        aescl.chunked.decrypt(key, bytes(tampered), b"ctx", device="cuda")
    assert caught.value.chunk == 70
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt(key, sealed[: 56 + 4 * 16400], b"ctx", device="cuda")


@needs_gpu
def test_threads_sharing_the_cuda_engine_each_get_their_own_bytes(small_pieces):
    """Eight threads, each its own key and data, on one GPU at once: every result is the
    one pycryptodome gives for that thread's key."""
    from concurrent.futures import ThreadPoolExecutor

    def job(n: int) -> bool:
        key, nonce, data = os.urandom(16), os.urandom(8), os.urandom((1 << 20) + n)
        sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="cuda").encrypt(data)
        chunked_key = os.urandom(32)
        message = aescl.chunked.encrypt(chunked_key, data, device="cuda")
        return (sealed == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
                and aescl.chunked.decrypt(chunked_key, message, device="host") == data)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(job, range(16)))


@needs_gpu
def test_a_file_through_the_cli_on_cuda(tmp_path):
    source = tmp_path / "plain.bin"
    source.write_bytes(os.urandom((3 << 20) + 77))
    key = tmp_path / "k.key"
    key.write_bytes(os.urandom(32))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "aescl", *args], capture_output=True,
                              text=True, timeout=300)

    done = cli("encrypt", "--key-file", str(key), "--device", "cuda", "-o",
               str(tmp_path / "sealed"), str(source))
    assert done.returncode == 0, done.stderr
    done = cli("decrypt", "--key-file", str(key), "--device", "host", "-o",
               str(tmp_path / "opened"), str(tmp_path / "sealed"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "opened").read_bytes() == source.read_bytes()


@needs_gpu
def test_all_takes_each_gpu_once_and_splits_a_job_byte_identically():
    found = aescl.teams.resolve_devices("all")
    addresses = [d.pci_address for d in found if d.type == "gpu" and d.pci_address]
    assert len(addresses) == len(set(addresses))
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(8 << 20)
    both = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=["cuda", "host"]).encrypt(data)
    assert both == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)


@needs_gpu
def test_aescl_bench_reports_the_cuda_engine_and_stores_its_rates(tmp_path):
    env = {**os.environ, "AESCL_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "aescl", "bench", "--device", "cuda",
                           "--quick", "--sizes", "1M,64M", "--mode", "ctr", "--mode",
                           "gcm-chunked", "--key-bits", "256", "--json"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    gpu = json.loads(done.stdout)["targets"][0]
    assert gpu["id"] == "cuda:0" and gpu["backend"] == "cuda"
    assert gpu["build"]["cold_s"] > 0 and gpu["start_s"] > 0
    assert gpu["transfer"]["pinned_h2d_gb_s"] > 0
    for row in gpu["results"]:
        assert row["verified"] is True
        assert min(row["kernel_gb_s"], row["resident_gb_s"], row["host_gb_s"],
                   row["pinned_gb_s"]) > 0
    stored = json.loads((tmp_path / "tuning" / "rates.json").read_text())
    record = next(value for name, value in stored.items() if name.endswith("|cuda"))
    assert record["blocks"] > 0 and record["chunks"] > 0 and record["start-seconds"] > 0
    # The GPU was tuned on first use (the bench's first launch) and says so.
    tuned = gpu["launch"]["tuned"]
    assert tuned is not None and tuned["gb_s"] > 0 and tuned["trials"] == 9
    assert gpu["launch"]["round_tables"] in (1, 2, 4)


def test_the_cuda_launch_shapes_start_with_the_default_and_a_tuning_reads_back():
    from aescl.engines.cuda import tuning

    shapes = tuning.candidates()
    assert shapes[0] == tuning.DEFAULT and len(set(shapes)) == len(shapes) == 9
    trial = tuning.Trial(512, 2, 700.5, True)
    kept = tuning.Tuning("GPU", "CUDA 13.0", "2026-11-24T00:00:00+00:00", 1 << 28, 1.5,
                         trial, tuning.Trial(1024, 1, 690.0), [trial])
    assert tuning.Tuning.from_dict(json.loads(json.dumps(kept.to_dict()))) == kept
    assert kept.chosen.shape == tuning.LaunchShape(512, 2)


@needs_gpu
def test_a_gpu_is_tuned_once_and_later_processes_read_the_tuning(tmp_path, monkeypatch):
    """The first launch tunes the GPU (tuning.launch_shape): every candidate timed, the
    fastest checked against pycryptodome, and the result kept beside the cubins, where a
    later process finds it instead of tuning again. $AESCL_TUNE=0 keeps the default."""
    from aescl.engines.cuda import tuning

    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_memory", {})
    shape = tuning.launch_shape(0)
    kept = tuning.stored(0)
    assert kept is not None and kept.chosen.shape == shape and kept.chosen.verified
    assert len(kept.trials) == 9 and all(t.gb_s for t in kept.trials)
    assert tuning.tuning_path(0).is_file()
    later = subprocess.run(
        [sys.executable, "-c", "from aescl.engines.cuda import tuning; "
         "t = tuning.stored(0); print(t.date, t.chosen.threads, t.chosen.blocks_per_sm)"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "AESCL_CACHE_DIR": str(tmp_path)})
    assert later.stdout.split() == [kept.date, str(shape.threads), str(shape.blocks_per_sm)]
    monkeypatch.setenv("AESCL_TUNE", "0")
    assert tuning.launch_shape(0) == tuning.DEFAULT


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_an_output_that_partly_overlaps_the_input_array_is_refused(library):
    memory = _to_gpu(library, os.urandom(8192 + 64))
    before = _to_host(memory)
    for shift in (-16, 16, 32):
        source, output = memory[32 : 32 + 8192], memory[32 + shift : 32 + shift + 8192]
        for mode, extra in ((aescl.MODE_CTR, {"nonce": bytes(8)}), (aescl.MODE_ECB, {}),
                            (aescl.MODE_GCM, {"nonce": bytes(12)})):
            with pytest.raises(ValueError, match="partly overlaps"):
                aescl.new(bytes(16), mode, **extra).encrypt(source, output=output)
    assert _to_host(memory) == before


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
    assert (_to_host(sealed) if where is None else sealed, tag) == expected
