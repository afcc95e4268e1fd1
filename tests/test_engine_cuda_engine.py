"""aescl/engines/cuda/engine.py, pipeline.py and gcm.py: host data on ``cuda:N``, a device
like any other (staged through pinned memory), in every call, the CLI and ``all``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from Crypto.Cipher import AES as Reference
from cuda_arrays import (
    CHUNK_SIZES,
    KEY_BITS,
    needs_gpu,
)

import aescl


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
def test_memory_aescl_shares_is_pinned_for_cuda_until_the_last_array_over_it_goes(small_pieces):
    """Shared memory (a GPU worker's or the host engine's) locked with cuMemHostRegister
    is pinned for the engine's copies, is the same memory, and is let go of with the last
    array over it; memory pinned beside the host engine is that shared memory."""
    from aescl.engines.cuda.pipeline import _pinned_ranges, is_pinned, pin_host_memory
    from aescl.engines.host import shared

    if not shared.AVAILABLE:
        pytest.skip("no memfd here: no shared memory")
    gpu = aescl.get_device("cuda")
    memory = shared.shared_empty(3 << 20)
    pinned = pin_host_memory(memory, [gpu])
    assert is_pinned(pinned) and is_pinned(pinned[4096:8192])
    pinned[:4] = 7
    assert bytes(memory[:4]) == bytes([7] * 4)  # (the same memory, not a copy)
    key, nonce = os.urandom(16), os.urandom(8)
    data = os.urandom(pinned.nbytes)
    pinned[:] = memoryview(data)
    engine = aescl.engines.engine_for(gpu)
    assert not engine.stages(pinned)
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="cuda").encrypt(pinned, output=pinned)
    assert pinned.tobytes() == Reference.new(key, Reference.MODE_CTR, nonce=nonce).encrypt(data)
    start = pinned.__array_interface__["data"][0]

    def registered() -> bool:
        return any(lo == start for lo, _ in list(_pinned_ranges.values()))

    part = pinned[10:]
    del pinned, memory
    assert registered()  # (a slice still holds it)
    del part
    assert not registered()

    beside_host = aescl.pinned_empty(1 << 20, ["cuda", "host"])
    assert shared.locate(beside_host) is not None and is_pinned(beside_host)


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
def test_host_data_gcm_on_cuda_has_its_pieces_in_flight_at_once(monkeypatch):
    """A message's pieces go through the pipeline's streams at once: each piece's GHASH
    waits here until another piece's has begun too (one after another, the first would
    wait alone, and the barrier break), and the bytes and tag are still pycryptodome's,
    the pieces' sums folded in order."""
    from aescl.engines.cuda import gcm, workers

    monkeypatch.setattr(gcm, "_PIECE_BYTES", 1 << 20)
    together = threading.Barrier(2, timeout=30)
    sums = workers.CudaGhash.sums

    def sums_beside_another(self, span, buffer):
        together.wait()
        return sums(self, span, buffer)

    monkeypatch.setattr(workers.CudaGhash, "sums", sums_beside_another)
    key, nonce, data = os.urandom(32), os.urandom(12), os.urandom(4 << 20)
    expected, tag = Reference.new(key, Reference.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    assert cipher.encrypt_and_digest(data) == (expected, tag)
    opener = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device="cuda")
    assert opener.decrypt_and_verify(expected, tag) == data


@needs_gpu
@pytest.mark.parametrize("pieces", [[16], [7, 9, 250], [256], [257], [272], [100, 300]])
def test_host_data_gcm_on_cuda_hashes_short_texts_on_the_host(pieces, monkeypatch):
    """A call's whole blocks (after the rest of a block an earlier call began), up to
    ghash.HOST_RUN_BLOCKS of them, are hashed on the host (more, on the GPU); either way,
    in pieces that split blocks, in place and through decrypt_and_verify, the bytes and
    tags are pycryptodome's."""
    from aescl import ghash
    from aescl.engines.cuda.gcm import CudaHostGcm

    hashed_on_the_gpu = []  # (the side each pass through the GPU hashed there)
    through = CudaHostGcm._through
    monkeypatch.setattr(CudaHostGcm, "_through", lambda self, *args: (
        args[-1] is not None and hashed_on_the_gpu.append(args[-1]), through(self, *args))[1])
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

    def whole_blocks_short(at: int, size: int) -> bool:
        head = min(size, -at % 16)
        return ghash.hashed_on_the_host((size - head) // 16 * 16)

    short = all(whole_blocks_short(sum(pieces[:i]), size) for i, size in enumerate(pieces))
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
    assert (hashed_on_the_gpu == []) == (short and whole_blocks_short(0, len(sealed)))
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
def test_a_chunk_jobs_key_tables_are_made_on_a_stream_of_their_own(small_pieces):
    """Made and waited for on the first piece's stream, the tables' wait took that
    piece's upload with it, the other pieces' set-ups waiting on the tables' lock: they
    are made on a stream of their own, which the pieces' streams wait for on the GPU
    (KeyTables.on)."""
    from aescl.chunkformat import CHUNK_SIZE, SEALED_CHUNK_SIZE

    key, nonce = os.urandom(32), os.urandom(12)
    engine = aescl.engines.engine_for(aescl.get_device("cuda:0"))
    job = engine.chunks(key, nonce, 1024)
    data = os.urandom(40 * CHUNK_SIZE)
    sealed = job.seal(data, 7, final=False)
    assert list(job._tables._made) == [0]
    stream, _ = job._tables._made[0]
    assert all(stream != slot_stream for slot_stream in job._slot_kernels)
    assert len(sealed) == 40 * SEALED_CHUNK_SIZE
    host = aescl.engines.engine_for(aescl.get_device("host")).chunks(key, nonce, 1024)
    assert bytes(sealed) == bytes(host.seal(data, 7, final=False))
    assert bytes(job.open(sealed, 7, final=False)) == data


@needs_gpu
def test_a_chunk_jobs_pieces_share_one_set_of_kernels_a_slot_and_record_no_events(
        small_pieces, monkeypatch):
    """A piece's set-up is host time under the GIL the slots' threads share: the kernels
    are made once a slot's stream, and no piece records an event for the key's tables
    (each piece's stream is waited for before the piece ends)."""
    from aescl.chunkformat import CHUNK_SIZE
    from aescl.engines.cuda import engine as cuda_engine
    from aescl.engines.cuda.pipeline import SLOTS

    made = []
    real = cuda_engine.CudaChunkKernels

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cuda_engine, "CudaChunkKernels", counted)
    key, nonce = os.urandom(32), os.urandom(12)
    job = aescl.engines.engine_for(aescl.get_device("cuda:0")).chunks(key, nonce, 1024)
    data = os.urandom(64 * CHUNK_SIZE + 100)  # (64 KiB pieces: 65 of them, and the final)
    sealed = job.seal(data, 0, final=True)
    host = aescl.engines.engine_for(aescl.get_device("host")).chunks(key, nonce, 1024)
    assert bytes(sealed) == bytes(host.seal(data, 0, final=True))
    assert bytes(job.open(sealed, 0, final=True)) == data
    assert 1 <= len(made) <= SLOTS
    assert job._tables._after == {}


