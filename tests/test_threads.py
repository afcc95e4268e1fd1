"""Every public call from many threads at once: the same bytes as pycryptodome, on every
engine (the OpenCL devices hold a lock per device: aescl/engines/opencl/runtime.py, DeviceRuntime).

Each target gets one pool of threads that run a shuffled mix of ECB, CTR, GCM and the
chunked format's seal and open, at sizes from 0 to 24 MiB, on aligned and unaligned
memory. Before the lock, threads on one OpenCL device got each other's bytes.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from Crypto.Cipher import AES

import aescl
from aescl import chunked, rates
from aescl.chunkformat import SALT_SIZE
from aescl.devices import host_device
from chunked_reference import encrypt as reference_seal
from conftest import selected_devices

THREADS = 6
# Small sizes cross block and chunk edges; the large ones span several pipeline pieces
# and chunk batches. (mode, size) pairs: the large ones only where the reference is fast.
SMALL = [0, 1, 15, 16, 17, 4097, 16384, 16385, (1 << 20) + 3]
LARGE = {"ctr": 24 << 20, "ecb": 8 << 20, "chunked": (8 << 20) + 5, "gcm": 4 << 20}


def _check_one(mode: str, size: int, offset: int, device) -> str | None:
    """Run one call on ``device`` and its pycryptodome equivalent; a description of the
    difference, or None."""
    rng = random.Random(size * 7 + offset)
    key = rng.randbytes(32 if mode == "chunked" else rng.choice((16, 24, 32)))
    if mode == "ecb":
        size -= size % 16
    buffer = bytearray(os.urandom(size + offset))
    data = memoryview(buffer)[offset:]  # offset 1: not aligned for the kernels' loads
    if mode == "ecb":
        decrypt = rng.random() < 0.5
        got = aescl.new(key, aescl.MODE_ECB, device=device)
        got = got.decrypt(data) if decrypt else got.encrypt(data)
        want = AES.new(key, AES.MODE_ECB)
        want = want.decrypt(data) if decrypt else want.encrypt(data)
    elif mode == "ctr":
        nonce = rng.randbytes(8)
        got = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(data)
        want = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data)
    elif mode == "gcm":
        nonce, header = rng.randbytes(12), rng.randbytes(rng.choice((0, 13, 32)))
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device)
        got = cipher.update(header).encrypt_and_digest(data)
        want = AES.new(key, AES.MODE_GCM, nonce=nonce).update(header).encrypt_and_digest(data)
        if got == want:
            opened = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device).update(
                header).decrypt_and_verify(want[0], want[1])
            got, want = opened, bytes(data)
    else:
        sealed = bytes(chunked.encrypt(key, data, b"threads", device=device))
        want_sealed = reference_seal(key, bytes(data), b"threads", sealed[:SALT_SIZE])
        if sealed != want_sealed:
            return f"chunked seal of {size} bytes differs"
        got = bytes(chunked.decrypt(key, memoryview(bytearray(b"x" + sealed))[1:], b"threads",
                                    device=device))
        want = bytes(data)
    return None if bytes(got) == bytes(want) else f"{mode} of {size} bytes (+{offset}) differs"


def _run_all(device) -> None:
    jobs = [(mode, size, offset) for mode in ("ecb", "ctr", "gcm", "chunked")
            for size in [*SMALL, LARGE[mode]] for offset in (0, 1)]
    random.Random(1).shuffle(jobs)
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda job: _check_one(*job, device), jobs))
    wrong = [r for r in results if r is not None]
    assert not wrong, f"{len(wrong)} of {len(jobs)} calls gave other bytes: {wrong[:5]}"


def _first_opencl():
    devices = selected_devices()
    if not devices:
        pytest.skip("no OpenCL device on this machine")
    return devices[0]


@pytest.mark.slow
def test_threads_sharing_an_opencl_device_get_pycryptodomes_bytes():
    _run_all(_first_opencl())


@pytest.mark.slow
def test_threads_on_the_host_engine_get_pycryptodomes_bytes():
    _run_all(host_device())


@pytest.mark.slow
def test_threads_on_all_get_pycryptodomes_bytes():
    _first_opencl()
    _run_all("all")


@pytest.mark.slow
def test_threads_on_the_default_device_get_pycryptodomes_bytes(monkeypatch, tmp_path):
    """With no device named, after ``aescl bench`` stored an OpenCL device as the fastest
    and with OpenCL running in the process: jobs above a MiB go to that device.
    ``aescl bench`` stores a rate for every device: each other one is stored slow here,
    so that no device is left to a guess, a rate this worker measured in another test,
    or a first try (a CPU device only guessed, teams.DefaultTeam.best_device)."""
    device = _first_opencl()
    monkeypatch.delenv("AESCL_DEVICE", raising=False)
    monkeypatch.setattr(rates, "rates_path", lambda: tmp_path / "rates.json")  # this test's
    assert rates.store_rates(device, {"blocks": 1000.0, "chunks": 1000.0}, 64 << 20)
    for other in [host_device(), *aescl.devices()]:
        if other.id != device.id and not other.is_simulator:
            assert rates.store_rates(other, {"blocks": 0.01, "chunks": 0.01}, 64 << 20)
    aescl.new(bytes(16), aescl.MODE_ECB, device=device).encrypt(bytes(16))  # OpenCL is up
    from aescl.teams import team

    assert team(None).for_job(LARGE["ctr"], "blocks").devices == [device]
    _run_all(None)
