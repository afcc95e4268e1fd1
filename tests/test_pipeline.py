"""aescl/streaming.py: overlapped pieces through the device, pinned and pageable host memory."""

import gc
import os
import time
import weakref

import numpy as np
import pytest
from Crypto.Cipher import AES
from held_queue import runs_while_its_queue_waits

import aescl
from aescl import chunked
from aescl.engines import BlockTransform, host_copies
from aescl.engines.host import shared
from aescl.engines.opencl import OpenclBlocks, OpenclHostChunks
from aescl.engines.opencl import pipeline as streaming
from aescl.engines.opencl.pipeline import (
    SLOTS,
    Piece,
    is_pinned,
    pin_host_memory,
    pinned_empty,
    pipeline,
)


def _ctr(key, device):
    """The OpenCL engine's CTR worker from counter block 0."""
    return OpenclBlocks(device, BlockTransform(key, counter=0))


def test_pinned_memory_is_recognised_with_its_slices(device):
    pinned = aescl.pinned_empty(4096, device)
    assert pinned.dtype == np.uint8 and pinned.nbytes == 4096
    assert is_pinned(pinned, device) and is_pinned(pinned[100:200], device)
    assert not is_pinned(np.empty(4096, np.uint8), device)
    with pytest.raises(ValueError, match="negative"):
        aescl.pinned_empty(-1, device)


def test_memory_for_a_team_of_opencl_gpus_is_pinned_for_each():
    """Each OpenCL device has a context of its own: memory one pinned would be staged
    through the others' copies. It needs two OpenCL GPUs and skips, visibly, elsewhere."""
    gpus = [d for d in aescl.devices() if d.is_opencl and d.type == "gpu"]
    if len(gpus) < 2:
        pytest.skip("fewer than two OpenCL GPUs here")
    team = gpus[:2]
    memory = aescl.pinned_empty(1 << 20, [d.id for d in team])
    assert all(is_pinned(memory, d) for d in team)
    key = os.urandom(16)
    data = np.frombuffer(os.urandom(memory.nbytes), np.uint8)
    memory[:] = data
    out = aescl.pinned_empty(memory.nbytes, [d.id for d in team])
    nonce = os.urandom(8)
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=[d.id for d in team]).encrypt(
        memory, output=out)
    assert out.tobytes() == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data.tobytes())
    # ... and freed with the last array over it.
    pins = weakref.ref(memory.base)
    del memory
    gc.collect()
    assert pins() is None


@pytest.mark.skipif(not shared.AVAILABLE, reason="no memfd here: no shared memory to pin")
def test_memory_pinned_for_a_device_is_freed_with_the_last_array_over_it(device):
    """The buffers that pin memory (CL_MEM_USE_HOST_PTR) go with the arrays over it;
    they held the memory for the process's life before."""
    memory = shared.shared_empty(1 << 20)
    region, _ = shared.locate(memory)
    pinned = pin_host_memory(memory, [device])
    assert is_pinned(pinned, device) and is_pinned(pinned[10:20], device)
    pinned[:4] = 7
    assert bytes(memory[:4]) == bytes([7] * 4)  # the same memory, not a copy
    part = pinned[4096:]
    del memory, pinned
    gc.collect()
    assert shared.is_live(region.token)  # (a slice still holds it)
    del part
    gc.collect()
    assert not shared.is_live(region.token)


@pytest.mark.parametrize("source_pinned,target_pinned", [
    (False, False), (True, False), (False, True), (True, True)])
def test_ctr_through_pinned_and_pageable_memory(device, monkeypatch, source_pinned,
                                                target_pinned):
    # Many small pieces, so that every slot is reused and pieces overlap.
    monkeypatch.setattr(host_copies, "PART_BYTES", 512)
    key = os.urandom(16)
    data = np.frombuffer(os.urandom(16 * 3000), np.uint8)
    source = pinned_empty(data.nbytes, device) if source_pinned else np.empty_like(data)
    source[:] = data
    target = pinned_empty(data.nbytes, device) if target_pinned else np.empty_like(data)
    cipher = _ctr(key, device)
    cipher.launcher.piece_bytes = 16 * 211
    cipher.run(source, target, iter([(0, 1000), (1000, 3000)]))
    reference = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=bytes(16))
    expected = reference.encrypt(data.tobytes())
    assert target.tobytes() == expected
    assert source.tobytes() == data.tobytes()  # the input is left alone


def test_a_job_through_the_staging_copies_goes_in_larger_pieces(device, monkeypatch):
    """A staged piece (ordinary memory on a device apart from host memory) carries a
    cost of its own beside its copies: on one H200, 2 GiB sealed from ordinary memory
    ran 10.9 GB/s in pieces of 16 MiB and 16.4 in 64 (docs/benchmarks, 2026-12-01).
    Such a job's pieces are at least STAGED_PIECE_BYTES; pinned, or on a device that
    uses the arrays in place, they are the size asked."""
    _check_piece_sizes(device, monkeypatch)


