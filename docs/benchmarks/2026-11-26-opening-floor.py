"""The floor of a pyopencl opening's host cost (2026-11-26).

The commands that ``chunked.decrypt`` issues for a 1 GiB message (output=, DISTINCT
messages sealed under their own salts, a MemoryPool in the script's own context), issued
with as little Python as possible: one engine made once, its key and H swapped per call;
the header read, HKDF, H and the round keys on the host; the position tables, a marker
and a barrier, the fused kernel; the final empty chunk's tag; one blocking read. Against
the public call and bench's kernel figure (the engine's ``resident_seconds``), in turn,
ROUNDS rounds: GB/s (best of three runs of 5 calls, as 2026-11-26-paired-rounds.py) and
shares. What the public call costs beyond the floor is aescl's Python; the floor itself
is what these commands cost through pyopencl and NVIDIA's OpenCL.

    ROUNDS=5 python3 2026-11-26-opening-floor.py
    VENDOR=pocl SIZE=1048576 python3 2026-11-26-opening-floor.py   (on a CPU)
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
engine = gcm.GcmEngine(os.urandom(32), device, "host", context, 5)
verdict = cl.Buffer(context, cl.mem_flags.READ_WRITE, dc.VERDICT_BYTES)
no_mismatch = np.full(1, dc.NO_MISMATCH, np.uint32)
found = np.empty(dc.VERDICT_BYTES, np.uint8)


def lean_open(source, target):
    """Open ``source`` (a sealed message) into ``target`` with the public call's commands."""
    header = np.empty(chunkformat.HEADER_SIZE, np.uint8)
    cl.enqueue_copy(queue, header, source.base_data, src_offset=source.offset,
                    is_blocking=True)
    chunk_key, base_nonce = chunkformat.open_header(key, header.tobytes(), b"")
    engine.h = ghash.hash_subkey(chunk_key)
    engine.key = kernels.key_argument(chunk_key, "host", False)
    engine._positions_of(engine.h)  # before the barrier: no caller's memory in it
    runtime_queue = engine.runtime.queue
    cl.enqueue_fill_buffer(runtime_queue, verdict, no_mismatch, 0, no_mismatch.nbytes)
    cl.enqueue_barrier(runtime_queue, wait_for=[cl.enqueue_marker(queue)])
    first = (source.offset + chunkformat.HEADER_SIZE) // dc.BLOCK_SIZE
    engine.enqueue_crypt_hash(
        source.base_data, target.base_data, FULL * dc.SLOT_BLOCKS, dc.SLOT_BLOCKS, FULL,
        (dc.SEALED_BLOCKS, dc.SLOT_BLOCKS), None, None, None, 0, False,
        (first, target.offset // dc.BLOCK_SIZE, 0),
        (chunkformat.base_j0(base_nonce), 0, dc.CHUNK_SIZE),
        (source.base_data, first + dc.SLOT_BLOCKS, dc.SEALED_BLOCKS, verdict, 0))
    runtime_queue.flush()
    final_tag_at = source.offset + chunkformat.HEADER_SIZE + FULL * dc.SEALED_CHUNK_SIZE
    cl.enqueue_copy(runtime_queue, verdict, source.base_data, byte_count=dc.TAG_SIZE,
                    src_offset=final_tag_at, dst_offset=dc.VERDICT_ALSO_AT)
    expected = ghash.encrypt_block(
        chunk_key, chunkformat.chunk_nonce(base_nonce, FULL) + (1).to_bytes(4, "big"))
    cl.enqueue_copy(runtime_queue, found, verdict, is_blocking=True)
    assert int(found[:4].view(np.uint32)[0]) == dc.NO_MISMATCH
    assert hmac.compare_digest(expected, found[dc.VERDICT_ALSO_AT:].tobytes()[:dc.TAG_SIZE])


check = cl_array.empty(queue, SIZE, np.uint8, allocator=pool)
lean_open(sealed[1], check)
assert (check.get() == message.get()).all(), "the lean opening gave other bytes"
turn = [0]


def public_call():
    turn[0] += 1
    aescl.chunked.decrypt(key, sealed[turn[0] % DISTINCT], output=opened)


def lean_call():
    turn[0] += 1
    lean_open(sealed[turn[0] % DISTINCT], opened)


def rate(call):
    call()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            call()
        best = min(best, (time.perf_counter() - start) / 5)
    return SIZE / best / 1e9


bench_engine = engine_for(device)
host = np.frombuffer(os.urandom(SIZE), np.uint8)
for number in range(int(os.environ.get("ROUNDS", 4))):
    seconds, _ = bench_engine.resident_seconds(
        "gcm-chunked", os.urandom(32), os.urandom(12), host,
        aescl.chunked.sealed_size(SIZE, raw=True), 1.0)
    kernel = SIZE / seconds / 1e9
    public, lean = rate(public_call), rate(lean_call)
    print(f"round {number}: kernel {kernel:.1f} GB/s; public {public:.1f} "
          f"({100 * public / kernel:.1f}%); floor {lean:.1f} ({100 * lean / kernel:.1f}%)")
