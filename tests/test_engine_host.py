"""aescl/engines/host.py: the host engine's own rules, beyond the public-API tests that run
on it (RUNS_ON_ENGINES): several threads and pieces, counter wraps inside a piece, and
what a failed chunk leaves behind."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import chunked
from aescl.devices import host_device
from aescl.engines import BlockTransform
from aescl.engines.host import HostEngine
from aescl.engines.host import engine as host

CHUNK, SEALED = chunked.CHUNK_SIZE, chunked.SEALED_CHUNK_SIZE


@pytest.fixture
def engine(monkeypatch) -> HostEngine:
    # Small pieces and more threads than cores: every piece boundary and hand-over shows.
    monkeypatch.setattr(host, "PIECE_BYTES", 3 * CHUNK)
    return HostEngine(host_device(), threads=4)


def test_ctr_pieces_and_a_counter_field_that_wraps_inside_one(engine):
    key, nonce = os.urandom(16), os.urandom(15)  # an 8-bit counter field
    data = np.frombuffer(os.urandom(16 * 200), np.uint8)
    out = np.zeros_like(data)
    prefix = int.from_bytes(nonce, "big") << 8
    worker = engine.blocks(BlockTransform(key, counter=prefix | 250, counter_bits=8))
    worker.run(data, out, iter([(0, 120), (120, 200)]))
    expected = AES.new(key, AES.MODE_CTR, nonce=nonce, initial_value=250).encrypt(data.tobytes())
    assert out.tobytes() == expected
    assert worker.keystream(6) == AES.new(key, AES.MODE_CTR, nonce=nonce,
                                          initial_value=0).encrypt(bytes(16))


def _sealed_as_pycryptodome(engine: HostEngine) -> tuple[Any, bytes, bytearray]:
    """20 chunks sealed by ``engine`` (message chunks 7..26, in two ranges), checked
    chunk by chunk against pycryptodome; the worker, the plaintext and the sealed run."""
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(20 * CHUNK)
    sealed = bytearray(20 * SEALED)
    worker = engine.chunks(key, base_nonce)
    worker.seal_ranges(plaintext, sealed, 7, iter([(0, 11), (11, 20)]))
    for k in range(20):
        cipher = AES.new(key, AES.MODE_GCM, nonce=chunked.chunk_nonce(base_nonce, 7 + k))
        text, tag = cipher.encrypt_and_digest(plaintext[k * CHUNK : (k + 1) * CHUNK])
        assert sealed[k * SEALED : (k + 1) * SEALED] == text + tag, k
    return worker, plaintext, sealed


def test_chunks_on_several_threads_match_pycryptodome(engine):
    _sealed_as_pycryptodome(engine)


def _opened_with_chunks_4_and_16_modified(engine: HostEngine) -> tuple[Any, bytes, bytes,
                                                                         bytearray]:
    """20 chunks sealed, chunks 4 and 16 modified, opened by ``engine`` into a buffer of
    0xaa: the lowest failed chunk is named. The worker, the plaintext, the sealed run and
    what the opening left in the buffer."""
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(20 * CHUNK)
    worker = engine.chunks(key, base_nonce)
    sealed = bytearray(worker.seal(plaintext, 0, final=False))
    for bad in (4, 16):
        sealed[bad * SEALED + 100] ^= 1
    opened = bytearray(b"\xaa" * len(plaintext))
    with pytest.raises(aescl.AuthenticationError, match="chunk 4 failed") as caught:
        engine.chunks(key, base_nonce).open_ranges(sealed, opened, 0, iter([(0, 20)]))
    assert caught.value.chunk == 4
    return worker, plaintext, bytes(sealed), opened


def test_a_failed_chunk_is_named_lowest_first_and_leaves_no_plaintext(engine):
    worker, plaintext, sealed, opened = _opened_with_chunks_4_and_16_modified(engine)
    # OpenSSL writes a chunk's plaintext before it checks the tag: the engine wipes it.
    assert opened[4 * CHUNK : 5 * CHUNK] == bytes(CHUNK)
    with pytest.raises(aescl.AuthenticationError, match="chunk 4"):
        worker.open(sealed, 0, final=False)


@pytest.fixture
def staging(monkeypatch) -> HostEngine:
    # Ordinary memory staged through shared memory to the worker processes, in pieces of
    # 3 chunks: every piece boundary shows (the route's speed is the 16-core host's). As
    # many threads as the process's own host engine, whose worker processes these are.
    threads = host_device().compute_units
    monkeypatch.setattr(host, "STAGE_MIN_CORES", threads)
    monkeypatch.setattr(host, "STAGE_MIN_BYTES", CHUNK)
    monkeypatch.setattr(host, "STAGE_CHUNKS", 3)
    engine = HostEngine(host_device(), threads=threads)
    if not engine.processes:
        pytest.skip("no shared memory for worker processes here (memfd)")
    return engine


def test_chunks_staged_to_the_worker_processes_match_pycryptodome(staging):
    worker, plaintext, sealed = _sealed_as_pycryptodome(staging)
    assert staging.staging._buffers is not None  # (the staged route ran, not threads)
    opened = bytearray(20 * CHUNK)
    worker.open_ranges(sealed, opened, 7, iter([(0, 20)]))
    assert opened == plaintext


def test_a_staged_piece_with_a_failed_chunk_never_leaves_staging(staging):
    _, plaintext, _, opened = _opened_with_chunks_4_and_16_modified(staging)
    # Chunks 0-2 passed and were copied out; the piece of chunks 3-5 was not, nor any after.
    assert opened[: 3 * CHUNK] == plaintext[: 3 * CHUNK]
    assert opened[3 * CHUNK :] == b"\xaa" * (17 * CHUNK)


@pytest.fixture
def reaching(monkeypatch) -> HostEngine:
    # Ordinary memory worked on by the worker processes straight (reach.py), from one
    # chunk on; with jobs of 200 chunks each worker's piece crosses its 64-chunk buffers.
    threads = host_device().compute_units
    monkeypatch.setattr(host, "STAGE_MIN_CORES", threads)
    monkeypatch.setattr(host, "REACH_MIN_BYTES", CHUNK)

    def no_threads(*args):
        raise AssertionError("the job ran on this process's threads, not in the workers")

    monkeypatch.setattr(host, "_on_threads", no_threads)
    engine = HostEngine(host_device(), threads=threads)
    if not engine.processes:
        pytest.skip("no worker processes here (memfd)")
    from aescl.engines.host import processes

    if not processes.workers(engine.device, engine.threads).can_reach():
        pytest.skip("this kernel lets no child read its parent's memory (Yama ptrace_scope)")
    return engine


def _chunks_as_pycryptodome(key: bytes, base_nonce: bytes, first: int,
                            plaintext: bytes) -> bytes:
    sealed = []
    for at in range(0, len(plaintext), CHUNK):
        cipher = AES.new(key, AES.MODE_GCM,
                         nonce=chunked.chunk_nonce(base_nonce, first + at // CHUNK))
        sealed += cipher.encrypt_and_digest(plaintext[at : at + CHUNK])
    return b"".join(sealed)


def test_chunks_on_ordinary_memory_are_sealed_by_the_workers_in_place(reaching):
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(200 * CHUNK)
    worker = reaching.chunks(key, base_nonce)
    sealed = np.zeros(200 * SEALED, np.uint8)  # (a NumPy array: the caller's output=)
    worker.seal_ranges(plaintext, sealed, 5, iter([(0, 130), (130, 200)]))
    assert reaching.staging._buffers is None  # (not copied through shared memory)
    assert sealed.tobytes() == _chunks_as_pycryptodome(key, base_nonce, 5, plaintext)
    opened = bytearray(200 * CHUNK)
    worker.open_ranges(sealed, opened, 5, iter([(0, 200)]))
    assert opened == plaintext
    whole = worker.seal(plaintext[: 150 * CHUNK + 9], 0, final=True)  # (a fresh result)
    assert bytes(whole) == _chunks_as_pycryptodome(key, base_nonce, 0,
                                                   plaintext[: 150 * CHUNK + 9])


def test_a_failed_chunk_opened_in_place_by_the_workers_is_never_written(reaching):
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(200 * CHUNK)
    worker = reaching.chunks(key, base_nonce)
    sealed = bytearray(worker.seal(plaintext, 0, final=False))
    sealed[70 * SEALED + 9] ^= 1
    opened = bytearray(b"\xaa" * len(plaintext))
    with pytest.raises(aescl.AuthenticationError, match="chunk 70 failed"):
        worker.open_ranges(sealed, opened, 0, iter([(0, 200)]))
    assert opened[70 * CHUNK : 71 * CHUNK] == b"\xaa" * CHUNK
    # What was written is each chunk's own plaintext: authenticated, in its place.
    for k in range(200):
        got = opened[k * CHUNK : (k + 1) * CHUNK]
        assert got in (b"\xaa" * CHUNK, plaintext[k * CHUNK : (k + 1) * CHUNK]), k


def test_on_few_cores_the_second_large_job_starts_the_workers_for_those_after(monkeypatch):
    """On a host of fewer than STAGE_MIN_CORES cores, starting the workers costs more than
    one job gains from them: the first large chunk job on ordinary memory runs on a
    thread and starts nothing; the second starts them on a thread of their own and runs
    here meanwhile; once they run, the jobs go to them (reach.py), each pyca's bytes."""
    from aescl.engines.host import processes

    threads = 2
    monkeypatch.setattr(host, "STAGE_MIN_CORES", threads + 1)
    monkeypatch.setattr(host, "REACH_MIN_BYTES", 8 * CHUNK)
    processes.shutdown()  # (none running from earlier tests)
    engine = HostEngine(host_device(), threads=threads)
    if not engine.processes:
        pytest.skip("no worker processes here (memfd)")
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(20 * CHUNK)
    expected = _chunks_as_pycryptodome(key, base_nonce, 0, plaintext)
    worker = engine.chunks(key, base_nonce)

    def sealed_here() -> bytes:
        sealed = bytearray(20 * SEALED)
        worker.seal_ranges(plaintext, sealed, 0, iter([(0, 20)]))
        return bytes(sealed)

    assert sealed_here() == expected
    assert not processes.running(threads) and not processes._starting
    assert sealed_here() == expected  # (started on a thread beside it)
    for _ in range(600):
        if processes.running(threads) or processes._start_failed:
            break
        time.sleep(0.1)
    if processes._start_failed:
        pytest.skip("the host engine's worker processes could not start here")
    assert processes.running(threads)
    if not processes.workers(engine.device, threads).can_reach():
        pytest.skip("this kernel lets no child read its parent's memory (Yama ptrace_scope)")

    def no_threads(*args):
        raise AssertionError("the job ran on this process's threads, not in the workers")

    monkeypatch.setattr(host, "_on_threads", no_threads)
    assert sealed_here() == expected
    opened = bytearray(20 * CHUNK)
    worker.open_ranges(expected, opened, 0, iter([(0, 20)]))
    assert opened == plaintext