def test_on_a_device_apart_from_host_memory_a_staged_job_goes_in_larger_pieces(monkeypatch):
    """The test above on Oclgrind, whose buffers are its own as a GPU's are: its
    ordinary arrays are staged wherever the suite runs (skipped, visibly, without it)."""
    found = [d for d in aescl.devices() if d.is_simulator]
    if not found:
        pytest.skip("no Oclgrind here")
    _check_piece_sizes(found[0], monkeypatch)


def _check_piece_sizes(device, monkeypatch):
    monkeypatch.setattr(streaming, "STAGED_PIECE_BYTES", 4 * chunked.CHUNK_SIZE)
    sizes = []
    run = streaming.Pipeline.run

    def recorded(self, pieces):
        return run(self, (sizes.append(piece.in_bytes) or piece for piece in pieces))
    monkeypatch.setattr(streaming.Pipeline, "run", recorded)
    staged = device.type != "cpu"  # (Oclgrind's buffers are its own, as a GPU's are)
    key, nonce = os.urandom(32), os.urandom(12)
    plaintext = np.frombuffer(os.urandom(8 * chunked.CHUNK_SIZE), np.uint8)
    for pinned in (False, True):
        def memory(nbytes, pinned=pinned):
            return pinned_empty(nbytes, device) if pinned else np.zeros(nbytes, np.uint8)
        source, target = memory(plaintext.nbytes), memory(plaintext.nbytes)
        source[:] = plaintext
        ctr = _ctr(key[:16], device)
        ctr.launcher.piece_bytes = chunked.CHUNK_SIZE
        sizes.clear()
        ctr.run(source, target, iter([(0, plaintext.nbytes // 16)]))
        assert sizes == ([4 * chunked.CHUNK_SIZE] * 2 if staged and not pinned
                         else [chunked.CHUNK_SIZE] * 8)
        assert target.tobytes() == AES.new(key[:16], AES.MODE_CTR, nonce=b"",
                                           initial_value=0).encrypt(plaintext.tobytes())
        sealed = memory(8 * chunked.SEALED_CHUNK_SIZE)
        sizes.clear()
        OpenclHostChunks(key, nonce, device, batch_chunks=1).seal_full(source, sealed, 0)
        assert sizes == ([4 * chunked.CHUNK_SIZE] * 2 if staged and not pinned
                         else [chunked.CHUNK_SIZE] * 8)
        assert sealed.tobytes() == chunked.encrypt_raw(
            key, nonce, plaintext.tobytes() + b"x", device="host")[: sealed.nbytes]
    # A job of one piece would overlap nothing: staged pieces are at most half the job.
    small = (np.zeros(4 * chunked.CHUNK_SIZE, np.uint8),) * 2
    assert streaming.piece_bytes(device, small, chunked.CHUNK_SIZE) == (
        2 * chunked.CHUNK_SIZE if staged else chunked.CHUNK_SIZE)


def test_pieces_may_have_no_output(device):
    seen = []

    def launch(queue, device_in, device_out, scratch):
        return streaming.cl.enqueue_marker(queue)

    pieces = [Piece(16, 0, launch, load=lambda staging: [lambda: seen.append(staging.nbytes)])
              for _ in range(7)]
    pipeline(device).run(pieces)
    assert seen == [16] * 7


def test_the_feeding_thread_lets_other_threads_run_while_an_upload_waits(device):
    if device.is_simulator:
        # (run by hand, the feeding thread sat in its flush of the held upload queue for
        # as long as the gate was left shut, 5 minutes; a driver's flush only submits)
        pytest.skip("Oclgrind's clFlush waits for the commands it sends: a flush of a "
                    "queue held behind a user event waits for the gate")
    runs_while_its_queue_waits(device.id, "pipeline piece")


def test_each_slot_keeps_its_launch_scratch_for_its_next_piece(device):
    scratches = []

    def launch(queue, device_in, device_out, scratch):
        scratch["uses"] = scratch.get("uses", 0) + 1
        scratches.append(scratch)
        return streaming.cl.enqueue_marker(queue)

    pipeline(device).run(Piece(16, 16, launch, load=lambda staging: [],
                               store=lambda staging: []) for _ in range(3 * SLOTS))
    distinct = {id(s): s for s in scratches}
    assert len(distinct) == SLOTS
    assert all(scratches[i] is scratches[i % SLOTS] for i in range(3 * SLOTS))
    assert sorted(s["uses"] for s in distinct.values())[0] >= 3


def test_stores_run_in_order_one_piece_at_a_time(device):
    # Stores run in the background, but a stream's writes must keep their order:
    # every task of one piece ends before any task of the next starts.
    key = os.urandom(16)
    data = np.frombuffer(os.urandom(16 * 8 * 3 * SLOTS), np.uint8)
    cipher = _ctr(key, device)
    launcher = cipher.launcher
    spans: list[tuple[int, float, float]] = []
    output = np.zeros_like(data)

    def store(staging, index, lo):
        def part(start, stop):
            def task():
                began = time.perf_counter()
                time.sleep(0.002)  # long enough for a concurrent task to show
                output[lo + start:lo + stop] = staging[start:stop]
                spans.append((index, began, time.perf_counter()))
            return task
        return [part(0, 64), part(64, 128)]

    pieces = [
        Piece(128, 128,
              lambda q, i, o, _, lo=lo: launcher.enqueue(q, i, o, 8,
                                                          cipher.kernel_args(lo // 16)),
              load=lambda staging, lo=lo: host_copies.copy_parts(staging, data[lo:lo + 128]),
              store=lambda staging, index=index, lo=lo: store(staging, index, lo))
        for index, lo in enumerate(range(0, data.nbytes, 128))
    ]
    pipeline(device).run(pieces)
    reference = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=bytes(16))
    assert output.tobytes() == reference.encrypt(data.tobytes())
    for index in range(1, len(pieces)):
        before = max(end for i, _, end in spans if i == index - 1)
        assert all(began >= before for i, began, _ in spans if i == index)


def test_a_failing_host_task_stops_the_stream_and_is_raised(device):
    data = np.frombuffer(os.urandom(16 * 64), np.uint8)
    stored = []

    def store(staging, index):
        def task():
            if index == 3:
                raise OSError("disk full")
            stored.append(index)
        return [task]

    cipher = _ctr(os.urandom(16), device)
    launcher = cipher.launcher
    pieces = [
        Piece(16 * 8, 16 * 8,
              lambda q, i, o, _: launcher.enqueue(q, i, o, 8, cipher.kernel_args(0)),
              load=lambda staging, lo=lo: host_copies.copy_parts(staging, data[lo:lo + 128]),
              store=lambda staging, index=index: store(staging, index))
        for index, lo in enumerate(range(0, data.nbytes, 128))
    ]
    with pytest.raises(OSError, match="disk full"):
        pipeline(device).run(pieces)
    assert stored == [0, 1, 2]
    # The pipeline is usable again afterwards.
    again = aescl.new(b"k" * 16, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16), device=device)
    assert again.encrypt(bytes(64)) == AES.new(
        b"k" * 16, AES.MODE_CTR, nonce=b"", initial_value=bytes(16)).encrypt(bytes(64))


@pytest.mark.parametrize("mode", ["ecb", "ctr"])
def test_slicing_gives_identical_output(device, mode):
    # Many small pieces, and ranges that do not fall on piece boundaries.
    key = os.urandom(16)
    data = np.frombuffer(os.urandom(16 * 1000), np.uint8)
    if mode == "ecb":
        worker = OpenclBlocks(device, BlockTransform(key))
        expected = AES.new(key, AES.MODE_ECB).encrypt(data.tobytes())
    else:
        worker = OpenclBlocks(device, BlockTransform(key, counter=2**64 - 20))
        expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=2**64 - 20).encrypt(
            data.tobytes())
    worker.launcher.piece_bytes = 16 * 37  # 28 pieces: every pipeline slot is reused
    output = np.zeros_like(data)
    worker.run(data, output, iter([(0, 500), (500, 501), (501, 1000)]))
    assert output.tobytes() == expected


def test_inputs_larger_than_the_devices_largest_allocation_stream_through_it(device):
    """A device that cannot hold the input in one allocation: the runtime's own device,
    declared with a 1 MiB limit, takes a 5 MiB job in slices, with every mode's output
    as the host engine gives it (the library path; the CLI's goes through the same)."""
    import dataclasses

    from aescl._arrays import default_slice_bytes

    small = dataclasses.replace(device, max_alloc_bytes=1 << 20)
    assert default_slice_bytes(small) == 1 << 20
    data = os.urandom((5 << 20) + 48)
    key, nonce = os.urandom(32), os.urandom(12)

    def every_mode(target):
        return [
            aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8], device=target).encrypt(data),
            aescl.new(key, aescl.MODE_ECB, device=target).encrypt(data),
            aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=target).encrypt_and_digest(data),
            chunked.encrypt_raw(key, nonce, data, device=target),
        ]

    assert every_mode(small) == every_mode("host")
    # The chunked format's batches too (asked for 16 MiB at once), each way:
    chunks = OpenclHostChunks(key, nonce, small, batch_chunks=1024)
    plaintext = np.zeros(300 * chunked.CHUNK_SIZE, np.uint8)
    sealed = np.zeros(300 * chunked.SEALED_CHUNK_SIZE, np.uint8)
    for opening in (False, True):
        source, target = (sealed, plaintext) if opening else (plaintext, sealed)
        pieces = list(chunks._pieces(source, target, 0, [(0, 300)], None, opening))
        assert len(pieces) > 1
        assert max(max(p.in_bytes, p.out_bytes) for p in pieces) <= 1 << 20


