"""The OpenCL engine's workers: a device's kernels over the ranges of a job.

Block jobs (ECB, CTR) go through :class:`KernelLauncher`, chunked-format jobs
through :class:`OpenclHostChunks` (the chunked format's device program, device_chunks.py,
over :class:`OpenclChunkKernels`); both stream host data through the device's pinned,
overlapped pipeline (pipeline.py), one pipeline run for all the ranges an
engine pulls, so pieces keep overlapping from one range to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl

from ... import ghash, keyschedule
from ..._arrays import BytesLike, default_slice_bytes, input_array
from ...chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    base_j0,
    check_base_nonce,
    check_chunk_range,
    check_key,
    plaintext_run,
    sealed_run,
    sealed_size,
)
from ...devices import Device
from ..host_copies import copy_parts
from ..interface import BLOCK_SIZE, BlockTransform, Ranges
from ..programs import device_chunks
from ..registry import resolve
from .gcm_kernels import GcmKernels
from .kernels import aes_options, kernel_in, key_argument
from .pipeline import (
    PIECE_BYTES,
    Launch,
    Piece,
    is_pinned,
    piece_bytes,
    pipeline,
    usable_in_place,
)
from .runtime import device_runtime, kept_per_object
from .tuning import launch_config

# (queue, source buffer, target buffer, blocks) -> event: a mode's kernel over device-resident
# data, for measuring it (aescl.bench) without host transfers.
DeviceLaunch = Callable[[Any, Any, Any, int], Any]
# Chunks a piece of host data holds unless the scheduler says (its batch_chunks).
DEFAULT_BATCH_CHUNKS = PIECE_BYTES // CHUNK_SIZE


class KernelLauncher:
    """One AES kernel bound to a device and a key, moving host arrays through it."""

    def __init__(
        self,
        device: Device,
        filename: str,
        kernel_name: str,
        key: Any,
        rounds: int,
        key_schedule: str,
        context: Any = None,
    ) -> None:
        config = launch_config(device)
        options = aes_options(rounds, key_schedule, config)
        self.runtime = device_runtime(device, context)  # (its lock: the kernel's arguments)
        self._kernel = kernel_in(self.runtime, filename, options, kernel_name)
        kernel_limit = self._kernel.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, device.cl_device
        )
        self._work_group_size = max(1, min(config.work_group_size, kernel_limit))
        self._max_work_groups = config.max_work_groups
        self._key = key  # (kernels.key_argument)
        self._device = device
        self.piece_bytes = min(PIECE_BYTES, default_slice_bytes(device))

    def enqueue(
        self, queue: Any, source: Any, target: Any, blocks: int, extra_args: tuple[Any, ...],
        wait_for: list[Any] | None = None,
    ) -> Any:
        """Launch the kernel over ``blocks`` blocks of device buffers; returns the event.

        ``source`` and ``target`` may be the same buffer (in place). ``extra_args``
        are the kernel arguments after the block count (the CTR counter).
        """
        groups = min(self._max_work_groups, -(-blocks // self._work_group_size))
        self._kernel.set_args(source, target, np.uint64(blocks), *extra_args, self._key)
        return cl.enqueue_nd_range_kernel(
            queue, self._kernel, (groups * self._work_group_size,), (self._work_group_size,),
            wait_for=wait_for,
        )

    def run(
        self,
        source: np.ndarray,
        target: np.ndarray,
        ranges: Iterable[tuple[int, int]],
        slice_args: Callable[[int], tuple[Any, ...]] = lambda first_block: (),
    ) -> None:
        """Process the block ranges pulled from ``ranges`` from ``source`` into ``target``
        (whole-job arrays; may be the same memory), all through one run of the device's
        overlapped pipeline (pipeline.py), so that pieces keep overlapping across
        ranges. A range is pulled only when the pipeline has room for it.

        ``slice_args(first_block)`` gives the kernel arguments that depend on the
        piece's position (the CTR counter), placed after the block count.
        """
        step = piece_bytes(self._device, (source, target), self.piece_bytes) // BLOCK_SIZE

        def piece(lo: int, hi: int) -> Piece:
            blocks, args = hi - lo, slice_args(lo)
            span = slice(lo * BLOCK_SIZE, hi * BLOCK_SIZE)
            return Piece.through(
                self._device, source[span], target[span],
                lambda queue, device_in, device_out, _: self.enqueue(
                    queue, device_in, device_out, blocks, args),
            )

        def pieces() -> Iterator[Piece]:
            for start, stop in ranges:
                for lo in range(start, stop, step):
                    yield piece(lo, min(stop, lo + step))

        pipeline(self._device).run(pieces())


class BufferSpan(NamedTuple):
    """Bytes ``offset .. offset + nbytes`` of an OpenCL buffer. (A named tuple: a
    chunked call makes a dozen before its first launch, at a third of a frozen
    dataclass's cost.)"""

    buffer: Any
    offset: int
    nbytes: int

    def at(self, offset: int, nbytes: int) -> BufferSpan:
        return BufferSpan(self.buffer, self.offset + offset, nbytes)



# Bytes an upload sends as fill patterns at most (OpenclChunkKernels.upload).
_UPLOAD_BY_FILLS = 4096


class OpenclChunkKernels:
    """The chunked format's device operations (device_chunks.ChunkKernels) over spans of
    OpenCL buffers, on the queue of the GCM kernels' runtime: in a caller's context for
    pyopencl arrays (arrays.py), in aescl's own for a piece of host data
    (:class:`OpenclHostChunks`)."""

    def __init__(self, engine: GcmKernels, device: Device, context: Any, key: bytes) -> None:
        self._engine, self._device, self._context = engine, device, context
        self._key = key
        self._queue = engine.runtime.queue
        self._scratch: list[Any] = []  # (runtime.take_scratch: given back by release)
        self._align = device.cl_device.mem_base_addr_align // 8
        config = engine.launch  # (the device's launch_config, read once a call)
        self._group, self._groups = config.work_group_size, config.max_work_groups
        # Read once a call ($AESCL_GCM_FUSED): the format's code asks at every batch.
        self.fused = engine.fused and device_chunks.fused_gcm()
        # Many messages in one launch: the fused kernel's, or a CPU's one-pass kernel.
        self.takes_messages = self.fused or engine.messages_in_one_pass
        # Every buffer and sub-buffer the call's work uses, let go once that work is done
        # (see _park).
        self.held: list[Any] = []

    def _layout_kernel(self, name: str) -> Any:
        """A kernel of chunk_layout.cl (the fused kernel's calls use none of them)."""
        return kernel_in(self._engine.runtime, "chunk_layout.cl", "", name)

    def aligned(self, span: BufferSpan) -> bool:
        return span.offset % self._align == 0

    def _buffer(self, span: BufferSpan) -> Any:
        if span.offset == 0:
            return span.buffer
        buffer = span.buffer.get_sub_region(span.offset, span.nbytes)
        self.held.append(buffer)
        return buffer

    def _at_block(self, span: BufferSpan) -> tuple[Any, int]:
        """A span as its buffer and first block, for a kernel that takes offsets (no
        sub-buffer to let go of later: see aes_gcm.cl's gcm_crypt_hash); a sub-buffer
        from block 0 where the span starts inside a block."""
        if span.offset % BLOCK_SIZE:
            return self._buffer(span), 0
        return span.buffer, span.offset // BLOCK_SIZE

    def scratch(self, nbytes: int) -> BufferSpan:
        return BufferSpan(self._take(nbytes), 0, nbytes)

    def _take(self, nbytes: int) -> Any:
        buffer = self._engine.runtime.take_scratch(nbytes)
        self._scratch.append(buffer)
        return buffer

    def release(self) -> None:
        """Once the call's work is done: its scratch to later calls (see _park)."""
        self._engine.runtime.give_back_scratch(self._scratch)
        self._scratch.clear()

    def copy(self, target: BufferSpan, source: BufferSpan) -> None:
        if source.nbytes:
            cl.enqueue_copy(self._queue, target.buffer, source.buffer, byte_count=source.nbytes,
                            src_offset=source.offset, dst_offset=target.offset)

    def zero(self, span: BufferSpan) -> None:
        if span.nbytes:
            cl.enqueue_fill_buffer(self._queue, span.buffer, np.uint8(0), span.offset,
                                   span.nbytes)

    def upload(self, target: BufferSpan, data: bytes) -> None:
        # As fill patterns (up to 128 bytes each, as the offsets allow), which the enqueue
        # copies: a write from ordinary memory waits (on NVIDIA's OpenCL) for all the work
        # queued before it, a call that returns before its work is done must hold no
        # host memory, and a buffer staged for it would be freed later, which waits
        # there for all the work on the device. Past a few KiB (the J0s of many
        # messages: device_messages.py) those were thousands of commands, 0.1 s for 65,536
        # messages on the CI kind: such data goes into a buffer of its own, made from it
        # (the runtime copies it before it returns), and from there on the queue, the
        # buffer held as the call's spans are.
        if len(data) > _UPLOAD_BY_FILLS:
            source = cl.Buffer(self._context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                               hostbuf=np.frombuffer(data, np.uint8))
            self.held.append(source)
            cl.enqueue_copy(self._queue, target.buffer, source, byte_count=len(data),
                            dst_offset=target.offset)
            return
        at = 0
        while at < len(data):
            size = 1
            while size < 128 and (target.offset + at) % (2 * size) == 0 \
                    and at + 2 * size <= len(data):
                size *= 2
            cl.enqueue_fill_buffer(self._queue, target.buffer,
                                   np.frombuffer(data[at : at + size], np.uint8).copy(),
                                   target.offset + at, size)
            at += size

    def empty_message_tag(self, j0: bytes) -> bytes:
        return ghash.encrypt_block(self._key, j0)

    def first_mismatch(self, computed: BufferSpan, received: BufferSpan, count: int) -> int:
        found = np.array([count], np.uint32)
        index = self._take(found.nbytes)  # (scratch: nothing freed once the call is done)
        cl.enqueue_fill_buffer(self._queue, index, found, 0, found.nbytes)
        buffers = self._buffer(computed), self._buffer(received)
        first_mismatch = self._layout_kernel("chunks_first_mismatch")
        first_mismatch.set_args(*buffers, np.uint32(count), index)
        groups = min(self._groups, -(-count // self._group))
        cl.enqueue_nd_range_kernel(self._queue, first_mismatch, (groups * self._group,),
                                   (self._group,))
        cl.enqueue_copy(self._queue, found, index, is_blocking=True)
        return int(found[0])

    def crypt(self, source: BufferSpan, target: BufferSpan, count: int, blocks: int,
              j0s: BufferSpan, lengths: BufferSpan, strides: tuple[int, int]) -> None:
        if blocks:
            self._engine.enqueue_ctr(self._buffer(source), blocks, device_chunks.SLOT_BLOCKS, 1,
                                      j0s.buffer, lengths.buffer, self._buffer(target),
                                      strides)
            self._queue.flush()  # (the GPU starts on it while the rest is enqueued)

    def tags(self, text: BufferSpan, stride: int, count: int, blocks: int, j0s: BufferSpan,
             lengths: BufferSpan, tags: BufferSpan, tag_stride: int) -> None:
        partials = self._take(16 * count)
        self._engine.enqueue_ghash(self._buffer(text), blocks, device_chunks.SLOT_BLOCKS,
                                    count, partials, stride=stride)
        self._engine.enqueue_tags(partials, count, j0s.buffer, lengths.buffer,
                                   self._buffer(tags), tag_stride)
        self._queue.flush()  # (opening hashes first: the GPU starts while CTR is enqueued)

    def crypt_and_tags(self, source: BufferSpan, target: BufferSpan, count: int, blocks: int,
                       run: device_chunks.ChunkRun | device_chunks.Messages,
                       strides: tuple[int, int], tags: BufferSpan | None, tag_stride: int,
                       sealing: bool, check: device_chunks.TagCheck | None) -> None:
        spans = [self._at_block(span) for span in (source, target)]
        tags_at = (None, 0) if tags is None else self._at_block(tags)
        verdict_check = None
        if check is not None:
            received, received_first = self._at_block(check.received)
            verdict_check = (received, received_first, check.stride, check.verdict.buffer,
                             check.first)
        masks = None
        if isinstance(run, device_chunks.Messages):
            message_blocks = run.message_blocks
            masks = None if run.masks is None else (self._buffer(run.masks), run.mask_step)
            j0s = None if run.j0s is None else self._buffer(run.j0s)
            if not self.fused:  # (a CPU device's one-pass kernel: takes_messages)
                self._engine.enqueue_messages(
                    spans[0][0], spans[1][0], message_blocks, count, strides, j0s, run.j0,
                    tags_at[0], tag_stride, sealing, (spans[0][1], spans[1][1], tags_at[1]),
                    verdict_check, masks)
                self._queue.flush()
                return
            # (a lone message, its J0 by value: a chunk run of one)
            chunk_run = None if j0s is not None else (run.j0, 0, message_blocks * BLOCK_SIZE)
        else:
            message_blocks, j0s, chunk_run = device_chunks.SLOT_BLOCKS, None, run
        self._engine.enqueue_crypt_hash(spans[0][0], spans[1][0], blocks, message_blocks,
                                        count, strides, j0s, tags_at[0], tag_stride,
                                        sealing, (spans[0][1], spans[1][1], tags_at[1]),
                                        chunk_run, verdict_check, masks)
        self._queue.flush()  # (the GPU starts on it while the rest is enqueued)

    def verdict(self) -> BufferSpan:
        # From the runtime's, which hold NO_MISMATCH already: filling one here cost the
        # GPU's host a command (20-25 µs on NVIDIA's OpenCL) before the first launch, in
        # which the device idles. 32 bytes: the word, then room for a tag (read_verdict).
        runtime = self._engine.runtime
        with runtime.lock:
            word = runtime.verdicts.pop() if runtime.verdicts else None
        if word is None:
            preset = np.zeros(8, np.uint32)
            preset[0] = device_chunks.NO_MISMATCH
            word = cl.Buffer(self._context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                             hostbuf=preset)
        return BufferSpan(word, 0, device_chunks.VERDICT_BYTES)

    def read_verdict(self, verdict: BufferSpan, also: BufferSpan | None) -> tuple[int, bytes]:
        # ``also`` copied beside the word and read with it, in one blocking read: a
        # read of its own into host memory, not waited for, held the verdict's read
        # back 0.19 ms on NVIDIA's OpenCL (H200, 2026-11-26).
        found = np.empty(device_chunks.VERDICT_BYTES, np.uint8)
        beside = device_chunks.VERDICT_ALSO_AT
        if also is not None:
            cl.enqueue_copy(self._queue, verdict.buffer, also.buffer, byte_count=also.nbytes,
                            src_offset=also.offset, dst_offset=beside)
        cl.enqueue_copy(self._queue, found, verdict.buffer, is_blocking=True)
        value = int(found[:4].view(np.uint32)[0])
        if value == device_chunks.NO_MISMATCH:  # (as it was taken: a later call's)
            runtime = self._engine.runtime
            with runtime.lock:
                runtime.verdicts.append(verdict.buffer)
        return value, found[beside : beside + (0 if also is None else also.nbytes)].tobytes()

    def counters(self, base_nonce: bytes, first: int, count: int, last_bytes: int,
                 j0s: BufferSpan, lengths: BufferSpan) -> None:
        first_j0 = np.frombuffer(base_j0(base_nonce), cl.cltypes.uint4)
        counters = self._layout_kernel("chunks_counters")
        counters.set_args(first_j0[0], np.uint64(first), np.uint32(count),
                          np.uint64(last_bytes), j0s.buffer, lengths.buffer)
        groups = min(self._groups, -(-count // self._group))
        cl.enqueue_nd_range_kernel(self._queue, counters, (groups * self._group,),
                                   (self._group,))

    def gather_tags(self, sealed: BufferSpan, tags: BufferSpan, count: int) -> None:
        gather = self._layout_kernel("chunks_tags")
        groups = min(self._groups, -(-count // self._group))
        # (held by self.held: a sub-buffer released between set_args and the launch is
        # an argument NVIDIA's driver refuses, INVALID_KERNEL_ARGS)
        buffers = self._buffer(sealed), self._buffer(tags)
        gather.set_args(*buffers, np.uint32(count))
        cl.enqueue_nd_range_kernel(self._queue, gather, (groups * self._group,), (self._group,))



class OpenclHostChunks:
    """The chunked format's chunks on host arrays (one chunk key and base nonce), through
    one device's pipeline (pipeline.py): each piece of chunks is sealed or opened by the
    chunked format's device program (device_chunks.py), on the piece's device buffers,
    as device arrays' chunks are. An opened piece's tags come back with its plaintext
    and are compared on the host, so that no launch waits for a verdict (the pipeline
    enqueues every piece from one thread): a piece that fails releases none of its
    plaintext (into pinned memory, where it goes straight from the device, it is
    zeroed there before the failure is raised).

    One route of its own, an optional operation: CPU devices whose GHASH is carry-less
    seal and open full chunks in one pass over memory (``cl/chunk_seal.cl``), which the
    program's extra trips through memory slow down there (docs/benchmarks)."""

    def __init__(self, key: bytes, base_nonce: bytes, device: Device | str | None = None,
                 batch_chunks: int | None = None) -> None:
        self._batch_chunks = batch_chunks
        check_key(key)
        check_base_nonce(base_nonce)
        self._device = resolve(device)
        self._key, self._base_nonce = bytes(key), bytes(base_nonce)
        # H = E(0^128) on the host: the kernels' tables are made from it on the device.
        self._kernels = GcmKernels(self._key, self._device, "host", h=ghash.hash_subkey(self._key))
        self.runtime = self._kernels.runtime  # (its lock: kept_per_object)
        # J0 of chunk 0 as the AES core's four columns (cl/chunk_seal.cl).
        self._base_j0 = np.frombuffer(base_j0(self._base_nonce),
                                      dtype="<u4").view(cl.cltypes.uint4)[0]

    @property
    def seals_in_one_pass(self) -> bool:
        """Whether full chunks are sealed and opened in one pass (cl/chunk_seal.cl)."""
        return self._one_pass is not None

    def device_seal(self, plaintext: Any, sealed: Any, message_bytes: int) -> list[Any]:
        """Enqueue the sealing of a message of ``message_bytes`` in one device buffer into
        another (the format's whole device work, for aescl.bench); returns the events
        of its first and last commands (one event where it is one launch)."""
        queue = device_runtime(self._device).queue
        if self._one_pass is not None and not message_bytes % CHUNK_SIZE:
            return [self._enqueue_one_pass(queue, "chunks_seal", plaintext, sealed, 0,
                                           message_bytes // CHUNK_SIZE)]
        kernels = self.chunk_kernels()
        before = cl.enqueue_marker(queue)
        device_chunks.seal(kernels, self._base_nonce, BufferSpan(plaintext, 0, message_bytes),
                           BufferSpan(sealed, 0, sealed_size(message_bytes, raw=True)))
        kernels.release()  # (scratch given back: later work on this in-order queue)
        return [before, cl.enqueue_marker(queue)]

    def chunk_kernels(self) -> OpenclChunkKernels:
        """The program's operations on aescl's queue for this device."""
        return OpenclChunkKernels(self._kernels, self._device, None, self._key)

    # ---- the one-pass route of CPU devices -----------------------------------------

    @kept_per_object
    def _one_pass(self) -> dict[str, Any] | None:
        """The kernels that seal and open full chunks in one pass over memory
        (GcmKernels.one_pass), by name, with their arguments after the data buffers; or
        None where the device lacks them."""
        found = {name: self._kernels.one_pass(name) for name in ("chunks_seal", "chunks_open")}
        if None in found.values():
            return None
        tables = self._kernels.h_tables(self._kernels.launch.blocks_per_item)
        device_runtime(self._device).queue.finish()  # built before another queue reads them
        return {"kernels": found, "args": (tables, self._kernels.key)}

    def _enqueue_one_pass(self, queue: Any, name: str, source: Any, target: Any,
                          first: int, count: int) -> Any:
        """One work-item per chunk, one chunk per work-group: the runtime spreads the
        groups over its threads however few chunks a run has."""
        one_pass = self._one_pass
        assert one_pass is not None
        launch = one_pass["kernels"][name]
        launch.set_args(source, target, self._base_j0, np.uint64(first), np.uint32(count),
                        *one_pass["args"])
        return cl.enqueue_nd_range_kernel(queue, launch, (count,), (1,))

    # ---- pieces through the pipeline -------------------------------------------------

    def _program(self, scratch: dict[str, Any]) -> OpenclChunkKernels:
        """The program's operations for a piece: the slot's earlier piece's given back
        first (its commands are before this piece's on the in-order queue, so whatever
        takes its scratch next runs after them)."""
        earlier = scratch.pop("chunk_kernels", None)
        if earlier is not None:
            earlier.release()
        scratch["chunk_kernels"] = kernels = self.chunk_kernels()
        return kernels

    def _seal_launch(self, first: int, count: int, in_bytes: int, out_bytes: int,
                     final: bool) -> Launch:
        """Device work of sealing a piece: its plaintext in, its sealed chunks out."""
        if self._one_pass is not None and not final:
            return lambda queue, plaintext, sealed, _: self._enqueue_one_pass(
                queue, "chunks_seal", plaintext, sealed, first, count)

        def launch(queue: Any, plaintext: Any, sealed: Any, scratch: dict[str, Any]) -> Any:
            device_chunks.seal(self._program(scratch), self._base_nonce,
                               BufferSpan(plaintext, 0, in_bytes),
                               BufferSpan(sealed, 0, out_bytes), first, final)
            return cl.enqueue_marker(queue)
        return launch

    def _open_launch(self, first: int, count: int, in_bytes: int, text_room: int,
                     final: bool) -> Launch:
        """Device work of opening a piece: its sealed chunks in; out, the plaintext (in
        ``text_room`` bytes), then the computed tags, then the received ones (16 bytes a
        chunk each, compared by :func:`_checked`)."""
        if self._one_pass is not None and not final:
            return lambda queue, sealed, out, _: self._enqueue_one_pass(
                queue, "chunks_open", sealed, out, first, count)

        def launch(queue: Any, sealed: Any, out: Any, scratch: dict[str, Any]) -> Any:
            tags = BufferSpan(out, text_room, 2 * TAG_SIZE * count)
            device_chunks.open_unchecked(
                self._program(scratch), self._base_nonce, BufferSpan(sealed, 0, in_bytes),
                BufferSpan(out, 0, text_room), tags.at(0, TAG_SIZE * count),
                tags.at(TAG_SIZE * count, TAG_SIZE * count), first, final)
            return cl.enqueue_marker(queue)
        return launch

    def _seal_piece(self, source: np.ndarray, target: np.ndarray, first: int,
                    final: bool) -> Piece:
        full, _ = plaintext_run(source.nbytes, final)
        return Piece.through(self._device, source, target, self._seal_launch(
            first, full + int(final), source.nbytes, target.nbytes, final))

    def _open_piece(self, source: np.ndarray, target: np.ndarray, first: int,
                    final: bool) -> Piece:
        """A piece whose plaintext goes into ``target`` once every tag in it matched."""
        full, _ = sealed_run(source.nbytes, first, final)
        count = full + int(final)
        # (the tags where a kernel can write them: after the plaintext, rounded up)
        room = -(-target.nbytes // CHUNK_SIZE) * CHUNK_SIZE
        piece = Piece(source.nbytes, room + 2 * TAG_SIZE * count,
                      self._open_launch(first, count, source.nbytes, room, final))
        piece.read_from(self._device, source)
        if is_pinned(target, self._device) and not usable_in_place(
                target, self._device, writable=True):
            # Straight to the pinned target, beside the tags; zeroed there where they
            # did not match (Piece.copy_before_check). A piece whose plaintext does not
            # fill its room (the final chunk's) goes once its tags matched.
            piece.download_to, piece.check_from = target, room
            piece.check = lambda tags: _matched(tags, first, count, final)
            piece.copy_before_check = room == target.nbytes
        else:
            piece.store = lambda result: copy_parts(
                target, _checked(result, target.nbytes, room, first, count, final))
        return piece

    def _pieces(self, source: np.ndarray, target: np.ndarray, first: int,
                ranges: Iterable[tuple[int, int]], batch_chunks: int | None,
                opening: bool) -> Iterator[Piece]:
        """Pieces of at most ``batch_chunks`` full chunks (more where the arrays are
        staged: pipeline.piece_bytes) of each chunk range pulled from ``ranges``
        (relative to the arrays, whose chunk 0 is message chunk ``first``)."""
        # A piece is one allocation each way on the device: never more than it can hold.
        wanted = batch_chunks or self._batch_chunks or DEFAULT_BATCH_CHUNKS
        batch_chunks = max(1, min(
            piece_bytes(self._device, (source, target), wanted * CHUNK_SIZE) // CHUNK_SIZE,
            default_slice_bytes(self._device) // SEALED_CHUNK_SIZE))
        size_in, size_out = ((SEALED_CHUNK_SIZE, CHUNK_SIZE) if opening
                             else (CHUNK_SIZE, SEALED_CHUNK_SIZE))
        make = self._open_piece if opening else self._seal_piece
        for lo, hi in ranges:
            check_chunk_range(first + lo, hi - lo)
            for start in range(lo, hi, batch_chunks):
                stop = min(hi, start + batch_chunks)
                yield make(source[start * size_in : stop * size_in],
                           target[start * size_out : stop * size_out], first + start, False)

    def seal_ranges(self, plaintext: np.ndarray, sealed: np.ndarray, first: int,
                    ranges: Iterable[tuple[int, int]],
                    batch_chunks: int | None = None) -> None:
        """Seal the whole chunks of each range pulled from ``ranges`` from ``plaintext``
        into ``sealed`` (16400 bytes each), in one pipeline run. Either array may be
        pinned memory (aescl.pinned_empty)."""
        pipeline(self._device).run(self._pieces(input_array(plaintext), input_array(sealed),
                                                first, ranges, batch_chunks, opening=False))

    def open_ranges(self, sealed: np.ndarray, plaintext: np.ndarray, first: int,
                    ranges: Iterable[tuple[int, int]],
                    batch_chunks: int | None = None) -> None:
        """Open the whole sealed chunks of each range pulled from ``ranges`` into
        ``plaintext``. A failure raises AuthenticationError: the pieces before it have
        been written, and none of its plaintext, or of a piece after it, is left in
        ``plaintext`` (into pinned memory a piece's plaintext is copied out beside its
        tags, and zeroed where they did not match; elsewhere it is copied out once they
        matched)."""
        pipeline(self._device).run(self._pieces(input_array(sealed), input_array(plaintext),
                                                first, ranges, batch_chunks, opening=True))

    def seal_full(self, plaintext: np.ndarray, sealed: np.ndarray, first: int,
                  batch_chunks: int | None = None) -> None:
        """Seal all whole chunks of ``plaintext`` (message chunks ``first, ...``)."""
        count = plaintext.nbytes // CHUNK_SIZE
        self.seal_ranges(plaintext, sealed, first, iter([(0, count)]), batch_chunks)

    def open_full(self, sealed: np.ndarray, plaintext: np.ndarray, first: int,
                  batch_chunks: int | None = None) -> None:
        """Open all whole sealed chunks of ``sealed`` (message chunks ``first, ...``)."""
        count = sealed.nbytes // SEALED_CHUNK_SIZE
        self.open_ranges(sealed, plaintext, first, iter([(0, count)]), batch_chunks)

    def seal(self, plaintext: BytesLike, first: int, final: bool) -> np.ndarray:
        """Seal chunks ``first, first+1, ...``; with ``final`` the last one is the short
        final one. Without ``final`` the plaintext must be whole chunks."""
        source = input_array(plaintext)
        full, rest = plaintext_run(source.nbytes, final)
        check_chunk_range(first, full + int(final))
        out = np.empty(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0), np.uint8)
        if full:
            self.seal_full(source[: full * CHUNK_SIZE], out[: full * SEALED_CHUNK_SIZE], first)
        if final:
            pipeline(self._device).run([self._seal_piece(
                source[full * CHUNK_SIZE :], out[full * SEALED_CHUNK_SIZE :], first + full,
                True)])
        return out

    def open(self, ciphertext: BytesLike, first: int, final: bool) -> np.ndarray:
        """Authenticate and decrypt sealed chunks starting at chunk ``first``. Raises
        :class:`AuthenticationError` naming the first chunk that fails; then no
        plaintext of this run is returned."""
        source = input_array(ciphertext)
        full, rest = sealed_run(source.nbytes, first, final)
        out = np.empty(full * CHUNK_SIZE + (rest - TAG_SIZE if final else 0), np.uint8)
        try:
            if full:
                self.open_full(source[: full * SEALED_CHUNK_SIZE], out[: full * CHUNK_SIZE],
                               first)
            if final:
                pipeline(self._device).run([self._open_piece(
                    source[full * SEALED_CHUNK_SIZE :], out[full * CHUNK_SIZE :],
                    first + full, True)])
        except BaseException:
            out[:] = 0
            raise
        return out


def _checked(result: np.ndarray, text_bytes: int, room: int, first: int, count: int,
             final: bool) -> np.ndarray:
    """The plaintext of an opened piece (``result``: the plaintext in ``room`` bytes, then
    the computed and the received tags), after every tag in it matched; else raises."""
    _matched(result[room:], first, count, final)
    return result[:text_bytes]


def _matched(tags: np.ndarray, first: int, count: int, final: bool) -> None:
    """Raises unless every computed tag (the first ``count`` of ``tags``) equals its
    received one (the next ``count``).

    Every byte is compared, with no early exit: the differences of all the tags, eight
    bytes at a time, ORed into one word. This runs once a piece, on the thread that feeds
    the device. Compared a tag at a time (a numpy reduction along rows of 16 bytes), a 16
    MiB piece's 1,024 tags took 30-35 µs on an H200's host (3 µs now), and one GPU's
    opening ran 2.2-5.7 GB/s slower (docs/benchmarks). Only a failure looks for its chunk."""
    pairs = tags[: 2 * TAG_SIZE * count]
    words = pairs.view(np.uint64).reshape(2, -1)
    if not np.bitwise_or.reduce(words[0] ^ words[1]):
        return
    by_chunk = pairs.reshape(2, count, TAG_SIZE)
    index = int(np.argmin(np.all(by_chunk[0] == by_chunk[1], axis=1)))
    raise device_chunks.failed_chunk(first, index, final and index == count - 1)


class OpenclBlocks:
    """A block job (ECB or CTR) on one OpenCL device: the engine's block worker (in a
    caller's ``context``, for their arrays: arrays.py)."""

    def __init__(self, device: Device, transform: BlockTransform, context: Any = None) -> None:
        self._transform = transform
        key = transform.key
        filename, name, decrypt = transform.kernel
        self.launcher = KernelLauncher(
            device, filename, name,
            key_argument(key, transform.key_schedule, decrypt),
            keyschedule.rounds_for_key(key), transform.key_schedule, context,
        )

    def kernel_args(self, first_block: int) -> tuple[Any, ...]:
        """The kernel arguments after the block count: CTR's counter block and field mask."""
        if not self._transform.is_ctr:
            return ()
        block = self._transform.counter_at(first_block)
        field_mask = (1 << self._transform.counter_bits) - 1
        return tuple(
            np.uint64(v)
            for v in (block >> 64, block & (2**64 - 1), field_mask >> 64, field_mask & (2**64 - 1))
        )

    def run(self, source: np.ndarray, target: np.ndarray, ranges: Ranges,
            first_block: int = 0) -> None:
        source, target = input_array(source), input_array(target)
        self.launcher.run(source, target, ranges, lambda lo: self.kernel_args(first_block + lo))

    def keystream(self, index: int) -> bytes:
        block = np.zeros(BLOCK_SIZE, np.uint8)
        self.launcher.run(block, block, iter([(0, 1)]), lambda _: self.kernel_args(index))
        return block.tobytes()

    def device_launch(self, first_block: int = 0) -> DeviceLaunch:
        """The kernel from block ``first_block`` on, over buffers already on the device."""
        args = self.kernel_args(first_block)
        return lambda queue, source, target, blocks: self.launcher.enqueue(
            queue, source, target, blocks, args)