def test_a_forked_child_starts_workers_of_its_own(reaching):
    """A forked child's jobs must not go to its parent's workers: they share the parent's
    sockets, and they would reach into the parent's memory."""
    from aescl.engines.host import processes

    parents = processes.workers(reaching.device, reaching.threads)
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(100 * CHUNK)
    expected = _chunks_as_pycryptodome(key, base_nonce, 0, plaintext)
    child = os.fork()
    if child == 0:
        code = 1
        try:
            sealed = bytearray(100 * SEALED)
            reaching.chunks(key, base_nonce).seal_ranges(plaintext, sealed, 0,
                                                         iter([(0, 100)]))
            ours = processes._workers
            code = 0 if sealed == expected and ours is not parents else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert processes._workers is parents


def test_a_small_job_or_a_host_of_few_cores_stays_on_threads(monkeypatch):
    monkeypatch.setattr(host, "STAGE_MIN_BYTES", 4 * CHUNK)
    key, base_nonce = os.urandom(32), os.urandom(12)
    for threads, chunks in ((host.STAGE_MIN_CORES - 1, 8), (host.STAGE_MIN_CORES, 3)):
        engine = HostEngine(host_device(), threads=threads)
        sealed = bytearray(chunks * SEALED)
        engine.chunks(key, base_nonce).seal_ranges(os.urandom(chunks * CHUNK), sealed, 0,
                                                   iter([(0, chunks)]))
        assert engine.staging._buffers is None


def test_the_host_is_a_device_like_the_others():
    assert aescl.get_device("host") == host_device()
    assert aescl.devices()[-1].id == "host"
    assert not host_device().is_opencl
    pinned = aescl.pinned_empty(100, "host")  # ordinary memory: the engine works in place
    assert pinned.nbytes == 100


def test_a_gcm_stream_runs_on_the_engines_threads_unless_told_fewer(engine):
    """``threads`` left out is every core (aescl.new's promise); pycryptodome's own
    default is one thread, and the host engine's GCM ran on one (0.89 GB/s against 1.58
    on both cores of the CI kind, 256 MiB). pycryptodome 4.4 keeps the count on its
    GHASH object."""
    stream = engine.gcm(bytes(16), bytes(12), 16, "host")
    assert stream._cipher._signer._threads == engine.threads == 4
    assert engine.gcm(bytes(16), bytes(12), 16, "host", threads=1)._cipher._signer._threads == 1
    data = os.urandom(3 * CHUNK + 5)
    assert stream.encrypt_and_digest(data) == AES.new(bytes(16), AES.MODE_GCM,
                                                      nonce=bytes(12)).encrypt_and_digest(data)