def test_a_cpu_device_uses_the_callers_arrays_in_place(device):
    """CPU devices compute in host memory: aligned arrays go to the kernels with no
    staging copy either way; elsewhere, or misaligned, they are staged."""
    aligned = np.zeros(4096 + 64, np.uint8)
    offset = (-aligned.__array_interface__["data"][0]) % 16
    source, target = aligned[offset:][:4096], np.empty(4096, np.uint8)
    piece = Piece.through(device, source, target, lambda *_: None)
    in_place = device.type == "cpu"
    assert streaming.shares_host_memory(device) is in_place
    assert (piece.use_in is source, piece.use_out is target) == (in_place, in_place)
    assert (piece.load is None, piece.store is None) == (in_place, in_place)
    misaligned = Piece.through(device, aligned[offset + 1 :][:4096], target, lambda *_: None)
    assert misaligned.use_in is None and misaligned.load is not None
    # A launch that works in place in its input never gets the caller's array.
    written = Piece.through(device, source, target, lambda *_: None, writes_input=True)
    assert written.use_in is None and written.load is not None


@pytest.mark.parametrize("shift", [0, 1, 16])
def test_in_place_output_matches_and_leaves_the_input_alone(device, shift):
    raw = np.frombuffer(os.urandom((1 << 20) + 64), np.uint8)
    data = raw[shift:][: (1 << 20) + 5]
    before = data.copy()
    key, nonce = os.urandom(16), os.urandom(8)
    ours = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(data)
    assert ours == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data.tobytes())
    sealed = aescl.chunked.encrypt_raw(bytes(32), bytes(12), data, device=device)
    assert sealed == aescl.chunked.encrypt_raw(bytes(32), bytes(12), data, device="host")
    assert np.array_equal(data, before)


