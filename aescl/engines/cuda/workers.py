"""The CUDA engine's block worker: ECB and CTR over CUDA device arrays, in place or
into another array, ordered on the stream the data's producer works on.

Memory is the caller's: a torch tensor, a CuPy array or any object with
``__cuda_array_interface__``; no byte of it passes through host memory. What
crosses to the device is the key's round keys (once per worker). Partial blocks
and misaligned arrays go through scratch memory on the device
(aescl/engines/programs/device_runs.py), allocated in the stream's order.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import ghash, keyschedule
from ...chunkformat import base_j0
from ..interface import BLOCK_SIZE, BlockTransform
from ..programs.device_chunks import (
    NO_MISMATCH,
    SLOT_BLOCKS,
    VERDICT_ALSO_AT,
    VERDICT_BYTES,
    ChunkRun,
    Messages,
    TagCheck,
    fused_gcm,
    message_items,
)
from ..programs.device_runs import run_blocks
from .kernels import (
    TABLE_LANES,
    crypt_hash_defines,
    crypt_hash_tables,
    module,
    table_bytes,
)
from .runtime import (
    CudaBytes,
    Gpu,
    KeptLaunch,
    checked,
    cuda_device,
    cuda_driver,
    keeps_callers_context,
    launch_function,
    launch_kernel,
)
from .tuning import launch_shape

# Launch shape of the kernels that stage no tables (the chunked format's layout
# kernels). Those that do launch as the GPU's tuning says (tuning.py, tuning.launch_shape).
# The kernels stride over any grid.
_THREADS_PER_BLOCK = 1024
_GRID_BLOCKS_PER_SM = 4


class CudaBlocks:
    """One key's ECB or CTR kernel on one GPU, over device arrays."""

    def __init__(self, transform: BlockTransform, ordinal: int) -> None:

        self._transform = transform
        self._gpu = cuda_device(ordinal)
        self._gpu.core.set_current()
        rounds = keyschedule.rounds_for_key(transform.key)
        filename, name, decrypt = transform.kernel
        self._kernel, self._function = self._gpu.kernel(filename, name, rounds)
        # The kernel's arguments (every one 64 bits, but the key's round keys, passed by
        # value), then their addresses, as void**; the key's is that of its words.
        self._key = keyschedule.kernel_key_argument(transform.key, "host", decrypt)
        self._arguments = np.zeros(8, np.uint64)
        self._pointers = self._arguments.ctypes.data + 8 * np.arange(8, dtype=np.uint64)
        self._argument_addresses = int(self._pointers.ctypes.data)
        self._key_slot = 3 + 4 * transform.is_ctr  # (after source, target, blocks, counter)
        self._pointers[self._key_slot] = self._key.ctypes.data
        self._shape = launch_shape(self._gpu.core.device_id)
        from cuda.bindings import driver  # (kept: an import statement a call costs µs)

        self._launch_kernel, self._stream_of = driver.cuLaunchKernel, driver.CUstream

    @property
    def ordinal(self) -> int:
        return self._gpu.core.device_id

    def _kernel_args(self, first_block: int) -> tuple[int, ...]:
        if not self._transform.is_ctr:
            return ()
        block = self._transform.counter_at(first_block)
        mask = (1 << self._transform.counter_bits) - 1
        return block >> 64, block & (2**64 - 1), mask >> 64, mask & (2**64 - 1)

    def launch(self, stream: int, source: int, target: int, blocks: int,
               first_block: int) -> None:
        """Enqueue the kernel over ``blocks`` blocks on the stream with handle ``stream``
        (under the GPU's lock: the arguments' memory is this object's).

        Through cuLaunchKernel with the arguments written into memory set up once
        (every argument is 64 bits): a small call's time is mostly Python, and packing
        them anew through cuda.core cost a third of it on the H100 host."""
        shape = self._shape
        grid = self._gpu.table_grid(blocks, shape)
        values = (source, target, blocks, *self._kernel_args(first_block))
        with self._gpu.lock:  # (the engine's feeding threads launch at once)
            self._gpu.make_current()
            self._arguments[: len(values)] = values
            checked(self._launch_kernel(self._function, grid, 1, 1, shape.threads, 1, 1,
                                       self._gpu.table_bytes, self._stream_of(stream),
                                       self._argument_addresses, 0))

    def run(self, source: CudaBytes, target: CudaBytes, first_block: int, skip: int = 0) -> None:
        """``source`` into ``target`` (the same length; may be the same memory) on the
        source's stream. The data starts ``skip`` bytes into block ``first_block`` of the
        keystream (CTR; ECB takes whole blocks from 0). Returns once it is enqueued."""
        with self._gpu.lock:
            self._gpu.core.set_current()
            if not skip and source.nbytes % BLOCK_SIZE == 0 \
                    and (source.pointer | target.pointer) % BLOCK_SIZE == 0:
                # Whole aligned blocks, as most calls are: the one launch run_blocks would
                # make, without its spans (a 4 KiB call is nearly all Python).
                if source.nbytes:
                    self.launch(source.stream, source.pointer, target.pointer,
                                source.nbytes // BLOCK_SIZE, first_block)
                return
            run_blocks(StreamMemory(self, source), source, target, first_block, skip)


class StreamMemory:
    """The memory operations of one call (device_runs.DeviceMemory), on its stream."""

    def __init__(self, blocks: CudaBlocks | None, like: CudaBytes) -> None:
        self._blocks, self._like = blocks, like  # (the stream: like's)

    def aligned(self, span: CudaBytes) -> bool:
        return span.pointer % BLOCK_SIZE == 0

    def launch(self, source: CudaBytes, target: CudaBytes, blocks: int,
               first_block: int) -> None:
        assert self._blocks is not None
        self._blocks.launch(self._like.stream, source.pointer, target.pointer, blocks,
                            first_block)

    def scratch(self, nbytes: int, zeroed: bool = True) -> CudaBytes:
        """New memory on the stream, zero-filled unless ``zeroed`` is False (then it may
        hold what an earlier allocation on the GPU left there)."""
        from cuda.bindings import driver

        handle = self._like.stream
        gpu = cuda_device(self._like.device)
        gpu.make_current()
        pool = gpu.memory_pool()
        pointer = int(checked(driver.cuMemAllocFromPoolAsync(nbytes, pool, handle)))
        if zeroed:
            checked(driver.cuMemsetD8Async(pointer, 0, nbytes, handle))
        return CudaBytes(pointer, nbytes, self._like.device, handle, False)

    def copy(self, target: CudaBytes, source: CudaBytes) -> None:
        from cuda.bindings import driver

        cuda_device(self._like.device).make_current()
        checked(driver.cuMemcpyDtoDAsync(target.pointer, source.pointer, source.nbytes,
                                        self._like.stream))

    def release(self, span: CudaBytes) -> None:
        from cuda.bindings import driver

        cuda_device(self._like.device).make_current()
        checked(driver.cuMemFreeAsync(span.pointer, self._like.stream))


# Threads per GHASH block (at most GCM_MAX_GHASH_ITEMS in cl/aes_gcm.cl). Swept on the
# H100 (2026-11-24, the chunked format's kernel figure, 1 GiB, docs/benchmarks): 128
# threads 265.9 GB/s, 64 265.7, 256 259.3, with the stride's position tables read
# through the cache (GHASH_STRIDE_IN_LOCAL=0; 264.2, 258.9 and 231.9 from copies in
# shared memory). Fewer threads per message take more Horner steps each and leave
# fewer sums to pair. A launch asks for as many blocks as the SMs hold at once
# (ghash_grid): ncu found 16 asked per SM where 12 fit (40 registers a thread), a
# third of a second wave.
_GHASH_ITEMS = 128


_ghash_blocks_per_sm: dict[int, int] = {}  # by the function's handle: asked once


def ghash_grid(gpu: Gpu, function: Any, count: int) -> int:
    """Blocks of a GHASH launch over ``count`` messages: at most one wave, as many
    blocks as the SMs hold at once (the kernel strides over the messages)."""
    from cuda.bindings import driver

    key = int(function)
    per_sm = _ghash_blocks_per_sm.get(key)
    if per_sm is None:
        per_sm = _ghash_blocks_per_sm[key] = max(1, int(checked(
            driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, _GHASH_ITEMS, 0))))
    return max(1, min(count, gpu.sms * per_sm))


