"""How far a pyopencl opening could get with less host work (2026-11-26, late night).

A ladder below the floor (2026-11-26-opening-floor.py): the public opening's commands for
a 1 GiB message (output=, DISTINCT messages sealed under their own salts, a MemoryPool in
the script's own context), with more of the per-message host work done before the clock
starts at each rung. Each rung stands for a design that would move that work off the
host's path before the first launch:

  public      aescl.chunked.decrypt
  floor       the same commands with as little Python as possible (the floor script)
  floor, device schedule
              the floor with the raw chunk key passed and expanded in each work-group's
              local memory (aes_core.cl AES_KEY_SCHEDULE_DEVICE): no host round keys
  keys ready  header read and HKDF still on the host; H, the round keys and the
              position tables made before (H and the tables on the device, say)
  no host crypto
              no header read and no HKDF either (the whole derivation on the device):
              the verdict's fill, a marker and a barrier, the fused kernel, the final
              tag's copy and one blocking read
  one launch  the fused kernel and one blocking read of its verdict, nothing else
  kernel      the fused kernel alone, 5 back to back, one wait (host schedule; and with
              the device schedule)

GB/s (best of three runs of 5 calls) and shares of bench's kernel figure (the engine's
``resident_seconds``, sealing), measured first in each round.

    ROUNDS=3 python3 2026-11-26-opening-ladder.py
    VENDOR=pocl SIZE=1048576 ROUNDS=1 python3 2026-11-26-opening-ladder.py   (on a CPU)
"""
import hmac
import os
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

import aescl
from aescl import chunkformat, ghash
from aescl.engines import device_chunks as dc
from aescl.engines import engine_for
from aescl.engines.opencl import gcm, kernels

SIZE = int(os.environ.get("SIZE", 1 << 30))
DISTINCT = 12
FULL = SIZE // dc.CHUNK_SIZE  # whole chunks; the final chunk is empty
device = next(d for d in aescl.devices()
              if d.is_opencl and d.vendor == os.environ.get("VENDOR", "nvidia"))
context = cl.Context([device.cl_device])
queue = cl.CommandQueue(context)
pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
message = cl_array.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = [aescl.chunked.encrypt(key, message) for _ in range(DISTINCT)]
opened = aescl.chunked.decrypt(key, sealed[0])
engines = {schedule: gcm.GcmEngine(os.urandom(32), device, schedule, context, 5)
           for schedule in ("host", "device")}
verdict = cl.Buffer(context, cl.mem_flags.READ_WRITE, dc.VERDICT_BYTES)
no_mismatch = np.full(1, dc.NO_MISMATCH, np.uint32)
found = np.empty(dc.VERDICT_BYTES, np.uint8)


def derive(source):
    header = np.empty(chunkformat.HEADER_SIZE, np.uint8)
    cl.enqueue_copy(queue, header, source.base_data, src_offset=source.offset,
                    is_blocking=True)
    return chunkformat.open_header(key, header.tobytes(), b"")


class Ready:
    """A message's per-key work, done before the clock starts: the chunk key and base
    nonce, H, both key arguments, the position tables in a buffer of the script's own,
    and the final empty chunk's expected tag."""

    def __init__(self, source):
        self.chunk_key, self.base_nonce = derive(source)
        self.h = ghash.hash_subkey(self.chunk_key)
        self.keys = {schedule: kernels.key_argument(self.chunk_key, schedule, False)
                     for schedule in engines}
        built = engines["host"]._positions_of(self.h)
        self.positions = cl.Buffer(context, cl.mem_flags.READ_WRITE, built.size)
        cl.enqueue_copy(engines["host"].runtime.queue, self.positions, built)
        self.expected = ghash.encrypt_block(
            self.chunk_key,
            chunkformat.chunk_nonce(self.base_nonce, FULL) + (1).to_bytes(4, "big"))


ready = [Ready(source) for source in sealed]
engines["host"].runtime.queue.finish()


