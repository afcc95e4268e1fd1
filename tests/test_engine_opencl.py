"""aescl/engines/opencl/: the OpenCL engine through the engine interface, as the scheduler
and ``aescl bench`` use it: block and chunk workers over ranges, what it says of host
arrays, and its own figures (the modes' and the format's tests run on it too)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from Crypto.Cipher import AES

from aescl import AuthenticationError, chunked
from aescl.engines import BlockTransform, engine_for
from aescl.engines.opencl import OpenclEngine, pinned_empty
from aescl.engines.opencl import pipeline as streaming

CHUNK, SEALED = chunked.CHUNK_SIZE, chunked.SEALED_CHUNK_SIZE


def test_the_engine_of_an_opencl_device_is_the_opencl_engine(device):
    engine = engine_for(device)
    assert isinstance(engine, OpenclEngine) and engine_for(device) is engine
    assert engine.on_host_cores == (device.type == "cpu")
    assert not engine.in_interpreter(np.zeros(16, np.uint8))


def test_block_ranges_in_any_order_give_pycryptodomes_bytes(device):
    key, iv = os.urandom(32), os.urandom(16)
    data = np.frombuffer(os.urandom(16 * 5000), np.uint8)
    out = np.zeros_like(data)
    worker = engine_for(device).blocks(BlockTransform(key, counter=int.from_bytes(iv, "big")))
    worker.run(data, out, iter([(3000, 5000), (0, 1), (1, 3000)]))
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data.tobytes())
    assert out.tobytes() == expected
    assert worker.keystream(7) == AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(
        bytes(16 * 8))[-16:]
    ecb = engine_for(device).blocks(BlockTransform(key, decrypt=True))
    ecb.run(out, out, iter([(0, 5000)]))  # in place
    assert out.tobytes() == AES.new(key, AES.MODE_ECB).decrypt(expected)


def test_chunk_ranges_seal_and_open_as_the_format_says(device):
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = np.frombuffer(os.urandom(9 * CHUNK), np.uint8)
    sealed = np.zeros(9 * SEALED, np.uint8)
    worker = engine_for(device).chunks(key, base_nonce, 4)
    worker.seal_ranges(plaintext, sealed, 100, iter([(5, 9), (0, 5)]))
    for k in range(9):
        cipher = AES.new(key, AES.MODE_GCM, nonce=chunked.chunk_nonce(base_nonce, 100 + k))
        text, tag = cipher.encrypt_and_digest(plaintext[k * CHUNK : (k + 1) * CHUNK].tobytes())
        assert sealed[k * SEALED : (k + 1) * SEALED].tobytes() == text + tag, k
    opened = np.zeros_like(plaintext)
    worker.open_ranges(sealed, opened, 100, iter([(0, 9)]))
    assert np.array_equal(opened, plaintext)


@pytest.mark.parametrize(("chunk", "byte"), [(0, 0), (5, 15), (8, 7), (8, 8)])
def test_a_changed_byte_of_any_tag_names_its_chunk_and_releases_none_of_its_piece(
        device, chunk, byte, monkeypatch):
    # (pieces of 4 chunks: the tags are compared a piece at a time, 8 bytes at a time;
    # the pieces asked, though a GPU stages these arrays)
    monkeypatch.setattr(streaming, "STAGED_PIECE_BYTES", CHUNK)
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = np.frombuffer(os.urandom(9 * CHUNK), np.uint8)
    sealed = np.zeros(9 * SEALED, np.uint8)
    worker = engine_for(device).chunks(key, base_nonce, 4)
    worker.seal_ranges(plaintext, sealed, 100, iter([(0, 9)]))
    sealed[chunk * SEALED + CHUNK + byte] ^= 0x80
    opened = np.zeros_like(plaintext)
    with pytest.raises(AuthenticationError) as failure:
        worker.open_ranges(sealed, opened, 100, iter([(0, 9)]))
    assert failure.value.chunk == 100 + chunk
    piece = chunk // 4 * 4
    assert np.array_equal(opened[: piece * CHUNK], plaintext[: piece * CHUNK])
    assert not opened[piece * CHUNK :].any()


def test_what_it_says_of_host_arrays(device):
    engine = engine_for(device)
    ordinary = np.zeros(1 << 16, np.uint8)
    pinned = pinned_empty(1 << 16, device)
    apart = not engine.on_host_cores and device.type != "cpu"
    assert engine.stages(ordinary) == apart  # a GPU stages ordinary memory
    assert not engine.stages(pinned)
    assert engine.host_array(4096).nbytes == 4096


def test_its_own_figures_for_bench(device):
    engine = engine_for(device)
    figures = engine.device_figures(1 << 20, 0)
    assert set(figures) == {"build", "launch", "transfer", "start_s"}
    assert figures["start_s"] > 0  # (a fresh process's, over the host engine's)
    assert figures["transfer"]["pinned_h2d_gb_s"] > 0
    data = np.frombuffer(os.urandom(1 << 20), np.uint8)
    kernel, resident = engine.resident_seconds("ctr", os.urandom(16), os.urandom(16), data,
                                               data.nbytes, 0)
    assert 0 < kernel and 0 < resident


@pytest.mark.parametrize("mode", ["ecb-encrypt", "gcm-chunked"])
def test_resident_figures_of_every_mode(device, mode):
    data = np.frombuffer(os.urandom(4 * CHUNK), np.uint8)
    iv = os.urandom(12 if mode == "gcm-chunked" else 16)
    output = chunked.sealed_size(data.nbytes, raw=True) if mode == "gcm-chunked" else data.nbytes
    kernel, resident = engine_for(device).resident_seconds(
        mode, os.urandom(32), iv, data, output, 0)
    assert kernel > 0 and resident > 0


def _refusal(call: str) -> Any:
    """A stand-in for a driver call that refuses as NVIDIA's OpenCL does when a GPU has no
    room for another context (the GPU suite under pytest -n 8, docs/benchmarks). PoCL
    gives no such refusal here, so the call raises pyopencl's own error for it."""
    import pyopencl as cl

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise cl.RuntimeError(cl._cl._ErrorRecord(call, -6, "OUT_OF_HOST_MEMORY"))
    return refuse


def test_a_driver_that_refuses_a_context_is_one_aescl_error(device, monkeypatch):
    """aescl's own context and a caller's queue: DeviceUnavailable naming the device and
    what the driver said, nothing half made kept, and the device starts once the driver
    gives a context again."""
    import re

    import pyopencl as cl

    import aescl
    from aescl.engines.opencl import runtime

    callers = cl.Context([device.cl_device])
    kept = runtime._runtimes.pop(device.id, None)
    said = f"cannot start {re.escape(device.id)} .*OUT_OF_HOST_MEMORY"
    try:
        with monkeypatch.context() as refusing:
            refusing.setattr(cl, "Context", _refusal("clCreateContext"))
            with pytest.raises(aescl.DeviceUnavailable, match=said):
                runtime.device_runtime(device)
            assert device.id not in runtime._runtimes
        with monkeypatch.context() as refusing:
            refusing.setattr(cl, "CommandQueue", _refusal("clCreateCommandQueue"))
            with pytest.raises(aescl.DeviceUnavailable, match=said):
                runtime.device_runtime(device, callers)
        assert runtime.device_runtime(device, callers).context == callers
        assert runtime.device_runtime(device).queue is not None
    finally:
        if kept is not None:
            runtime._runtimes[device.id] = kept