# gcm_crypt_hash (CTR, GHASH and the tags of the chunked format's batches in one launch):
# threads per message, and (round tables, threads per block, the stride's position
# tables copied into shared memory (1) or read through the cache (0)). Swept on the
# H100 (2026-11-25, docs/benchmarks; 1 GiB, the bench's kernel figure, GB/s): 8
# threads a 16 KiB chunk (128 Horner steps each, and a pairing of 3 levels; with 128
# threads a chunk, as gcm_ghash runs, 180-190: the pairing's barriers stall an SM that
# holds one block); 4 tables in blocks of 1024 with the stride's tables in shared
# memory 297.5-297.8, read through the cache 267.9-269.9, 2 tables 277-297, 1 table
# 232-269; the three launches 252.5-261.4. More threads a chunk where a run's chunks
# would not fill one wave (device_chunks.message_items).
_CRYPT_HASH_ITEMS = 8
_CRYPT_HASH_SHAPE = (4, 1024, 1, TABLE_LANES, 0)  # (the copies of each table; pairs)
# A lone message (AESGCM.encrypt of one small device array) runs on one block, whose
# set-up and GHASH's pairing levels are most of its time, not the AES: a block of 256
# threads with one round table in one copy (1 KiB to stage, not 128) and the stride's
# tables read through the cache. One H200 (2026-11-27, docs/benchmarks), GPU time a
# call: 4 KiB 19.9 us against 33.2 with the build above, 64 bytes 19.1 against 34.6,
# but 64 KiB 70.4 against 64.2, where more AES a thread pays for the copies. Its
# work-items' sums are put together each by its own power of H (GCM_SUMS_BY_POWERS),
# not by the pairing's eight levels of table reads from global memory, which were 12 of
# those 19 us (2 x H200, 2026-11-28, docs/benchmarks).
_LONE_CRYPT_HASH_SHAPE = (1, 256, 0, 1, 1)
_LONE_MOST_BLOCKS = 1024  # (16 KiB) the longest lone message that runs on that build
_GHASH_SEGMENT_STEPS = 64  # Horner steps per thread in one segment (the OpenCL engine's)
_GHASH_LAUNCH_BLOCKS = 1 << 30  # blocks per launch: the kernel indexes them in 32 bits


_POWER_TABLES = 256  # nibble tables of H^1..H^256: gcm_ghash reads them (and gcm_tags H's)
_POWER_TABLES_BYTES = _POWER_TABLES * 16 * BLOCK_SIZE
# Position tables (cl/ghash.cl) of H^1, H^2, H^4 .. H^256: GHASH_POSITION_POWERS tables of
# GHASH_POSITION_ENTRIES entries (cl/aes_gcm.cl).
_POSITION_TABLES_BYTES = 9 * 512 * BLOCK_SIZE
_POSITION_ITEMS = 9 * 16  # GHASH_POSITION_ITEMS: a thread per table and nibble
# H^1 .. H^257 (GHASH_POWERS), after the position tables (GHASH_POWERS_AT): what the lone
# build's sums by powers read; made only for it (launch_powers).
_POWERS = 257
_H_TABLES_BYTES = _POSITION_TABLES_BYTES + _POWERS * BLOCK_SIZE


