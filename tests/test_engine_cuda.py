"""aescl/engines/cuda: the cl/ kernels through NVRTC, and CUDA device arrays in the
ECB and CTR calls.

The build tests run wherever NVRTC is installed (the test extra brings it; no GPU is
needed). The array tests need a CUDA GPU and PyTorch or CuPy, and are skipped,
visibly, elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
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
@pytest.mark.parametrize("arch", ["80", "90"])
@pytest.mark.parametrize("rounds", [10, 12, 14])
def test_every_cuda_kernel_compiles_from_the_one_core(arch, rounds):
    from aescl.engines.cuda import KERNELS, compile_cubin, cuda_defines

    for filename, names in KERNELS.items():
        cubin = compile_cubin(filename, cuda_defines(rounds), arch)
        assert cubin[:4] == b"\x7fELF", filename
        for name in names:  # extern "C": the OpenCL kernel names, unmangled
            assert name.encode() + b"\0" in cubin, (filename, name)


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


def _libraries() -> list:
    found = []
    for name in ("torch", "cupy"):
        try:
            found.append(pytest.param(__import__(name), id=name))
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
    page = (Path(__file__).parents[1] / "docs" / "gpu-arrays.md").read_text()
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
    from aescl.engines.cuda import list_gpus

    gpus = list_gpus()
    assert [g["name"] for g in gpus] == [torch.cuda.get_device_name(n)
                                         for n in range(torch.cuda.device_count())]
    major, minor = torch.cuda.get_device_capability(0)
    assert gpus[0]["arch"] == f"sm_{major}{minor}"
    assert gpus[0]["sms"] == torch.cuda.get_device_properties(0).multi_processor_count
    listed = subprocess.run([sys.executable, "-m", "aescl", "devices"], capture_output=True,
                            text=True, timeout=120)
    assert any(line.startswith("cuda:0 ") and gpus[0]["name"] in line
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
    output = torch.zeros_like(gpu)
    for spec, words in ((f"cuda:{elsewhere}", f"made for cuda:{elsewhere}"),
                        ("host", "runs on the CUDA engine")):
        cipher = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=spec)
        with pytest.raises(ValueError, match=words):
            cipher.encrypt(gpu, output=output)
        with pytest.raises(ValueError, match=words):
            aescl.chunked.encrypt(bytes(32), gpu, device=spec)
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


# ---- the chunked format on CUDA arrays (engines/device_chunks.py) ---------------------

CHUNK_SIZES = [0, 5, 16384, 3 * 16384 + 100, 5 * 16384]


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
@pytest.mark.parametrize("batch", [2, 4096], ids=["batches-of-2", "one-batch"])
def test_chunked_on_cuda_arrays_is_byte_identical_to_the_host_path(library, batch,
                                                                   monkeypatch):
    from aescl.engines import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", batch)
    key, salt = os.urandom(32), os.urandom(24)
    for size in CHUNK_SIZES:
        data = os.urandom(size + 3)
        message = _to_gpu(library, data)[3:]  # (at an offset no allocation starts at)
        sealed = aescl.chunked.encrypt(key, message, b"ctx", salt=salt)
        assert type(sealed) is type(message)
        assert _to_host(sealed) == aescl.chunked.encrypt(key, data[3:], b"ctx", salt=salt,
                                                         device="host")
        assert _to_host(aescl.chunked.decrypt(key, sealed, b"ctx")) == data[3:]


@needs_gpu
@pytest.mark.parametrize("library", _libraries())
def test_chunked_on_cuda_arrays_rejects_what_the_host_path_rejects(library, monkeypatch):
    from aescl.engines import device_chunks

    monkeypatch.setattr(device_chunks, "BATCH_CHUNKS", 2)
    key = os.urandom(32)
    sealed = aescl.chunked.encrypt(key, os.urandom(4 * 16384 + 7), device="host")
    tampered = bytearray(sealed)
    tampered[56 + 3 * 16400 + 5] ^= 1  # chunk 3, in the second batch
    with pytest.raises(aescl.AuthenticationError, match="chunk 3") as caught:
        aescl.chunked.decrypt(key, _to_gpu(library, bytes(tampered)))
    assert caught.value.chunk == 3
    with pytest.raises(aescl.TruncatedError):
        aescl.chunked.decrypt(key, _to_gpu(library, sealed[: 56 + 4 * 16400]))
    with pytest.raises(aescl.WrongKeyError):
        aescl.chunked.decrypt(os.urandom(32), _to_gpu(library, sealed))
