"""aescl/engines/programs/device_messages.py: many GCM messages of one length in one launch
a batch, through each engine's fused kernel (NVIDIA's OpenCL and CUDA where a GPU is;
PoCL on the T-table rounds) or a CPU device's one-pass kernel (PoCL on the AES
instructions, cl/chunk_seal.cl), against pyca's AESGCM message by message: J0s from any
nonce length, and the associated data's share of each tag made on the host."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as PycaAESGCM
from test_aead import _device_array_kinds

from aescl.engines.programs import device_messages
from aescl.engines.registry import array_kind_of


def _job(array, key: bytes):
    return array_kind_of(array).messages(key, None)


@pytest.fixture(params=["own", "t-tables"])
def rounds(request, monkeypatch):
    """The devices' own rounds, or the T-table rounds, whose build has the fused kernel
    on a CPU device too."""
    if request.param == "t-tables":
        monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")


@pytest.mark.parametrize("kind", _device_array_kinds())
@pytest.mark.parametrize("nonce_bytes", [12, 8, 60])
@pytest.mark.parametrize("aad", ["none", "common", "each"])
@pytest.mark.parametrize("count", [9, 1])  # (1: its J0 goes by value)
# (29 blocks: on a CPU device, whole runs of blocks in flight, then single blocks)
@pytest.mark.parametrize("length", [80, 464])
def test_the_rows_are_sealed_in_one_launch_as_pyca_seals_each(kind, nonce_bytes, aad, count,
                                                              length, rounds):
    to_device, to_bytes = kind()
    key = os.urandom(32)
    nonces = [os.urandom(nonce_bytes) for _ in range(count)]
    messages = [os.urandom(length) for _ in range(count)]
    common = os.urandom(37)
    each = [os.urandom(n) for n in (0, 1, 15, 16, 17, 33, 100, 0, 5)][-count:]
    aads = {"none": [None] * count, "common": [common] * count, "each": each}[aad]
    plan = device_messages.plan(key, nonces, length,
                                common_aad=common if aad == "common" else None,
                                each_aad=each if aad == "each" else None)
    grid = to_device(b"".join(messages))
    sealed = _job(grid, key).seal_messages(grid, plan)
    assert sealed is not None  # (taken by the one-launch way, not message by message)
    pyca = PycaAESGCM(key)
    expected = [pyca.encrypt(n, m, a) for n, m, a in zip(nonces, messages, aads, strict=True)]
    assert to_bytes(sealed) == b"".join(expected)
    called = []
    opened, first_failed = _job(sealed, key).open_messages(sealed, plan,
                                                           lambda: called.append(1))
    assert first_failed == count and to_bytes(opened) == b"".join(messages)
    assert called == [1]  # (the caller's own check, while the device works)


@pytest.mark.parametrize("kind", _device_array_kinds())
def test_opening_names_the_first_failed_message(kind, rounds):
    to_device, to_bytes = kind()
    key, count, length = os.urandom(16), 6, 32
    nonces = [os.urandom(12) for _ in range(count)]
    messages = [os.urandom(length) for _ in range(count)]
    plan = device_messages.plan(key, nonces, length, common_aad=b"header")
    pyca = PycaAESGCM(key)
    sealed = bytearray(b"".join(pyca.encrypt(n, m, b"header")
                                for n, m in zip(nonces, messages, strict=True)))
    sealed[4 * (length + 16) + length + 3] ^= 1  # (message 4's tag)
    sealed[2 * (length + 16) + 5] ^= 1  # (message 2's text)
    array = to_device(bytes(sealed))
    _, first_failed = _job(array, key).open_messages(array, plan)
    assert first_failed == 2


@pytest.mark.parametrize("length", [0, 5, 100])
def test_rows_off_block_boundaries_or_empty_are_left_to_the_caller(length):
    assert not device_messages.fits(length, 4)
    assert device_messages.fits(64, 4) and not device_messages.fits(64, 0)


def test_the_associated_datas_share_is_what_a_tag_gains_by_it():
    """The share made on the host: the tag with AAD is the tag without it, XOR the share
    (GHASH is linear in its blocks), for AAD of every length across block boundaries."""
    key, nonce = os.urandom(24), os.urandom(12)
    pyca = PycaAESGCM(key)
    for text_bytes in (16, 48):
        text = os.urandom(text_bytes)
        bare = pyca.encrypt(nonce, text, None)[-16:]
        for aad_bytes in (1, 16, 17, 64):
            aad = os.urandom(aad_bytes)
            plan = device_messages.plan(key, [nonce], text_bytes, common_aad=aad)
            with_aad = pyca.encrypt(nonce, text, aad)[-16:]
            assert bytes(np.bitwise_xor(np.frombuffer(bare, np.uint8),
                                        np.frombuffer(plan.masks, np.uint8))) == with_aad


@pytest.mark.parametrize("engine, name", [("opencl", "OpenclChunkKernels"),
                                          ("cuda", "CudaChunkKernels")])
def test_each_engines_chunk_kernels_set_what_the_programs_read(engine, name):
    """The programs read ChunkKernels' attributes (``fused``, ``takes_messages``) of
    whichever engine runs them: each engine's class sets every one. Read from the
    source, so that the CUDA engine's is checked where no GPU or CUDA library is."""
    import ast
    from pathlib import Path

    import aescl
    from aescl.engines.programs.device_chunks import ChunkKernels

    source = Path(aescl.__file__).parent / "engines" / engine / "workers.py"
    tree = ast.parse(source.read_text())
    (found,) = [node for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and node.name == name]
    assigned = {target.attr for node in ast.walk(found)
                for target in getattr(node, "targets", [getattr(node, "target", None)])
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self"}
    assert set(ChunkKernels.__annotations__) <= assigned, name