def launch_power_tables(gpu: Gpu, stream: int, base: int, tables: int) -> None:
    """Enqueue the nibble tables (ghash.cl) of base^1..base^256 into ``tables``, on the
    stream with handle ``stream`` (from the AES-128 build: no AES here)."""
    function = gpu.kernel("aes_gcm.cl", "ghash_power_tables", 10)[1]
    gpu.make_current()
    launch_kernel(function, _POWER_TABLES // 64,
                  64, 0, stream, np.uint64(base >> 64), np.uint64(base & (2**64 - 1)),
                  np.uint32(_POWER_TABLES), tables)


def launch_position_tables(gpu: Gpu, stream: int, base: int, positions: int) -> None:
    """Enqueue the position tables of base^1, base^2 .. base^256 into ``positions`` (one
    launch, no nibble tables needed), as :func:`launch_power_tables` does."""
    function = gpu.kernel("aes_gcm.cl", "ghash_position_tables", 10)[1]
    gpu.make_current()
    launch_kernel(function,
                  _POSITION_ITEMS // 16, 16, 0, stream, np.uint64(base >> 64),
                  np.uint64(base & (2**64 - 1)), positions)


def launch_powers(gpu: Gpu, stream: int, base: int, positions: int) -> None:
    """Enqueue base^1 .. base^257 after the position tables at ``positions`` (ghash_powers,
    cl/aes_gcm.cl), as :func:`launch_position_tables` does."""
    function = gpu.kernel("aes_gcm.cl", "ghash_powers", 10)[1]
    gpu.make_current()
    launch_kernel(function, -(-_POWERS // 64), 64, 0, stream, np.uint64(base >> 64),
                  np.uint64(base & (2**64 - 1)), positions + _POSITION_TABLES_BYTES)


class KeyTables:
    """H's position tables (all the fused kernel reads of H) on each GPU, kept for as long
    as the job that holds them (aescl.AESGCM's many-messages job, for its key; a chunked
    job on host arrays, for its pieces): a call then makes none (a launch and an
    allocation less in a 4 KiB message's call, or in a piece's set-up). Made once a
    GPU, each stream that reads them waiting for them on the GPU (:meth:`on`); freed once
    the last work of each stream that read them is done: an event a stream, recorded
    after each call's launches; or, with ``whole_gpu_at_free``, for tables that live as
    long as an object of the caller's (aescl.AESGCM), a wait for all the work of each
    GPU's context when they are freed, so that a call records nothing (the event was
    1.3-2.6 µs of a 4 KiB message's call of about 20, on the H200 host)."""

    def __init__(self, h: int, whole_gpu_at_free: bool = False,
                 streams_waited: bool = False) -> None:
        self._h = h
        self._on: dict[int, int] = {}  # GPU ordinal -> the tables' address there
        self._powers_on: set[int] = set()  # GPUs whose tables have H's powers after them
        self._after: dict[tuple[int, int], Any] = {}  # (GPU, stream) -> event of last use
        # ``streams_waited``: every call's stream is waited for before the holder's job
        # returns (a chunk job's pieces: pipeline.Slot.run), so no call records an event.
        self._per_call = not (whole_gpu_at_free or streams_waited)
        # GPU ordinal -> (stream, event) the tables were made on (on); the GPUs whose
        # tables are known made (no stream waits for them any more)
        self._made: dict[int, tuple[int, Any]] = {}
        self._done: set[int] = set()
        self._lock = threading.Lock()
        weakref.finalize(self, _free_tables, self._on, self._after, whole_gpu_at_free,
                         self._made)

    def on(self, gpu: Gpu, like: CudaBytes) -> CudaBytes:
        """The tables on ``like``'s GPU, for work on ``like``'s stream. The first call on
        a GPU enqueues them on a stream of their own; until they are made, each call's
        stream waits for them on the GPU (an event), and the host waits for nothing.
        Waited for by the host on the caller's stream, they took the upload queued
        before on it with them (a chunk job's first 32 MiB piece: a set-up of up to 2-5
        ms on the H200, against 0.1-0.2 for the others, whose set-ups waited on this
        object's lock meanwhile: docs/benchmarks)."""
        from cuda.bindings import driver

        with self._lock:
            if like.device not in self._on:
                gpu.make_current()
                pointer = int(checked(driver.cuMemAlloc(_H_TABLES_BYTES)))
                self._on[like.device] = pointer
                stream = int(checked(driver.cuStreamCreate(
                    driver.CUstream_flags.CU_STREAM_NON_BLOCKING)))
                made = checked(driver.cuEventCreate(
                    driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
                self._made[like.device] = (stream, made)
                launch_position_tables(gpu, stream, self._h, pointer)
                checked(driver.cuEventRecord(made, stream))
            if like.device not in self._done:
                gpu.make_current()
                event = self._made[like.device][1]
                (status,) = driver.cuEventQuery(event)
                if status == driver.CUresult.CUDA_SUCCESS:
                    self._done.add(like.device)  # (made: no stream need wait any more)
                elif status == driver.CUresult.CUDA_ERROR_NOT_READY:
                    checked(driver.cuStreamWaitEvent(like.stream, event, 0))
                else:
                    checked((status,))
            return CudaBytes(self._on[like.device], _H_TABLES_BYTES, like.device, 0, False)

    def with_powers(self, gpu: Gpu, like: CudaBytes) -> None:
        """H's powers after the tables on ``like``'s GPU (:func:`launch_powers`), made
        once there and waited for, as :meth:`on` makes the tables (which it follows)."""
        from cuda.bindings import driver

        with self._lock:
            if like.device not in self._powers_on:
                gpu.make_current()
                launch_powers(gpu, like.stream, self._h, self._on[like.device])
                checked(driver.cuStreamSynchronize(like.stream))
                self._powers_on.add(like.device)

    def used(self, gpu: Gpu, like: CudaBytes, current: bool = False) -> None:
        """The work just queued on ``like``'s stream reads the tables: they outlive it.
        ``current``: the caller has made ``gpu``'s context current already."""
        if not self._per_call:
            return  # (the whole GPU is waited for when they are freed)
        driver = cuda_driver()
        with self._lock:
            if not current:
                gpu.make_current()
            event = self._after.get((like.device, like.stream))
            if event is None:
                event = checked(driver.cuEventCreate(
                    driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
                self._after[(like.device, like.stream)] = event
            checked(driver.cuEventRecord(event, like.stream))


@keeps_callers_context
def _free_tables(on: dict[int, int], after: dict[tuple[int, int], Any],
                 whole_gpu: bool, made: dict[int, tuple[int, Any]]) -> None:
    from cuda.bindings import driver

    # (unchecked: at exit the driver may have gone first)
    for (ordinal, _), event in after.items():
        cuda_device(ordinal).make_current()
        driver.cuEventSynchronize(event)
        driver.cuEventDestroy(event)
    for ordinal, (stream, event) in made.items():
        cuda_device(ordinal).make_current()
        driver.cuEventSynchronize(event)
        driver.cuEventDestroy(event)
        driver.cuStreamDestroy(stream)
    for ordinal, pointer in on.items():
        cuda_device(ordinal).make_current()
        if whole_gpu:
            driver.cuCtxSynchronize()
        driver.cuMemFree(pointer)


class _GhashTables:
    """The nibble and position tables (ghash.cl) of the powers 1..256 of H and of each
    H^segment that folds segments' sums (ghash.fold_on_device), on one GPU, each made
    there when first needed (under the GPU's lock)."""

    def __init__(self, gpu: Gpu, multipliers: Any) -> None:
        from cuda.bindings import driver

        self._gpu, self._multipliers = gpu, multipliers
        self._free = driver.cuMemFree
        self._buffers: list[Any] = []
        self._tables: dict[int, tuple[Any, Any]] = {}

    def of(self, exponent: int) -> tuple[Any, Any]:
        """The nibble tables of H^exponent's powers, and their position tables."""
        from cuda.bindings import driver

        if exponent not in self._tables:
            self._gpu.make_current()
            tables = checked(driver.cuMemAlloc(_POWER_TABLES_BYTES))
            self._buffers.append(tables)
            positions = checked(driver.cuMemAlloc(_POSITION_TABLES_BYTES))
            self._buffers.append(positions)
            stream = self._gpu.core.create_stream()
            base = self._multipliers.power(exponent)
            launch_power_tables(self._gpu, int(stream.handle), base, int(tables))
            launch_position_tables(self._gpu, int(stream.handle), base, int(positions))
            stream.sync()
            self._tables[exponent] = tables, positions
        return self._tables[exponent]

    def __del__(self) -> None:
        for buffer in getattr(self, "_buffers", ()):
            self._free(buffer)


# The GHASH tables of the hash keys H used last on device arrays, per GPU. Each GCM
# message is a new cipher object, and making its tables again cost 0.2 ms of GPU time
# a message on the H100 (ghash_power_tables), and a cuMemFree, which waits for the
# whole GPU. They stay in GPU memory until evicted or the process ends
# (docs/gpu-arrays.md, "GCM on device arrays").
_TABLES_KEPT = 4
_tables_kept: dict[tuple[int, int], _GhashTables] = {}
_tables_kept_lock = threading.Lock()


def _ghash_tables(gpu: Gpu, multipliers: Any) -> _GhashTables:
    """H's tables on a GPU: kept ones, or new (then the oldest kept is let go)."""
    with _tables_kept_lock:
        key = (gpu.core.device_id, multipliers.h)
        tables = _tables_kept.pop(key, None)
        if tables is None:
            tables = _GhashTables(gpu, multipliers)
        _tables_kept[key] = tables  # (the most recent last)
        while len(_tables_kept) > _TABLES_KEPT:
            del _tables_kept[next(iter(_tables_kept))]
        return tables


class CudaGhash:
    """GHASH partial sums of whole blocks in device memory, for one H on one GPU: the
    GHASH half of GCM on device arrays (the host keeps the running hash)."""

    def __init__(self, multipliers: Any, ordinal: int) -> None:
        self._multipliers = multipliers
        self._gpu = cuda_device(ordinal)
        self._gpu.core.set_current()
        # (the build for AES-128: no AES here)
        self._ghash, self._ghash_function = self._gpu.kernel("aes_gcm.cl", "gcm_ghash", 10)
        self._sums_as_blocks, _ = self._gpu.kernel("aes_gcm.cl", "ghash_sums_as_blocks", 10)
        self._segment = _GHASH_ITEMS * _GHASH_SEGMENT_STEPS
        self._tables = _ghash_tables(self._gpu, multipliers)

    def _launch(self, stream: Any, data: int, blocks: int, message_blocks: int, count: int,
                tables: tuple[Any, Any], partials: int) -> None:
        from cuda.core import LaunchConfig, launch

        self._gpu.make_current()
        launch(stream, LaunchConfig(grid=ghash_grid(self._gpu, self._ghash_function, count),
                                    block=_GHASH_ITEMS),
               self._ghash, np.uint64(data), np.uint32(blocks), np.uint32(message_blocks),
               np.uint32(message_blocks), np.uint32(count), np.uint64(int(tables[0])),
               np.uint64(int(tables[1])), np.uint64(partials))

    def partial_sum(self, span: CudaBytes) -> int:
        """The partial sum of the whole blocks of an aligned span, after the work before
        it on its stream; waits for that stream. The segments' sums are folded on the
        GPU too (ghash.fold_on_device), in memory kept for the GPU (Gpu.sums_buffer)."""
        with self._gpu.lock:
            self._gpu.core.set_current()
            return self.fold(self.sums(span, self._gpu.sums_buffer))

    def sums(self, span: CudaBytes, buffer: Callable[[int], int]) -> list[tuple[int, Any]]:
        """The GPU's part of :meth:`partial_sum`: for each launch, its blocks and its last
        segment's sum and the fold of the others (32 bytes), back on the host once the
        stream is done. ``buffer(nbytes)``: device memory for the sums, for this stream
        alone (the caller's, or the GPU's under its lock). Apart from :meth:`fold`, which
        is Python's arithmetic on the host: a pipeline's feeding threads run this part at
        once, and the caller folds their pieces' sums in order."""
        from cuda.bindings import driver
        from cuda.core import LaunchConfig, Stream, launch

        blocks, segment = span.nbytes // BLOCK_SIZE, self._segment
        stream = Stream.from_handle(span.stream)
        launches = []
        for first in range(0, blocks, _GHASH_LAUNCH_BLOCKS):
            count = min(_GHASH_LAUNCH_BLOCKS, blocks - first)
            segments = -(-count // segment)
            with self._gpu.lock:  # (a table is made on its first use)
                tables = self._tables.of(1), (self._tables.of(segment) if segments > 1
                                              else None)
            self._gpu.core.set_current()
            partials = buffer(16 * (segments + 1))  # then the fold
            self._launch(stream, span.pointer + first * BLOCK_SIZE, count, segment,
                         segments, tables[0], partials)
            if tables[1] is not None:  # the sums as blocks, folded by powers of H^segment
                launch(stream, LaunchConfig(grid=max(1, min(segments // 256, 64)), block=256),
                       self._sums_as_blocks, np.uint64(partials), np.uint32(segments))
                self._launch(stream, partials, segments - 1, segments - 1, 1, tables[1],
                             partials + 16 * segments)
            values = np.zeros(32, np.uint8)  # the last sum, then the fold
            checked(driver.cuMemcpyDtoHAsync(values, partials + 16 * (segments - 1), 32,
                                            span.stream))
            stream.sync()  # (before the buffer serves the next launch)
            launches.append((count, values))
        return launches

    def fold(self, launches: list[tuple[int, Any]]) -> int:
        """The partial sum of the blocks of :meth:`sums`' launches, in order."""
        total, segment = 0, self._segment
        for count, values in launches:
            segments = -(-count // segment)
            last, outer = values[:16], values[16:].view(np.uint64)
            if segments == 1:  # (still as gcm_ghash left it)
                part = (int(last.view(np.uint64)[0]) << 64) | int(last.view(np.uint64)[1])
            else:
                part = ghash.fold_on_device(
                    (int(outer[0]) << 64) | int(outer[1]), ghash.block_to_int(last.tobytes()),
                    segment, count - segment * (segments - 1), self._multipliers)
            total = self._multipliers.times_power(total, count) ^ part
        return total

    @staticmethod
    def read(span: CudaBytes) -> bytes:
        """The bytes of a span, after the work before it on its stream."""
        from cuda.bindings import driver

        host = np.empty(span.nbytes, np.uint8)
        if span.nbytes:
            cuda_device(span.device).make_current()
            checked(driver.cuMemcpyDtoHAsync(host, span.pointer, span.nbytes, span.stream))
            checked(driver.cuStreamSynchronize(span.stream))
        return host.tobytes()


# The positions, among the arguments of _crypt_and_tags_launch's gcm_crypt_hash, of those
# a kept lone sealing (_kept_lone) sets at each call: the input, the output, the J0
# (by value) and the tag's place. Every other argument is the same for a length.
_LONE_SEALING_CHANGES = (0, 1, 12, 16)
# And those a kept lone opening sets: the input, the output, the J0, the received tag's
# place and the verdict word.
_LONE_OPENING_CHANGES = (0, 1, 12, 21, 24)
# Lone launches (a length and direction) a stream's kernels keep: past them, all are
# made again.
_LONE_LAUNCHES_MOST = 64


class _CryptHash:
    """gcm_crypt_hash as one GPU runs it for one key size: its build (kernels.
    crypt_hash_defines), function and launch shape."""

    def __init__(self, gpu: Gpu, rounds: int, shape: tuple[int, int, int, int, int]
                 ) -> None:
        from cuda.bindings import driver

        tables, threads, in_local, lanes, sums_by_powers = shape
        self.sums_by_powers = bool(sums_by_powers)
        tables = crypt_hash_tables(gpu.shared_optin, min(tables, gpu.round_tables), threads,
                                   in_local, lanes)
        self.items = _CRYPT_HASH_ITEMS
        self.shared_bytes = table_bytes(tables, lanes)
        self._code = module("aes_gcm.cl", crypt_hash_defines(rounds, tables, threads, in_local,
                                                             lanes, sums_by_powers), gpu.arch)
        self._kernel = self._code.get_kernel("gcm_crypt_hash")
        self.function = launch_function(self._kernel, "gcm_crypt_hash", self.shared_bytes)
        most = int(checked(driver.cuFuncGetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.function)))
        self.threads = max(self.items, min(threads, most) // self.items * self.items)
        per_sm = checked(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self.function, self.threads, self.shared_bytes))
        self.most_blocks = gpu.sms * max(1, int(per_sm))  # one wave: the kernel strides


_crypt_hashes: dict[tuple[int, int, tuple[int, int, int, int, int]], _CryptHash] = {}
_crypt_hashes_lock = threading.Lock()


def _crypt_hash(gpu: Gpu, rounds: int,
                shape: tuple[int, int, int, int, int] = _CRYPT_HASH_SHAPE) -> _CryptHash:
    with _crypt_hashes_lock:
        key = (gpu.core.device_id, rounds, shape)
        if key not in _crypt_hashes:
            _crypt_hashes[key] = _CryptHash(gpu, rounds, shape)
        return _crypt_hashes[key]


class CudaChunkKernels:
    """The chunked format's device operations (device_chunks.ChunkKernels) for one chunk
    key on one GPU, on one stream: the GCM kernels of ``cl/aes_gcm.cl`` over slots,
    and ``cl/chunk_layout.cl``'s packing."""

    def __init__(self, key: bytes, h: int, ordinal: int, like: CudaBytes,
                 tables: KeyTables | None = None, key_argument: Any = None) -> None:
        self._gpu = gpu = cuda_device(ordinal)
        gpu.core.set_current()
        rounds = keyschedule.rounds_for_key(key)
        self._rounds = rounds
        self._shape = launch_shape(self._gpu.core.device_id)
        self._like = like
        self._memory = StreamMemory(None, like)
        self._spans: list[CudaBytes] = []
        # H's position tables (all the fused kernel reads), made and freed in the
        # stream's order: nothing here waits. Its nibble tables only where the separate
        # kernels run (_nibble_tables).
        self._h = h
        self._tables = tables
        if tables is not None:  # (kept for the key: tables.on)
            self._h_positions = tables.on(gpu, like)
        else:
            self._h_positions = self.scratch(_H_TABLES_BYTES)
            launch_position_tables(gpu, like.stream, h, self._h_positions.pointer)
        self._powers_made = False  # (H's powers after them: _with_powers)
        self._h_tables: CudaBytes | None = None
        self._chunk_key = bytes(key)
        self._key = key_argument if key_argument is not None else \
            keyschedule.kernel_key_argument(key, "host", False)
        self._held: list[np.ndarray] = []  # host memory a copy reads, until the stream is done
        self.fused = fused_gcm()
        self.takes_messages = self.fused  # (the fused kernel takes them: device_messages.py)
        if self.fused:
            self._crypt_hash = _crypt_hash(self._gpu, rounds)
        # (_kept_lone: by length, and whether it seals)
        self._lone_launches: dict[tuple[int, bool], KeptLaunch] = {}

    def aligned(self, span: CudaBytes) -> bool:
        return span.pointer % BLOCK_SIZE == 0

    def scratch(self, nbytes: int) -> CudaBytes:
        span = self._memory.scratch(max(BLOCK_SIZE, nbytes), zeroed=False)
        self._spans.append(span)
        return CudaBytes(span.pointer, nbytes, span.device, span.stream, False)

    def release_all(self) -> None:
        """Free the scratch memory in the stream's order (after the work that uses it),
        and have the key's kept tables outlive that work. The object may be used again
        on its stream after (a chunk job's pieces on one slot: CudaHostChunks)."""
        if self._tables is not None:
            self._tables.used(self._gpu, self._like)
        for span in self._spans:
            self._memory.release(span)
        self._spans.clear()
        self._h_tables = None  # (scratch: released above)

    def copy(self, target: CudaBytes, source: CudaBytes) -> None:
        if source.nbytes:
            self._memory.copy(target, source)

    def zero(self, span: CudaBytes) -> None:
        from cuda.bindings import driver

        if span.nbytes:
            self._gpu.make_current()
            checked(driver.cuMemsetD8Async(span.pointer, 0, span.nbytes, self._like.stream))

    def upload(self, target: CudaBytes, data: bytes) -> None:
        from cuda.bindings import driver

        host = np.frombuffer(data, np.uint8).copy()
        self._held.append(host)
        self._gpu.make_current()
        checked(driver.cuMemcpyHtoDAsync(target.pointer, host, host.nbytes, self._like.stream))

    def empty_message_tag(self, j0: bytes) -> bytes:
        return ghash.encrypt_block(self._chunk_key, j0)

    def first_mismatch(self, computed: CudaBytes, received: CudaBytes, count: int) -> int:
        from cuda.bindings import driver

        index = self.scratch(4)
        self._gpu.make_current()
        checked(driver.cuMemsetD32Async(index.pointer, count, 1, self._like.stream))
        self._launch("chunks_first_mismatch", _THREADS_PER_BLOCK, self._grid(count),
                     computed.pointer, received.pointer, np.uint32(count), index.pointer)
        return int(np.frombuffer(CudaGhash.read(index), np.uint32)[0])

    def _function(self, name: str) -> Any:
        """The driver function of one of the separate kernels (gcm_*: aes_gcm.cl's, of
        this key size; else chunk_layout.cl's), each looked up once per GPU
        (Gpu.kernel) and here only when used: the fused kernel needs none of them."""
        if name.startswith("gcm_"):
            return self._gpu.kernel("aes_gcm.cl", name, self._rounds)[1]
        return self._gpu.kernel("chunk_layout.cl", name, None)[1]

    def _launch(self, name: str, threads: int, groups: int, *args: Any) -> None:
        self._gpu.make_current()
        launch_kernel(self._function(name), groups, threads, self._gpu.shared_bytes(name),
                      self._like.stream, *args)

    def _grid(self, items: int) -> int:
        return min(-(-items // _THREADS_PER_BLOCK), self._gpu.sms * _GRID_BLOCKS_PER_SM)

    def crypt(self, source: CudaBytes, target: CudaBytes, count: int, blocks: int,
              j0s: CudaBytes, lengths: CudaBytes, strides: tuple[int, int]) -> None:
        if blocks:
            self._launch("gcm_ctr_xor", self._shape.threads,
                         self._gpu.table_grid(blocks, self._shape), source.pointer,
                         target.pointer, np.uint32(blocks), np.uint32(SLOT_BLOCKS),
                         np.uint32(strides[0]), np.uint32(strides[1]), np.uint32(1),
                         j0s.pointer, lengths.pointer, self._key)

    def _nibble_tables(self) -> CudaBytes:
        """H's nibble tables (ghash.cl), made when first needed, in the stream's order."""
        if self._h_tables is None:
            self._h_tables = self.scratch(_POWER_TABLES_BYTES)
            launch_power_tables(self._gpu, self._like.stream, self._h, self._h_tables.pointer)
        return self._h_tables

    def tags(self, text: CudaBytes, stride: int, count: int, blocks: int, j0s: CudaBytes,
             lengths: CudaBytes, tags: CudaBytes, tag_stride: int) -> None:
        h_tables = self._nibble_tables().pointer
        partials = self.scratch(16 * count)
        self._launch("gcm_ghash", _GHASH_ITEMS,
                     ghash_grid(self._gpu, self._function("gcm_ghash"), count),
                     text.pointer, np.uint32(blocks), np.uint32(SLOT_BLOCKS),
                     np.uint32(stride), np.uint32(count), h_tables,
                     self._h_positions.pointer, partials.pointer)
        self._launch("gcm_tags", self._shape.threads, self._gpu.table_grid(count, self._shape),
                     partials.pointer, np.uint32(count), j0s.pointer, lengths.pointer,
                     h_tables, tags.pointer, np.uint32(tag_stride), self._key)

    def crypt_and_tags(self, source: CudaBytes, target: CudaBytes, count: int, blocks: int,
                       run: ChunkRun | Messages, strides: tuple[int, int],
                       tags: CudaBytes | None, tag_stride: int, sealing: bool,
                       check: TagCheck | None) -> None:
        self._gpu.make_current()
        launch_kernel(*self._crypt_and_tags_launch(source, target, count, blocks, run, strides,
                                                   tags, tag_stride, sealing, check))

    def seal_lone(self, source: int, target: int, nbytes: int, j0: bytes) -> None:
        """A lone message of ``nbytes`` (whole blocks) with no AAD, at address ``source``
        on this stream, sealed to address ``target`` (the ciphertext, then the tag) with
        J0 ``j0``: device_messages.seal's launch for it, through the one kept for its
        length (one driver call, and nothing allocated). Leaves the calling thread's
        context as it found it."""
        callers = self._gpu.enter()
        try:
            self._kept_lone(nbytes, True).launch(source, target, j0, target + nbytes)
            if self._tables is not None:  # (and no scratch: nothing else to release)
                self._tables.used(self._gpu, self._like, current=True)
        finally:
            self._gpu.leave(callers)

    def open_lone(self, source: int, target: int, nbytes: int, j0: bytes) -> bool:
        """A lone message of ``nbytes`` (whole blocks) with no AAD, sealed at address
        ``source`` on this stream (its ciphertext, then its tag), opened to address
        ``target`` with J0 ``j0``, its tag compared on the device: whether it matched,
        once the work is done. The plaintext is written either way: the caller zeroes
        it where the tag failed. device_messages.open_rows's launch for it, through the
        one kept for its length. Leaves the calling thread's context as it found it."""
        callers = self._gpu.enter()
        try:
            verdict = self.verdict()
            self._kept_lone(nbytes, False).launch(source, target, j0, source + nbytes,
                                                  verdict.pointer)
            if self._tables is not None:
                self._tables.used(self._gpu, self._like, current=True)
            value, _ = self.read_verdict(verdict, None)
        finally:
            self._gpu.leave(callers)
        return value == NO_MISMATCH

    def _kept_lone(self, nbytes: int, sealing: bool) -> KeptLaunch:
        """The fused kernel's launch that seals (or opens) a lone message of ``nbytes``
        with no AAD on this stream, its J0 by value, made once a length and direction
        and kept: the input's and output's addresses, J0, and the tag's place (or the
        received tag's and the verdict word) are all that change a call
        (_LONE_SEALING_CHANGES, _LONE_OPENING_CHANGES)."""
        launch = self._lone_launches.get((nbytes, sealing))
        if launch is None:
            blocks = nbytes // BLOCK_SIZE
            anywhere = CudaBytes(0, nbytes + BLOCK_SIZE, self._like.device, self._like.stream,
                                 False)
            lone = Messages(None, blocks, None, 0, bytes(BLOCK_SIZE))
            if sealing:
                arguments = self._crypt_and_tags_launch(
                    anywhere, anywhere, 1, blocks, lone, (blocks, blocks + 1), anywhere,
                    blocks + 1, True, None)
            else:
                arguments = self._crypt_and_tags_launch(
                    anywhere, anywhere, 1, blocks, lone, (blocks + 1, blocks), None, 0, False,
                    TagCheck(anywhere, blocks + 1, anywhere, 0))
            launch = KeptLaunch(*arguments, changing=_LONE_SEALING_CHANGES if sealing
                                else _LONE_OPENING_CHANGES)
            if len(self._lone_launches) >= _LONE_LAUNCHES_MOST:
                self._lone_launches.clear()
            launch = self._lone_launches.setdefault((nbytes, sealing), launch)
        return launch

    def _crypt_and_tags_launch(self, source: CudaBytes, target: CudaBytes, count: int,
                               blocks: int, run: ChunkRun | Messages,
                               strides: tuple[int, int], tags: CudaBytes | None,
                               tag_stride: int, sealing: bool, check: TagCheck | None
                               ) -> tuple[Any, ...]:
        """:meth:`crypt_and_tags`'s launch: what :func:`launch_kernel` takes, arguments
        in the order of gcm_crypt_hash's parameters (_LONE_SEALING_CHANGES counts on
        it)."""
        fused = self._crypt_hash
        if isinstance(run, Messages) and count == 1 \
                and run.message_blocks <= _LONE_MOST_BLOCKS:
            fused = _crypt_hash(self._gpu, self._rounds, _LONE_CRYPT_HASH_SHAPE)
            if fused.sums_by_powers:
                self._with_powers()
        items = message_items(count, fused.items, fused.threads, fused.most_blocks)
        grid = min(-(-count // (fused.threads // items)), fused.most_blocks)
        received, received_stride, verdict, verdict_first = \
            (0, 0, 0, 0) if check is None else (check.received.pointer, check.stride,
                                                check.verdict.pointer, check.first)
        if isinstance(run, Messages):
            message_blocks = run.message_blocks
            if run.j0s is None:  # (a lone message, its J0 by value: a chunk run of one)
                j0s, base_j0, first_chunk, last_bytes = 0, run.j0, 0, message_blocks * BLOCK_SIZE
            else:
                j0s, base_j0, first_chunk, last_bytes = run.j0s.pointer, bytes(BLOCK_SIZE), 0, 0
            masks, mask_step = (0, 0) if run.masks is None else (run.masks.pointer,
                                                                 run.mask_step)
        else:  # (J0s and lengths made by the kernel: a NULL pointer, the run by value)
            message_blocks, j0s, masks, mask_step = SLOT_BLOCKS, 0, 0, 0
            base_j0, first_chunk, last_bytes = run.base_j0, run.first, run.last_bytes
        return (fused.function, grid, fused.threads, fused.shared_bytes, self._like.stream,
                source.pointer, target.pointer, np.uint32(blocks), np.uint32(message_blocks),
                np.uint32(strides[0]), np.uint32(strides[1]), np.uint32(0), np.uint32(0),
                np.uint32(count), np.uint32(items), np.uint32(sealing), j0s,
                np.frombuffer(base_j0, np.uint8), first_chunk, last_bytes,
                self._h_positions.pointer, 0 if tags is None else tags.pointer, np.uint32(0),
                np.uint32(tag_stride), masks, np.uint32(mask_step), received, np.uint32(0),
                np.uint32(received_stride), verdict, np.uint32(verdict_first), self._key)

    def _with_powers(self) -> None:
        """H's powers after its position tables, for a build that sums by powers: made
        in this stream's order (kept tables: once a GPU, and waited for)."""
        if not self._powers_made:
            if self._tables is not None:
                self._tables.with_powers(self._gpu, self._like)
            else:
                launch_powers(self._gpu, self._like.stream, self._h, self._h_positions.pointer)
            self._powers_made = True

    def verdict(self) -> CudaBytes:
        from cuda.bindings import driver

        # (one kept with NO_MISMATCH in it: no command of its own before the launches)
        with self._gpu.lock:
            pointer = self._gpu.verdicts.pop() if self._gpu.verdicts else None
        if pointer is None:
            self._gpu.make_current()
            pointer = int(checked(driver.cuMemAlloc(VERDICT_BYTES)))
            checked(driver.cuMemsetD32(pointer, NO_MISMATCH, 1))
        return CudaBytes(pointer, VERDICT_BYTES, self._like.device, self._like.stream, False)

    def read_verdict(self, verdict: CudaBytes, also: CudaBytes | None) -> tuple[int, bytes]:
        from cuda.bindings import driver

        # (``also`` beside the word on the device: one read back, as engines/opencl does)
        self._gpu.make_current()
        if also is not None:
            checked(driver.cuMemcpyDtoDAsync(verdict.pointer + VERDICT_ALSO_AT, also.pointer,
                                            also.nbytes, self._like.stream))
        found = CudaGhash.read(verdict)
        value = int.from_bytes(found[:4], "little")
        if value == NO_MISMATCH:  # (as it was taken: a later call's)
            with self._gpu.lock:
                self._gpu.verdicts.append(verdict.pointer)
        else:  # (after the read above: nothing of the stream's uses it any more)
            checked(driver.cuMemFree(verdict.pointer))
        size = 0 if also is None else also.nbytes
        return value, found[VERDICT_ALSO_AT : VERDICT_ALSO_AT + size]

    def counters(self, base_nonce: bytes, first: int, count: int, last_bytes: int,
                 j0s: CudaBytes, lengths: CudaBytes) -> None:
        # The base J0 is a uint4 by value: its 16 bytes in memory order are the core's
        # columns.
        self._launch("chunks_counters", _THREADS_PER_BLOCK, self._grid(count),
                     np.frombuffer(base_j0(base_nonce), np.uint8), first, np.uint32(count),
                     last_bytes, j0s.pointer, lengths.pointer)

    def gather_tags(self, sealed: CudaBytes, tags: CudaBytes, count: int) -> None:
        self._launch("chunks_tags", _THREADS_PER_BLOCK, self._grid(count),
                     sealed.pointer, tags.pointer, np.uint32(count))