@needs_gpu
def test_an_openings_plaintext_goes_back_beside_its_verdict_and_is_zeroed_where_a_tag_failed(
        small_pieces, monkeypatch):
    """Each opened piece's copy to the host is enqueued before the wait for its verdict
    (checked afterwards, every piece waited out the host's round trip between the two:
    one H200 opened at 44.8 GB/s against 47.4 sealing); where a tag failed, the pinned
    target's bytes of that piece are zeroes when the error is raised, and the pieces
    that passed hold their plaintext."""
    from cuda.bindings import driver

    from aescl.chunkformat import CHUNK_SIZE, SEALED_CHUNK_SIZE
    from aescl.engines.cuda.pipeline import PIECE_BYTES
    from aescl.engines.programs.device_chunks import VERDICT_BYTES

    key, nonce = os.urandom(32), os.urandom(12)
    job = aescl.engines.engine_for(aescl.get_device("cuda:0")).chunks(key, nonce, 1024)
    count, per_piece = 40, PIECE_BYTES // SEALED_CHUNK_SIZE
    data = os.urandom(count * CHUNK_SIZE)
    sealed = aescl.pinned_empty(count * SEALED_CHUNK_SIZE, "cuda:0")
    sealed[:] = job.seal(data, 0, final=False)
    opened = aescl.pinned_empty(count * CHUNK_SIZE, "cuda:0")
    copies: dict[int, list[int]] = {}  # thread -> bytes of each copy to the host, in order
    real_copy = driver.cuMemcpyDtoHAsync

    def noted(host, device, nbytes, stream):
        import threading

        copies.setdefault(threading.get_ident(), []).append(nbytes)
        return real_copy(host, device, nbytes, stream)

    monkeypatch.setattr(driver, "cuMemcpyDtoHAsync", noted)
    opened[:] = 0xAA
    job.open_ranges(sealed, opened, 0, iter([(0, count)]))
    assert opened.tobytes() == data
    pieces = [n for sizes in copies.values() for n in sizes if n != VERDICT_BYTES]
    assert sorted(pieces) == sorted(
        min(per_piece, count - lo) * CHUNK_SIZE for lo in range(0, count, per_piece))
    for sizes in copies.values():  # (a piece's plaintext, then its verdict: on its thread)
        assert sizes[1::2] == [VERDICT_BYTES] * (len(sizes) // 2) and len(sizes) % 2 == 0
    bad = 4 * per_piece + 1  # (in the fifth piece)
    sealed[bad * SEALED_CHUNK_SIZE + 3] ^= 1
    opened[:] = 0xAA
    with pytest.raises(aescl.AuthenticationError) as caught:
        job.open_ranges(sealed, opened, 0, iter([(0, count)]))
    assert caught.value.chunk == bad
    piece = slice(4 * per_piece * CHUNK_SIZE, 5 * per_piece * CHUNK_SIZE)
    assert opened[piece].tobytes() == bytes(piece.stop - piece.start)
    others = [lo for lo in range(0, count, per_piece) if lo != 4 * per_piece]
    for lo in others:  # (each either opened or never written: never another's bytes)
        span = slice(lo * CHUNK_SIZE, min(count, lo + per_piece) * CHUNK_SIZE)
        assert opened[span].tobytes() in (data[span], b"\xaa" * (span.stop - span.start))


@needs_gpu
def test_threads_sharing_the_cuda_engine_each_get_their_own_bytes(small_pieces):
    """Eight threads, each its own key and data, on one GPU at once: every result is the
    one pycryptodome gives for that thread's key."""

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