def test_an_opening_into_pinned_memory_leaves_no_plaintext_of_a_failed_piece(device,
                                                                            monkeypatch):
    """Into pinned memory a piece's plaintext goes straight from the device, beside its
    tags (Piece.copy_before_check); a piece with a failed tag, and any piece in flight
    after it, is zeroed there before the failure is raised: none of its plaintext is
    left. (A misaligned slice: aligned pinned memory on a CPU device is used in place
    instead.)"""
    # (pieces of the 4 chunks asked, though the ordinary sealed input is staged)
    monkeypatch.setattr(streaming, "STAGED_PIECE_BYTES", chunked.CHUNK_SIZE)
    key, nonce = os.urandom(32), os.urandom(12)
    chunks = OpenclHostChunks(key, nonce, device, batch_chunks=4)
    plaintext = np.frombuffer(os.urandom(12 * chunked.CHUNK_SIZE), np.uint8)
    sealed = np.zeros(12 * chunked.SEALED_CHUNK_SIZE, np.uint8)
    chunks.seal_ranges(plaintext, sealed, 5, iter([(0, 12)]))
    target = aescl.pinned_empty(plaintext.nbytes + 1, device)[1:]
    piece = next(chunks._pieces(sealed, target, 5, [(0, 12)], None, True))
    assert piece.check is not None and piece.download_to is not None and piece.store is None
    assert piece.copy_before_check
    chunks.open_ranges(sealed, target, 5, iter([(0, 12)]))
    assert target.tobytes() == plaintext.tobytes()

    sealed[9 * chunked.SEALED_CHUNK_SIZE + 100] ^= 1
    target[:] = 0xAA
    with pytest.raises(aescl.AuthenticationError) as failed:
        chunks.open_ranges(sealed, target, 5, iter([(0, 12)]))
    assert failed.value.chunk == 5 + 9
    released = 8 * chunked.CHUNK_SIZE  # (the two pieces before the failed one)
    assert target[:released].tobytes() == plaintext[:released].tobytes()
    assert not target[released:].any()  # (its piece: copied out, then zeroed)

    # A failure in the second of three pieces: all three were in flight before the
    # first was checked, so the third's plaintext was copied out too, never checked,
    # and must be zeroed as well.
    sealed[9 * chunked.SEALED_CHUNK_SIZE + 100] ^= 1
    sealed[5 * chunked.SEALED_CHUNK_SIZE + 100] ^= 1
    target[:] = 0xAA
    with pytest.raises(aescl.AuthenticationError) as failed:
        chunks.open_ranges(sealed, target, 5, iter([(0, 12)]))
    assert failed.value.chunk == 5 + 5
    released = 4 * chunked.CHUNK_SIZE
    assert target[:released].tobytes() == plaintext[:released].tobytes()
    assert not target[released:].any()