def launch(engine, source, target, base_nonce):
    first = (source.offset + chunkformat.HEADER_SIZE) // dc.BLOCK_SIZE
    engine.enqueue_crypt_hash(
        source.base_data, target.base_data, FULL * dc.SLOT_BLOCKS, dc.SLOT_BLOCKS, FULL,
        (dc.SEALED_BLOCKS, dc.SLOT_BLOCKS), None, None, None, 0, False,
        (first, target.offset // dc.BLOCK_SIZE, 0),
        (chunkformat.base_j0(base_nonce), 0, dc.CHUNK_SIZE),
        (source.base_data, first + dc.SLOT_BLOCKS, dc.SEALED_BLOCKS, verdict, 0))


def finish_open(engine, source, target, base_nonce, expected):
    """The floor's commands from the fill of the verdict on: the barrier after the
    caller's queue, the fused kernel, the final tag's copy, one blocking read."""
    runtime_queue = engine.runtime.queue
    cl.enqueue_fill_buffer(runtime_queue, verdict, no_mismatch, 0, no_mismatch.nbytes)
    cl.enqueue_barrier(runtime_queue, wait_for=[cl.enqueue_marker(queue)])
    launch(engine, source, target, base_nonce)
    runtime_queue.flush()
    final_tag_at = source.offset + chunkformat.HEADER_SIZE + FULL * dc.SEALED_CHUNK_SIZE
    cl.enqueue_copy(runtime_queue, verdict, source.base_data, byte_count=dc.TAG_SIZE,
                    src_offset=final_tag_at, dst_offset=dc.VERDICT_ALSO_AT)
    if expected is None:
        expected = ghash.encrypt_block(
            engine.chunk_key,
            chunkformat.chunk_nonce(base_nonce, FULL) + (1).to_bytes(4, "big"))
    cl.enqueue_copy(runtime_queue, found, verdict, is_blocking=True)
    assert int(found[:4].view(np.uint32)[0]) == dc.NO_MISMATCH
    assert hmac.compare_digest(expected, found[dc.VERDICT_ALSO_AT:].tobytes()[:dc.TAG_SIZE])


def floor(schedule):
    def call(index, target):
        engine, source = engines[schedule], sealed[index]
        chunk_key, base_nonce = derive(source)
        engine.chunk_key = chunk_key
        engine.h = ghash.hash_subkey(chunk_key)
        engine.key = kernels.key_argument(chunk_key, schedule, False)
        engine._positions_of(engine.h)  # before the barrier: no caller's memory in it
        finish_open(engine, source, target, base_nonce, None)
    return call


def with_ready(engine, item):
    """The engine set to a ready message's key, H and position tables."""
    engine.h, engine.key = item.h, item.keys["host"]
    engine._positions_of = lambda _h: item.positions  # (this script's engine only)
    return engine


def keys_ready(index, target):
    source, item = sealed[index], ready[index]
    derive(source)  # the header read and HKDF, their result already in ``item``
    finish_open(with_ready(engines["host"], item), source, target, item.base_nonce,
                item.expected)


def no_host_crypto(index, target):
    item = ready[index]
    finish_open(with_ready(engines["host"], item), sealed[index], target, item.base_nonce,
                item.expected)


def one_launch(index, target):
    item, engine = ready[index], with_ready(engines["host"], ready[index])
    cl.enqueue_fill_buffer(engine.runtime.queue, verdict, no_mismatch, 0, no_mismatch.nbytes)
    launch(engine, sealed[index], target, item.base_nonce)
    cl.enqueue_copy(engine.runtime.queue, found, verdict, is_blocking=True)
    assert int(found[:4].view(np.uint32)[0]) == dc.NO_MISMATCH


def public(index, target):
    aescl.chunked.decrypt(key, sealed[index], output=target)


check = cl_array.empty(queue, SIZE, np.uint8, allocator=pool)
expected_bytes = message.get()
for call in (floor("host"), floor("device"), keys_ready, no_host_crypto, one_launch):
    check.fill(0)
    queue.finish()
    call(1, check)
    engines["host"].runtime.queue.finish()
    assert (check.get() == expected_bytes).all(), f"{call.__name__} gave other bytes"
del engines["host"]._positions_of  # the class's again, for the floor
turn = [0]


def calls(step):
    def call():
        turn[0] += 1
        step(turn[0] % DISTINCT, opened)
        if "_positions_of" in vars(engines["host"]):
            del engines["host"]._positions_of
    return call


def kernel_alone(schedule):
    engine, item = engines[schedule], ready[2]
    engine.h, engine.key = item.h, item.keys[schedule]
    engine._positions_of = lambda _h: item.positions

    def call():
        launch(engine, sealed[2], opened, item.base_nonce)
    return call, engine


def rate(call, wait=lambda: None):
    call()
    wait()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            call()
        wait()
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


bench_engine = engine_for(device)
host = np.frombuffer(os.urandom(SIZE), np.uint8)
rungs = (("public", public), ("floor", floor("host")),
         ("floor, device schedule", floor("device")), ("keys ready", keys_ready),
         ("no host crypto", no_host_crypto), ("one launch", one_launch))
for number in range(int(os.environ.get("ROUNDS", 3))):
    seconds, _ = bench_engine.resident_seconds(
        "gcm-chunked", os.urandom(32), os.urandom(12), host,
        aescl.chunked.sealed_size(SIZE, raw=True), 1.0)
    kernel = SIZE / seconds / 1e9
    line = [f"round {number}: kernel {kernel:.1f} GB/s"]
    for name, step in rungs:
        got = rate(calls(step))
        line.append(f"{name} {got:.1f} ({100 * got / kernel:.1f}%)")
    for schedule in ("host", "device"):
        call, engine = kernel_alone(schedule)
        got = rate(call, engine.runtime.queue.finish)
        del engine._positions_of
        line.append(f"kernel alone, {schedule} schedule {got:.1f} ({100 * got / kernel:.1f}%)")
    print("; ".join(line), flush=True)
