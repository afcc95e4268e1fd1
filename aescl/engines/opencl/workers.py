"""The OpenCL engine's workers: a device's kernels over the ranges of a job.

Block jobs (ECB, CTR) go through :class:`KernelLauncher`, chunked-format jobs
through :class:`ChunkCipher`; both stream host data through the device's pinned,
overlapped pipeline (pipeline.py), one pipeline run for all the ranges an
engine pulls, so pieces keep overlapping from one range to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import Any

import numpy as np
import pyopencl as cl

from ... import keyschedule
from ..._arrays import BytesLike, default_slice_bytes, input_array
from ...chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    base_j0,
    check_base_nonce,
    check_chunk_range,
    check_key,
    chunk_j0s,
    plaintext_run,
    sealed_run,
)
from ...devices import Device, resolve
from ...errors import AuthenticationError
from ..interface import BLOCK_SIZE, BlockTransform, Ranges
from .gcm import GcmEngine
from .kernels import aes_options, carryless_ghash, kernel, key_argument
from .pipeline import (
    PIECE_BYTES,
    Launch,
    Piece,
    copy_parts,
    pipeline,
)
from .runtime import device_runtime
from .tuning import launch_config

# (queue, source buffer, target buffer, blocks) -> event: a mode's kernel over device-resident
# data, for measuring it (aescl.bench) without host transfers.
DeviceLaunch = Callable[[Any, Any, Any, int], Any]


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
        self._runtime = device_runtime(device, context)
        self._kernel = kernel(device, filename, options, kernel_name, context)
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
        step = (self.piece_bytes - self.piece_bytes % BLOCK_SIZE) // BLOCK_SIZE

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


class ChunkCipher:
    """Seals and opens runs of consecutive chunks under one (key, base nonce): raw mode.

    A run is some full chunks, optionally followed by the final short chunk;
    it goes to the device in one launch.
    """

    def __init__(self, key: bytes, base_nonce: bytes, device: Device | str | None = None,
                 batch_chunks: int | None = None) -> None:
        self._batch_chunks = batch_chunks
        check_key(key)
        check_base_nonce(base_nonce)
        self._device = resolve(device)
        self._engine = GcmEngine(bytes(key), self._device, "host")
        self._base_nonce = np.frombuffer(bytes(base_nonce), dtype=np.uint8)
        # J0 of chunk 0 as the AES core's four columns (cl/chunk_layout.cl).
        self._base_j0 = np.frombuffer(base_j0(bytes(base_nonce)),
                                      dtype="<u4").view(cl.cltypes.uint4)[0]

    def _j0s(self, first: int, count: int) -> np.ndarray:
        return chunk_j0s(self._base_nonce.tobytes(), first, count)

    @property
    def seals_in_one_pass(self) -> bool:
        """Whether full chunks are sealed in one pass from their slots into the sealed
        layout (cl/chunk_seal.cl), rather than in place in the slots (device_batch)."""
        return self._one_pass is not None

    def device_seal(self, slots: Any, sealed: Any, message_bytes: int) -> Any:
        """Enqueue the one-pass sealing of the full chunks of a message in one device
        buffer into another: the format's device work, for aescl.bench."""
        return self._enqueue_one_pass(device_runtime(self._device).queue, "chunks_seal", slots,
                                      sealed, 0, message_bytes // CHUNK_SIZE)

    def device_batch(self, buffer: Any, message_bytes: int) -> Any:
        """Chunks 0, 1, ... of a message already in a device buffer, as a GCM batch
        (``crypt()`` seals in place, ``hash()`` computes the tags): the format's device
        work without host transfers, for aescl.bench. The last chunk is the final one."""
        full, rest = divmod(message_bytes, CHUNK_SIZE)
        lengths = self._lengths(full, rest)
        return self._engine.resident_batch(buffer, CHUNK_SIZE, lengths, self._j0s(0, len(lengths)))

    @staticmethod
    def _lengths(full: int, final_bytes: int | None) -> np.ndarray:
        lengths = [CHUNK_SIZE] * full + ([] if final_bytes is None else [final_bytes])
        return np.array(lengths, dtype=np.uint64)

    # ---- runs of full chunks through the pipeline -------------------------------------

    @cached_property
    def _launch_config(self) -> Any:
        """The device's launch settings, looked up once rather than for every run."""
        return launch_config(self._device)

    @cached_property
    def _one_pass(self) -> dict[str, Any] | None:
        """The kernels that seal and open full chunks in one pass over memory
        (cl/chunk_seal.cl), by name, with their arguments after the data buffers; or
        None where the device lacks them. They serve CPU devices on AES-NI with
        carry-less GHASH, which the portable route's extra trips through memory
        slow down (docs/benchmarks). Elsewhere: chunk_layout.cl and the GCM batch."""
        config = self._launch_config
        if (self._device.type != "cpu" or not carryless_ghash(config)
                or (CHUNK_SIZE // BLOCK_SIZE) % config.blocks_per_item):
            return None
        options = self._engine.options
        try:
            found = {name: kernel(self._device, "chunk_seal.cl", options, name)
                     for name in ("chunks_seal", "chunks_open")}
        except cl.LogicError:  # the compiler did not grant the instructions: none built
            return None
        tables = self._engine.h_tables(config.blocks_per_item)
        device_runtime(self._device).queue.finish()  # built before another queue reads them
        return {"kernels": found, "args": (tables, self._engine.key)}

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

    def _enqueue_layout(self, queue: Any, name: str, args: tuple[Any, ...], count: int) -> Any:
        layout = kernel(self._device, "chunk_layout.cl", "", name)
        config = self._launch_config
        group = config.work_group_size
        groups = min(config.max_work_groups, -(-count * (SEALED_CHUNK_SIZE // 16) // group))
        layout.set_args(*args, np.uint32(count))
        return cl.enqueue_nd_range_kernel(queue, layout, (groups * group,), (group,))

    def _full_chunks_batch(self, queue: Any, buffer: Any, first: int, count: int,
                           scratch: dict[str, Any]) -> Any:
        """A GCM batch over ``count`` full chunks from chunk ``first`` in ``buffer`` (slot
        layout), its J0s and lengths made on the device (chunks_counters)."""
        counters = self._engine.scratch_buffer(scratch, "j0s", 16 * count)
        lengths = self._engine.scratch_buffer(scratch, "lengths", 8 * count)
        make = kernel(self._device, "chunk_layout.cl", "", "chunks_counters")
        make.set_args(self._base_j0, np.uint64(first), np.uint32(count),
                      np.uint64(CHUNK_SIZE), counters, lengths)
        group = self._launch_config.work_group_size
        cl.enqueue_nd_range_kernel(queue, make, (-(-count // group) * group,), (group,))
        return self._engine.full_slots_batch(buffer, CHUNK_SIZE, count, counters, lengths,
                                             scratch)

    def _seal_launch(self, first: int, count: int) -> Launch:
        """Device work of sealing full chunks: plaintext slots in, sealed layout out."""
        if self._one_pass:
            return lambda queue, slots, sealed, _: self._enqueue_one_pass(
                queue, "chunks_seal", slots, sealed, first, count)

        def launch(queue: Any, slots: Any, sealed: Any, scratch: dict[str, Any]) -> Any:
            batch = self._full_chunks_batch(queue, slots, first, count, scratch)
            batch.seal()
            return self._enqueue_layout(queue, "chunks_pack",
                                        (slots, batch.tags_buffer, sealed), count)
        return launch

    def _open_launch(self, first: int, count: int) -> Launch:
        """Device work of opening full chunks: sealed layout in; out, the plaintext slots,
        then the computed tags, then the received tags (see :meth:`_checked`)."""
        if self._one_pass:
            return lambda queue, sealed, out, _: self._enqueue_one_pass(
                queue, "chunks_open", sealed, out, first, count)

        def launch(queue: Any, sealed: Any, out: Any, scratch: dict[str, Any]) -> Any:
            text_blocks = count * (CHUNK_SIZE // 16)
            self._enqueue_layout(queue, "chunks_unpack",
                                 (sealed, out, np.uint32(text_blocks + count)), count)
            batch = self._full_chunks_batch(queue, out, first, count, scratch)
            batch.open()  # (hashed before it is decrypted in place)
            return cl.enqueue_copy(queue, out, batch.tags_buffer, byte_count=TAG_SIZE * count,
                                   dst_offset=16 * text_blocks)
        return launch

    @staticmethod
    def _checked(result: np.ndarray, first: int, count: int) -> np.ndarray:
        """The plaintext of an opened run, after every tag in it matched; else raises."""
        text = count * CHUNK_SIZE
        tags = result[text:].reshape(2, count, TAG_SIZE)
        matches = np.all(tags[0] == tags[1], axis=1)  # every byte compared, no early exit
        if not matches.all():
            index = first + int(np.argmin(matches))
            raise AuthenticationError(
                f"chunk {index} failed authentication: the data was modified", chunk=index)
        return result[:text]

    def _runs(self, first: int, ranges: Iterable[tuple[int, int]], batch_chunks: int | None,
              opening: bool) -> Iterator[tuple[int, int, Piece]]:
        """Runs of at most ``batch_chunks`` full chunks of each chunk range pulled from
        ``ranges`` (relative to the arrays, whose chunk 0 is message chunk ``first``), as
        (chunks before the run, chunks in it, a pipeline piece with its launch and
        sizes); the caller attaches the piece's input and output. An opening piece's
        output is the plaintext, then the computed and the received tags."""
        # A batch is one allocation each way on the device: never more than it can hold.
        batch_chunks = max(1, min(batch_chunks or self._batch_chunks,
                                  default_slice_bytes(self._device) // SEALED_CHUNK_SIZE))
        for lo, hi in ranges:
            check_chunk_range(first + lo, hi - lo)
            for start in range(lo, hi, batch_chunks):
                chunks = min(batch_chunks, hi - start)
                if opening:
                    piece = Piece(chunks * SEALED_CHUNK_SIZE,
                                  chunks * (CHUNK_SIZE + 2 * TAG_SIZE),
                                  self._open_launch(first + start, chunks))
                else:
                    piece = Piece(chunks * CHUNK_SIZE, chunks * SEALED_CHUNK_SIZE,
                                  self._seal_launch(first + start, chunks))
                yield start, chunks, piece

    def seal_ranges(self, plaintext: np.ndarray, sealed: np.ndarray, first: int,
                    ranges: Iterable[tuple[int, int]],
                    batch_chunks: int | None = None) -> None:
        """Seal the whole chunks of each range pulled from ``ranges`` from ``plaintext``
        into ``sealed`` (16400 bytes each), in one pipeline run. Either array may be
        pinned memory (aescl.pinned_empty)."""
        plaintext, sealed = input_array(plaintext), input_array(sealed)

        def piece(done: int, chunks: int, piece: Piece) -> Piece:
            return Piece.through(
                self._device, plaintext[done * CHUNK_SIZE :][: chunks * CHUNK_SIZE],
                sealed[done * SEALED_CHUNK_SIZE :][: chunks * SEALED_CHUNK_SIZE], piece.launch,
                # The portable route encrypts the chunks in place in their slots.
                writes_input=not self._one_pass)

        pipeline(self._device).run(
            piece(*run) for run in self._runs(first, ranges, batch_chunks, opening=False))

    def open_ranges(self, sealed: np.ndarray, plaintext: np.ndarray, first: int,
                    ranges: Iterable[tuple[int, int]],
                    batch_chunks: int | None = None) -> None:
        """Open the whole sealed chunks of each range pulled from ``ranges`` into
        ``plaintext``. Each run's plaintext is copied out only after all of its tags
        matched; a failure raises AuthenticationError, and the runs before it have
        been written."""
        sealed, plaintext = input_array(sealed), input_array(plaintext)

        def piece(done: int, chunks: int, piece: Piece) -> Piece:
            target = plaintext[done * CHUNK_SIZE :][: chunks * CHUNK_SIZE]
            piece.read_from(
                self._device, sealed[done * SEALED_CHUNK_SIZE :][: chunks * SEALED_CHUNK_SIZE])
            piece.store = lambda result: copy_parts(
                target, self._checked(result, first + done, chunks))
            return piece

        pipeline(self._device).run(
            piece(*run) for run in self._runs(first, ranges, batch_chunks, opening=True))

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
        """Seal chunks ``first, first+1, ...``; with ``final`` the last one is the short final one.

        Without ``final`` the plaintext must be whole chunks. Returns the sealed
        chunks as a uint8 array, which every writer and ``bytes.join`` accept:
        converting to ``bytes`` here would cost a copy as slow as the device work.
        """
        source = input_array(plaintext)
        full, rest = plaintext_run(source.nbytes, final)
        count = full + int(final)
        if not count:
            return np.empty(0, np.uint8)
        slots = np.zeros((count, CHUNK_SIZE), dtype=np.uint8)
        slots.reshape(-1)[: source.nbytes] = source
        lengths = self._lengths(full, rest if final else None)
        tags = self._engine.seal_messages(slots, lengths, self._j0s(first, count))
        out = np.empty(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0), np.uint8)
        rows = out[: full * SEALED_CHUNK_SIZE].reshape(full, SEALED_CHUNK_SIZE)
        rows[:, :CHUNK_SIZE] = slots[:full]
        rows[:, CHUNK_SIZE:] = tags[:full]
        if final:
            out[full * SEALED_CHUNK_SIZE :][:rest] = slots[full, :rest]
            out[-TAG_SIZE:] = tags[full]
        return out

    def open(self, ciphertext: BytesLike, first: int, final: bool) -> np.ndarray:
        """Authenticate and decrypt sealed chunks starting at chunk ``first``.

        Returns the plaintext as a uint8 array (see :meth:`seal`). Raises
        :class:`AuthenticationError` naming the first chunk that fails; then no
        plaintext of this run is returned.
        """
        source = input_array(ciphertext)
        full, rest = sealed_run(source.nbytes, first, final)
        count = full + int(final)
        if not count:
            return np.empty(0, np.uint8)
        text_bytes = rest - TAG_SIZE if final else 0
        slots = np.zeros((count, CHUNK_SIZE), dtype=np.uint8)
        tags = np.empty((count, TAG_SIZE), dtype=np.uint8)
        rows = source[: full * SEALED_CHUNK_SIZE].reshape(full, SEALED_CHUNK_SIZE)
        slots[:full] = rows[:, :CHUNK_SIZE]
        tags[:full] = rows[:, CHUNK_SIZE:]
        if final:
            tail = source[full * SEALED_CHUNK_SIZE :]
            slots[full, :text_bytes] = tail[:text_bytes]
            tags[full] = tail[text_bytes:]
        lengths = self._lengths(full, text_bytes if final else None)
        failed = self._engine.open_messages(slots, lengths, self._j0s(first, count), tags)
        if failed is not None:
            index = first + failed
            # A cut inside the last chunk looks exactly like a modified final chunk.
            cause = "truncated or modified" if final and failed == count - 1 else "modified"
            raise AuthenticationError(
                f"chunk {index} failed authentication: the data was {cause}", chunk=index
            )
        return slots.reshape(-1)[: full * CHUNK_SIZE + text_bytes]


class OpenclBlocks:
    """A block job (ECB or CTR) on one OpenCL device: the engine's block worker (in a
    caller's ``context``, for their arrays: arrays.py)."""

    def __init__(self, device: Device, transform: BlockTransform, context: Any = None) -> None:
        self._transform = transform
        key = transform.key
        if transform.is_ctr:
            filename, name, decrypt = "aes_ctr.cl", "aes_ctr_xor", False
        else:
            filename, decrypt = "aes_ecb.cl", transform.decrypt
            name = "aes_ecb_decrypt" if decrypt else "aes_ecb_encrypt"
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
