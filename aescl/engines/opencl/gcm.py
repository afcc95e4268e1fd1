"""AES-GCM on an OpenCL device: a batch engine, and the pycryptodome-style cipher object.

:class:`GcmEngine` runs both halves of GCM for one key on one device (the CTR
keystream with inc32, and GHASH over the ciphertext; ``cl/aes_gcm.cl``). It
serves two callers:

* :class:`GcmCipher` (``aescl.new(key, MODE_GCM, ...)``): one message, fed in
  calls of any size. Whole blocks go through the device; the host keeps the
  running GHASH value, folds in each launch's partial sums, and handles the
  bytes of a block split across calls, the AAD padding and the length block.
* :mod:`aescl.chunked`: many messages (chunks) per launch with empty AAD, tags
  computed on the device (:meth:`GcmEngine.seal_messages` / ``open_messages``).

Nonces: any non-empty length. 96 bits is the fast path (J0 = nonce || 1); any
other length derives J0 with GHASH on the host, as SP 800-38D prescribes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyopencl as cl

from ... import ghash, keyschedule
from ..._arrays import BytesLike, default_slice_bytes, finish, input_array, output_array
from ...devices import Device
from ..device_chunks import fused_gcm
from ..interface import MODE_GCM, gcm_nonce
from .kernels import (
    aes_options,
    carryless_ghash,
    kernel,
    key_argument,
)
from .runtime import device_runtime, one_job_per_device
from .tuning import launch_config

BLOCK_SIZE = 16
_SEGMENT_STEPS = 64  # Horner steps per work-item when one long message is split for GHASH
_MAX_LAUNCH_BLOCKS = 2**32 - 2**20  # kernels index blocks with 32-bit integers
_MAX_GHASH_ITEMS = 256  # GCM_MAX_GHASH_ITEMS in cl/aes_gcm.cl
_MAX_CRYPT_HASH_GROUP = 256  # GCM_CRYPT_HASH_MAX_GROUP's default in cl/aes_gcm.cl
# Work-items per message in gcm_crypt_hash: few, each with many Horner steps, so that
# the pairing's barriers are rare (engines/cuda/workers.py, _CRYPT_HASH_ITEMS).
_CRYPT_HASH_ITEMS = 8


_CARRYLESS_RUN = 8  # GCM_CARRYLESS_RUN in aes_gcm.cl
# Position tables (cl/ghash.cl) of B^1, B^2, B^4 .. B^256: GHASH_POSITION_POWERS tables of
# GHASH_POSITION_ENTRIES 16-byte entries in cl/aes_gcm.cl.
_POSITION_TABLES_BYTES = 9 * 512 * 16
_POSITION_ITEMS = 9 * 16  # GHASH_POSITION_ITEMS: a work-item per table and nibble
_LOW_64 = 2**64 - 1
_TABLES_KEPT = 8  # bases whose GHASH tables a runtime keeps: H and H^segment of 4 keys


def _floor_power_of_two(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _ceil_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class _Launches:
    """The kernels of one build of aes_gcm.cl in one context, and their work-group
    shapes: the same for every key, so made once (:func:`_build_launches`). A chunked
    call makes an engine for its new key, and making these there cost 0.14 ms of host
    time a call on the H100 host, all of it before the call's first launch."""

    ctr: Any
    ghash: Any
    tags: Any
    power_tables: Any
    position_tables: Any
    crypt_hash: Any  # CTR, GHASH and the tags in one launch; None in the carry-less build
    sums_as_blocks: Any
    carryless: bool
    work_group_size: int
    tags_group_size: int
    ghash_items: int
    crypt_hash_items: int
    crypt_hash_group: int
    tables_group: int  # the GHASH tables' work-groups: a few (cores or SMs) for a few items


# By (runtime, options, config): the runtime itself, not its id, so that a runtime made
# anew for a device (tests drop them) never meets kernels of the one it replaced.
_launches: dict[tuple[Any, str, Any], _Launches] = {}


def _build_launches(device: Device, options: str, context: Any, config: Any) -> _Launches:
    rt = device_runtime(device, context)
    key = (rt, options, config)
    found = _launches.get(key)
    if found is not None:
        return found

    def made(name: str) -> Any:
        return kernel(device, "aes_gcm.cl", options, name, context)

    def limit(built: Any) -> int:
        return built.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                         device.cl_device)

    ctr, ghash_kernel, tags = made("gcm_ctr_xor"), made("gcm_ghash"), made("gcm_tags")
    carryless = carryless_ghash(config)
    # CTR, GHASH and the tags in one launch (the chunked format's batches), where GHASH is
    # by tables: the carry-less build has no such kernel.
    crypt_hash = None if carryless else made("gcm_crypt_hash")
    items = group = 1
    if crypt_hash is not None:  # whole messages of _CRYPT_HASH_ITEMS work-items
        most = min(config.work_group_size, limit(crypt_hash), _MAX_CRYPT_HASH_GROUP)
        items = min(_CRYPT_HASH_ITEMS, _floor_power_of_two(most))
        group = most // items * items
    power_tables, position_tables = made("ghash_power_tables"), made("ghash_position_tables")
    found = _Launches(
        ctr=ctr, ghash=ghash_kernel, tags=tags, power_tables=power_tables,
        position_tables=position_tables, crypt_hash=crypt_hash,
        sums_as_blocks=made("ghash_sums_as_blocks"), carryless=carryless,
        work_group_size=max(1, min(config.work_group_size, limit(ctr))),
        tags_group_size=max(1, min(config.work_group_size, limit(tags))),
        ghash_items=_floor_power_of_two(min(config.work_group_size, limit(ghash_kernel),
                                            _MAX_GHASH_ITEMS)),
        crypt_hash_items=items, crypt_hash_group=group,
        tables_group=min(16, limit(power_tables), limit(position_tables)))
    with rt.lock:
        return _launches.setdefault(key, found)


@dataclass(frozen=True)
class _Shape:
    """What an engine is for any key of one size on one device, in one context, with one
    launch config: made once (:func:`_shape`), as a chunked call makes an engine for
    each message's new key before its first launch."""

    options: str
    runtime: Any
    launches: _Launches
    slice_bytes: int


_shapes: dict[tuple[Any, int, str, Any], _Shape] = {}  # by (runtime, rounds, schedule, config)


def _shape(device: Device, context: Any, rounds: int, key_schedule: str, config: Any) -> _Shape:
    rt = device_runtime(device, context)  # (asked each time: see _launches)
    key = (rt, rounds, key_schedule, config)
    found = _shapes.get(key)
    if found is None:
        options = aes_options(rounds, key_schedule, config)
        found = _shapes.setdefault(key, _Shape(
            options, rt, _build_launches(device, options, context, config),
            min(default_slice_bytes(device), _MAX_LAUNCH_BLOCKS * BLOCK_SIZE)))
    return found


class GcmEngine:
    """GCM's device half for one key: keystream, GHASH partial sums and batch tags."""

    def __init__(self, key: bytes, device: Device, key_schedule: str,
                 context: Any = None, h: int | None = None) -> None:
        rounds = keyschedule.rounds_for_key(key)
        config = launch_config(device)
        shape = _shape(device, context, rounds, key_schedule, config)
        self.options = shape.options
        self.runtime = shape.runtime  # (in a caller's context: arrays.py)
        build = shape.launches
        self._tables_group = build.tables_group
        self._ctr, self._ghash, self._tags = build.ctr, build.ghash, build.tags
        self._power_tables, self._position_tables = build.power_tables, build.position_tables
        self._crypt_hash, self._sums_as_blocks = build.crypt_hash, build.sums_as_blocks
        self._carryless = build.carryless
        self._work_group_size, self._tags_group_size = build.work_group_size, build.tags_group_size
        self._ghash_items, self._max_work_groups = build.ghash_items, config.max_work_groups
        self._crypt_hash_items = build.crypt_hash_items
        self._crypt_hash_group = build.crypt_hash_group
        self.key = key_argument(key, key_schedule, decrypt=False)
        self.slice_bytes = shape.slice_bytes
        # H on the device unless the caller made it (ghash.hash_subkey): a call that must
        # not wait for the work queued before it does.
        self.h = h if h is not None else \
            ghash.block_to_int(self.keystream([bytes(BLOCK_SIZE)], first_step=0)[0])
        self.launch = config

    @cached_property
    def multipliers(self) -> ghash.PowerMultipliers:
        """Products by powers of H on the host, for the callers that fold GHASH sums
        there (the chunked format's tags are made on the device: made when first
        used, they cost its calls nothing before their first launch)."""
        return ghash.PowerMultipliers(self.h)

    def times_power(self, value: int, exponent: int) -> int:
        return self.multipliers.times_power(value, exponent)

    def _constant(self, array: np.ndarray) -> Any:
        return cl.Buffer(
            self.runtime.context,
            cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
            hostbuf=np.ascontiguousarray(array),
        )

    def h_tables(self, count: int) -> Any:
        """The device buffer of nibble tables for H^1..H^count (grown on demand), built
        on the device: on the host the powers and tables cost milliseconds per key."""
        return self._power_tables_of(self.h, count)

    def _kept_tables(self, base: int) -> dict[str, Any]:
        """The tables of ``base`` kept in the runtime for every engine there, the device's
        lock held: MODE_GCM on arrays makes an engine a message, and tables made a
        message cost their launches. Kept for _TABLES_KEPT bases, in GPU memory until
        evicted or the process ends (docs/gpu-arrays.md). Their buffers are the
        runtime's scratch, and an evicted base's go back to it rather than being freed
        (the chunked format's every call has a new key, so evicts one): a free waits, in
        NVIDIA's OpenCL, for all the work on the device. The queue is in order, so
        whoever takes them next writes after the work that reads them."""
        kept = self.runtime.ghash_tables
        tables = kept.pop(base, None)
        kept[base] = tables = {} if tables is None else tables  # (the most recent last)
        while len(kept) > _TABLES_KEPT:
            evicted = kept.pop(next(iter(kept)))
            self.runtime.give_back_scratch(
                [buffer for buffer in (evicted.get("nibbles", (None, 0))[0],
                                       evicted.get("positions")) if buffer is not None])
        return tables

    @one_job_per_device
    def _power_tables_of(self, base: int, count: int) -> Any:
        """The nibble tables of base^1..base^count in a device buffer (grown on demand)."""
        kept = self._kept_tables(base)
        tables, built = kept.get("nibbles", (None, 0))
        if count > built:
            if tables is not None:  # (grown: the smaller one back to the scratch)
                self.runtime.give_back_scratch([tables])
            tables = self.runtime.take_scratch(count * 16 * BLOCK_SIZE)
            self._power_tables.set_args(np.uint64(base >> 64), np.uint64(base % 2**64),
                                        np.uint32(count), tables)
            group = self._tables_group
            cl.enqueue_nd_range_kernel(self.runtime.queue, self._power_tables,
                                       (-(-count // group) * group,), (group,))
            kept["nibbles"] = (tables, count)
        return tables

    @one_job_per_device
    def _positions_of(self, base: int) -> Any:
        """The position tables (cl/ghash.cl) of base^1, base^2 .. base^256 in a device
        buffer, built on the device in one launch."""
        kept = self._kept_tables(base)
        if "positions" not in kept:
            positions = self.runtime.take_scratch(_POSITION_TABLES_BYTES)
            self._position_tables.set_args(base >> 64, base & _LOW_64, positions)
            group = self._tables_group
            cl.enqueue_nd_range_kernel(self.runtime.queue, self._position_tables,
                                       (-(-_POSITION_ITEMS // group) * group,), (group,))
            kept["positions"] = positions
        return kept["positions"]

    # ---- launches over a device buffer ------------------------------------------

    def _enqueue_ctr(
        self, buffer: Any, blocks: int, message_blocks: int, first_step: int,
        j0s: Any, message_bytes: Any, target: Any = None,
        strides: tuple[int, int] | None = None,
    ) -> Any:
        """CTR over the messages in ``buffer``, in place, or into ``target``; ``strides``:
        the blocks from one message to the next in each (both ``message_blocks``
        unless given)."""
        groups = min(self._max_work_groups, -(-blocks // self._work_group_size))
        source_stride, target_stride = strides or (message_blocks, message_blocks)
        self._ctr.set_args(
            buffer, buffer if target is None else target, np.uint32(blocks),
            np.uint32(message_blocks), np.uint32(source_stride), np.uint32(target_stride),
            np.uint32(first_step % 2**32), j0s, message_bytes, self.key,
        )
        return cl.enqueue_nd_range_kernel(
            self.runtime.queue, self._ctr,
            (groups * self._work_group_size,), (self._work_group_size,),
        )

    def _enqueue_ghash(
        self, buffer: Any, blocks: int, message_blocks: int, message_count: int, partials: Any,
        base: int | None = None, stride: int | None = None,
    ) -> Any:
        """GHASH partial sums of messages in slots, by powers of H (or of ``base``);
        ``stride``: blocks from one message to the next (``message_blocks`` unless given)."""
        items = min(self._ghash_items, _ceil_power_of_two(min(message_blocks, blocks)))
        groups = min(self._max_work_groups, message_count)
        base = self.h if base is None else base
        # The carry-less GHASH (CPUs) reads H^1..H^8 whatever the group size, and no
        # position tables.
        tables = self._power_tables_of(base, max(items, _CARRYLESS_RUN))
        self._ghash.set_args(
            buffer, np.uint32(blocks), np.uint32(message_blocks),
            np.uint32(stride or message_blocks), np.uint32(message_count), tables,
            tables if self._carryless else self._positions_of(base), partials,
        )
        return cl.enqueue_nd_range_kernel(
            self.runtime.queue, self._ghash, (groups * items,), (items,)
        )

    @property
    def fused(self) -> bool:
        """Whether :meth:`enqueue_crypt_hash` is there."""
        return self._crypt_hash is not None

    def enqueue_crypt_hash(
        self, source: Any, target: Any, blocks: int, message_blocks: int, count: int,
        strides: tuple[int, int], j0s: Any, message_bytes: Any, tags: Any, tag_stride: int,
        sealing: bool, firsts: tuple[int, int, int] = (0, 0, 0),
        chunk_run: tuple[bytes, int, int] | None = None,
        check: tuple[Any, int, int, Any, int] | None = None,
    ) -> Any:
        """CTR, GHASH and the tags of ``count`` messages of up to ``message_blocks`` blocks
        (``blocks`` in all) in one launch (aes_gcm.cl's gcm_crypt_hash), each from its first
        block's counter on (J0 + 1): message m from block ``m * strides[0]`` of
        ``source`` to block ``m * strides[1]`` of ``target``, its tag to block
        ``m * tag_stride`` of ``tags`` (None: not written), each counted from block
        ``firsts`` (source, target, tags) of its buffer; GHASH over the output when
        ``sealing``, else over the input.

        J0s and lengths are read from ``j0s`` and ``message_bytes``, or, where those are
        None, made by the kernel for the chunked format's chunks ``chunk_run`` (base J0,
        first chunk, bytes of the last message). ``check`` (received tags, their first
        block and stride, the verdict word's buffer, the index of message 0 in it): each
        tag compared with the received one, the verdict lowered to the first mismatch."""
        group, items = self._crypt_hash_group, self._crypt_hash_items
        groups = min(self._max_work_groups, -(-count // (group // items)))
        first_j0, first_chunk, last_bytes = chunk_run or (bytes(BLOCK_SIZE), 0, 0)
        received, received_first, received_stride, verdict, verdict_first = \
            check or (None, 0, 0, None, 0)
        # (plain ints and J0's bytes: the kernel's by-value types are set (kernels.kernel),
        # and a numpy scalar apiece cost more than the packing)
        self._crypt_hash.set_args(
            source, target, blocks, message_blocks, strides[0], strides[1], firsts[0],
            firsts[1], count, items, int(sealing), j0s, message_bytes,
            first_j0, first_chunk, last_bytes,
            self._positions_of(self.h), tags, firsts[2], tag_stride, received, received_first,
            received_stride, verdict, verdict_first, self.key,
        )
        return cl.enqueue_nd_range_kernel(self.runtime.queue, self._crypt_hash,
                                          (groups * group,), (group,))

    def _scratch(self, nbytes: int) -> Any:
        return cl.Buffer(self.runtime.context, cl.mem_flags.READ_WRITE, max(16, nbytes))

    @one_job_per_device
    def keystream(self, j0s: list[bytes], first_step: int) -> list[bytes]:
        """E(inc32^first_step(J0)) for each J0: H (J0 = 0, step 0), tag masks, partial blocks."""
        blocks = np.zeros((len(j0s), BLOCK_SIZE), dtype=np.uint8)
        buffer = self._scratch(blocks.nbytes)
        queue = self.runtime.queue
        cl.enqueue_copy(queue, buffer, blocks, is_blocking=False)
        counters = self._constant(np.frombuffer(b"".join(j0s), dtype=np.uint8))
        lengths = self._constant(np.full(len(j0s), BLOCK_SIZE, dtype=np.uint64))
        self._enqueue_ctr(buffer, len(j0s), 1, first_step, counters, lengths)
        cl.enqueue_copy(queue, blocks, buffer, is_blocking=True)
        return [row.tobytes() for row in blocks]

    # ---- one message, any length: the streaming cipher's path --------------------

    def _fold(self, partials: np.ndarray, segment_blocks: int, total_blocks: int) -> int:
        """GHASH partial sums of consecutive segments -> the partial sum of their concatenation."""
        return ghash.fold_partials([(hi << 64) | lo for hi, lo in partials.tolist()],
                                   segment_blocks, total_blocks, self.times_power)

    @one_job_per_device
    def stream(
        self, source: np.ndarray, target: np.ndarray | None, j0: bytes, first_block: int,
        decrypt: bool, crypt: bool = True, hash_text: bool = True,
    ) -> int:
        """CTR over whole blocks of one message and/or GHASH of its ciphertext.

        Block i of ``source`` is block ``first_block + i`` of the message.
        ``crypt`` writes the CTR output into ``target``; ``hash_text`` returns
        the GHASH partial sum of the ciphertext blocks (input when decrypting,
        output when encrypting), 0 if not asked for.
        """
        queue = self.runtime.queue
        counters = self._constant(np.frombuffer(j0, dtype=np.uint8))
        step = self.slice_bytes
        buffer = self._scratch(min(step, source.nbytes))
        total = 0
        for start in range(0, source.nbytes, step):
            chunk = source[start : start + step]
            blocks = chunk.nbytes // BLOCK_SIZE
            cl.enqueue_copy(queue, buffer, chunk, is_blocking=False)
            if crypt and not decrypt:
                self._ctr_pass(buffer, blocks, counters, first_block + start // BLOCK_SIZE)
            if hash_text:
                partials, segment = self._enqueue_partials(buffer, blocks)
            if crypt and decrypt:
                self._ctr_pass(buffer, blocks, counters, first_block + start // BLOCK_SIZE)
            if crypt:
                assert target is not None
                cl.enqueue_copy(queue, target[start : start + step], buffer, is_blocking=False)
            queue.finish()
            if hash_text:
                total = self.times_power(total, blocks) ^ self._fold(partials, segment, blocks)
        return total

    def _enqueue_partials(self, buffer: Any, blocks: int) -> tuple[np.ndarray, int]:
        """Enqueue GHASH over the first ``blocks`` blocks of a device buffer in segments,
        and the copy of the segments' partial sums into the host array it returns with
        the segment length (in blocks); :meth:`_fold` adds them once the queue is done."""
        segment = self._ghash_items * _SEGMENT_STEPS
        count = -(-blocks // segment)
        partials = np.empty((count, 2), dtype=np.uint64)
        partials_buffer = self._scratch(partials.nbytes)
        self._enqueue_ghash(buffer, blocks, segment, count, partials_buffer)
        cl.enqueue_copy(self.runtime.queue, partials, partials_buffer, is_blocking=False)
        return partials, segment

    @one_job_per_device
    def partial_sum(self, buffer: Any, blocks: int) -> int:
        """The GHASH partial sum of the first ``blocks`` blocks of a device buffer (data
        already on the device: GCM on a caller's arrays). The segments' partial sums
        are folded on the device too (ghash.fold_on_device says how): folding thousands
        of them on the host took longer than the GHASH itself."""
        segment = self._ghash_items * _SEGMENT_STEPS
        count = -(-blocks // segment)
        partials = self._scratch(16 * count)
        self._enqueue_ghash(buffer, blocks, segment, count, partials)
        queue = self.runtime.queue
        last = np.zeros(2, np.uint64)
        if count == 1:
            cl.enqueue_copy(queue, last, partials, is_blocking=True)
            return (int(last[0]) << 64) | int(last[1])
        folded = self._scratch(16)
        self._sums_as_blocks.set_args(partials, np.uint32(count))
        cl.enqueue_nd_range_kernel(queue, self._sums_as_blocks, (256,), None)
        self._enqueue_ghash(partials, count - 1, count - 1, 1, folded,
                            base=self.multipliers.power(segment))
        outer = np.zeros(2, np.uint64)
        cl.enqueue_copy(queue, outer, folded, is_blocking=False)
        block = np.zeros(16, np.uint8)  # the last sum, now a block in memory order
        cl.enqueue_copy(queue, block, partials, src_offset=16 * (count - 1), is_blocking=True)
        return ghash.fold_on_device((int(outer[0]) << 64) | int(outer[1]),
                                    ghash.block_to_int(block.tobytes()), segment,
                                    blocks - segment * (count - 1), self.multipliers)

    def _ctr_pass(self, buffer: Any, blocks: int, counters: Any, first_block: int) -> None:
        lengths = self._constant(np.array([blocks * BLOCK_SIZE], dtype=np.uint64))
        self._enqueue_ctr(buffer, blocks, blocks, 1 + first_block, counters, lengths)

    # ---- many messages with empty AAD: the chunked format's path ------------------

    def _batch_arrays(self, j0s: np.ndarray, message_bytes: np.ndarray) -> tuple[Any, Any]:
        return self._constant(j0s), self._constant(message_bytes.astype(np.uint64))

    def _enqueue_tags(
        self, partials: Any, count: int, j0s: Any, lengths: Any, tags: Any, tag_stride: int = 1
    ) -> Any:
        """The tags of messages from their partial sums, tag m at block
        ``m * tag_stride`` of ``tags``."""
        groups = min(self._max_work_groups, -(-count // self._tags_group_size))
        self._tags.set_args(
            partials, np.uint32(count), j0s, lengths, self.h_tables(1), tags,
            np.uint32(tag_stride), self.key,
        )
        return cl.enqueue_nd_range_kernel(
            self.runtime.queue, self._tags,
            (groups * self._tags_group_size,), (self._tags_group_size,),
        )

    def resident_batch(
        self, buffer: Any, slot_bytes: int, message_bytes: np.ndarray, j0s: np.ndarray
    ) -> _Batch:
        """A batch over messages already in a device buffer, one per ``slot_bytes`` slot.

        For work that stays on the device, and for measuring it (aescl.bench).
        """
        message_blocks = slot_bytes // BLOCK_SIZE
        counters, lengths = self._batch_arrays(j0s, message_bytes)
        return _Batch(self, len(message_bytes), message_blocks,
                      _batch_blocks(slot_bytes, message_bytes), counters, lengths, buffer)

    def full_slots_batch(
        self, buffer: Any, slot_bytes: int, count: int, counters: Any, lengths: Any,
        scratch: dict[str, Any],
    ) -> _Batch:
        """A batch of ``count`` messages that each fill their slot, whose J0s and
        lengths are already in device buffers (the chunked format makes them there).

        ``scratch`` is a pipeline slot's (pipeline.py): the batch's GHASH sums
        and tags live there and are reused by the slot's next batch, because
        creating and releasing buffers for every batch makes the driver
        synchronise the device, which stalls the overlapped transfers.
        """
        message_blocks = slot_bytes // BLOCK_SIZE
        return _Batch(self, count, message_blocks, count * message_blocks, counters, lengths,
                      buffer, tags_buffer=self.scratch_buffer(scratch, "tags", 16 * count),
                      partials=self.scratch_buffer(scratch, "partials", 16 * count))

    def scratch_buffer(self, scratch: dict[str, Any], name: str, nbytes: int) -> Any:
        """A device buffer of at least ``nbytes`` kept in ``scratch`` under ``name``."""
        buffer = scratch.get(name)
        if buffer is None or buffer.size < nbytes:
            buffer = scratch[name] = self._scratch(nbytes)
        return buffer

    def _upload_batch(
        self, slots: np.ndarray, message_bytes: np.ndarray, j0s: np.ndarray
    ) -> _Batch:
        blocks = _batch_blocks(slots.shape[1], message_bytes)
        batch = self.resident_batch(self._scratch(max(1, blocks) * BLOCK_SIZE), slots.shape[1],
                                    message_bytes, j0s)
        batch.flat = slots.reshape(-1)[: blocks * BLOCK_SIZE]
        if blocks:
            cl.enqueue_copy(self.runtime.queue, batch.buffer, batch.flat, is_blocking=False)
        return batch

    @one_job_per_device
    def seal_messages(
        self, slots: np.ndarray, message_bytes: np.ndarray, j0s: np.ndarray
    ) -> np.ndarray:
        """Encrypt messages in place and return their 16-byte tags, shape (count, 16).

        ``slots`` is (count, slot_bytes) uint8, each message starting a row and
        zero-padded to it; ``j0s`` is (count, 16); AAD is empty.
        """
        batch = self._upload_batch(slots, message_bytes, j0s)
        batch.crypt()
        tags = batch.tags()
        batch.download()
        return tags

    @one_job_per_device
    def open_messages(
        self, slots: np.ndarray, message_bytes: np.ndarray, j0s: np.ndarray,
        tags: np.ndarray,
    ) -> int | None:
        """Authenticate every message, then decrypt them all in place.

        Returns None on success, or the index of the first message whose tag
        does not match, in which case ``slots`` is left as it was: no plaintext
        of the batch is released.
        """
        batch = self._upload_batch(slots, message_bytes, j0s)
        # Every byte is compared before looking at the result (no early exit).
        matches = np.all(batch.tags() == tags, axis=1)
        if not matches.all():
            return int(np.argmin(matches))
        batch.crypt()
        batch.download()
        return None


def _batch_blocks(slot_bytes: int, message_bytes: np.ndarray) -> int:
    """Blocks from the first slot to the end of the last message (which may be short)."""
    return (len(message_bytes) - 1) * (slot_bytes // BLOCK_SIZE) + -(
        -int(message_bytes[-1]) // BLOCK_SIZE
    )


@dataclass
class _Batch:
    """One batch of messages resident on the device, with the steps that run on it."""

    engine: GcmEngine
    count: int
    message_blocks: int
    blocks: int
    counters: Any
    lengths: Any
    buffer: Any
    flat: np.ndarray | None = None  # the host bytes the buffer mirrors, if any
    tags_buffer: Any = None
    partials: Any = None

    def crypt(self) -> list[Any]:
        """Enqueue CTR over the buffer in place; returns the launch events."""
        if not self.blocks:
            return []
        return [self.engine._enqueue_ctr(self.buffer, self.blocks, self.message_blocks, 1,
                                         self.counters, self.lengths)]

    def hash(self) -> list[Any]:
        """Enqueue GHASH and the tags of the buffer as it is then (ciphertext) into
        ``tags_buffer``; returns the launch events."""
        if self.tags_buffer is None:  # allocated once: a batch may be hashed repeatedly
            self.partials = self.engine._scratch(16 * self.count)
            self.tags_buffer = self.engine._scratch(16 * self.count)
        return [
            self.engine._enqueue_ghash(self.buffer, self.blocks, self.message_blocks,
                                       self.count, self.partials),
            self.engine._enqueue_tags(self.partials, self.count, self.counters, self.lengths,
                                      self.tags_buffer),
        ]

    def _fused(self, sealing: bool) -> list[Any] | None:
        """CTR, GHASH and the tags in one launch (gcm_crypt_hash), where the engine has
        it; None where not."""
        if not (self.engine.fused and fused_gcm()):
            return None
        if self.tags_buffer is None:
            self.tags_buffer = self.engine._scratch(16 * self.count)
        return [self.engine.enqueue_crypt_hash(
            self.buffer, self.buffer, self.blocks, self.message_blocks, self.count,
            (self.message_blocks, self.message_blocks), self.counters, self.lengths,
            self.tags_buffer, 1, sealing)]

    def seal(self) -> list[Any]:
        """Enqueue :meth:`crypt`, then :meth:`hash` (in one launch where the engine can);
        returns the launch events."""
        fused = self._fused(sealing=True)
        return fused if fused is not None else self.crypt() + self.hash()

    def open(self) -> list[Any]:
        """Enqueue :meth:`hash` over the ciphertext, then :meth:`crypt` (in one launch where
        the engine can); returns the launch events, the decryption's last."""
        fused = self._fused(sealing=False)
        return fused if fused is not None else self.hash() + self.crypt()

    def tags(self) -> np.ndarray:
        """GHASH and tags of the buffer as it is now (ciphertext), read back."""
        self.hash()
        tags = np.empty((self.count, BLOCK_SIZE), dtype=np.uint8)
        cl.enqueue_copy(self.engine.runtime.queue, tags, self.tags_buffer, is_blocking=True)
        return tags

    def download(self) -> None:
        assert self.flat is not None
        if self.blocks:
            cl.enqueue_copy(self.engine.runtime.queue, self.flat, self.buffer, is_blocking=True)


def _xor(text: np.ndarray, keystream: np.ndarray, out: np.ndarray, decrypt: bool) -> bytes:
    """``out`` = ``text`` XOR ``keystream``; returns the ciphertext side, read before
    ``out`` is written: ``out`` may be ``text`` (in place)."""
    ciphertext = text.tobytes() if decrypt else b""
    np.bitwise_xor(text, keystream, out=out)
    return ciphertext if decrypt else out.tobytes()


class GcmCipher(ghash.GcmTagCalls):
    """AES-GCM with pycryptodome's calling convention, running on an OpenCL device.

    ``update(aad)`` first, then ``encrypt`` or ``decrypt`` in pieces of any size,
    then ``digest``/``verify``. ``decrypt_and_verify`` checks the tag before it
    produces any plaintext; a bare ``decrypt`` returns plaintext that is not yet
    authenticated, exactly as in pycryptodome.
    """

    mode = MODE_GCM
    block_size = BLOCK_SIZE

    def __init__(
        self, key: bytes, nonce: bytes | None, mac_len: int, device: Device, key_schedule: str
    ) -> None:
        self.nonce = nonce = gcm_nonce(nonce, mac_len)
        self._mac_len = mac_len
        # H and E(J0) on the host (OpenSSL), as the CUDA engine's cipher and device
        # arrays make them: on the device each was a launch and a wait for it, for one
        # block, before any of the message's work.
        h, self._tag_mask = ghash.hash_subkey_and_tag_mask(key, nonce)
        self._engine = GcmEngine(key, device, key_schedule, h=h)
        self._j0 = ghash.initial_counter(h, nonce)
        self._key = bytes(key)  # (the keystream of a block split between calls: below)
        self._ghash = ghash.RunningGhash(self._engine.multipliers)
        self._phase = "aad"  # -> "encrypt" | "decrypt" -> "done"
        self._partial_keystream: tuple[int, bytes] | None = None

    # ---- public API ---------------------------------------------------------------

    def update(self, assoc_data: BytesLike) -> GcmCipher:
        """Add associated data (authenticated, not encrypted), before the text."""
        data = input_array(assoc_data)
        self._ghash.aad_bytes += data.nbytes
        rest = input_array(self._ghash.absorb_pending(data.tobytes()))
        whole = rest.nbytes - rest.nbytes % BLOCK_SIZE
        self._hash_run(rest[:whole])
        self._ghash.pending += rest[whole:].tobytes()
        return self

    def _hash_run(self, blocks: np.ndarray) -> None:
        """Add whole blocks in host memory to the GHASH: a short run on the host
        (ghash.HOST_RUN_BLOCKS), a longer one on the device."""
        if ghash.hashed_on_the_host(blocks.nbytes):
            self._ghash.absorb_blocks(blocks.tobytes())
        elif blocks.nbytes:
            partial = self._engine.stream(blocks, None, self._j0, 0, decrypt=True, crypt=False)
            self._ghash.absorb_partial_sum(partial, blocks.nbytes // BLOCK_SIZE)

    def _keystream_at(self, index: int) -> bytes:
        """The keystream of the message's block ``index``, made on the host (OpenSSL): a
        block that a call ends or begins inside, for which the device was a launch and
        a wait."""
        return ghash.encrypt_block(self._key, ghash.counter_block(self._j0, 1 + index))

    def _keystream_block(self, index: int) -> bytes:
        if self._partial_keystream is None or self._partial_keystream[0] != index:
            self._partial_keystream = (index, self._keystream_at(index))
        return self._partial_keystream[1]

    def _process(self, data: BytesLike, output: Any, direction: str) -> bytes | None:
        decrypt = direction == "decrypt"
        source = input_array(data)
        length = source.nbytes
        start = self._start_text(direction, length)
        target = np.empty_like(source) if output is None else output_array(output, length)

        done = 0
        if start % BLOCK_SIZE and length:  # finish the block a previous call began
            skip = start % BLOCK_SIZE
            done = min(length, BLOCK_SIZE - skip)
            keystream = np.frombuffer(self._keystream_block(start // BLOCK_SIZE), np.uint8)
            self._ghash.absorb_pending(_xor(source[:done], keystream[skip : skip + done],
                                            target[:done], decrypt))
        whole = (length - done) - (length - done) % BLOCK_SIZE
        if whole:
            on_the_host = ghash.hashed_on_the_host(whole)
            # (a ciphertext read before the output, which may be the input, is written)
            run = source[done : done + whole].tobytes() if on_the_host and decrypt else b""
            partial = self._engine.stream(
                source[done : done + whole], target[done : done + whole], self._j0,
                (start + done) // BLOCK_SIZE, decrypt, hash_text=not on_the_host,
            )
            if on_the_host:
                self._ghash.absorb_blocks(run if decrypt else
                                          target[done : done + whole].tobytes())
            else:
                self._ghash.absorb_partial_sum(partial, whole // BLOCK_SIZE)
            done += whole
        if done < length:  # a partial final block: keep its keystream for the next call
            keystream = np.frombuffer(
                self._keystream_block((start + done) // BLOCK_SIZE), np.uint8
            )
            self._ghash.pending += _xor(source[done:], keystream[: length - done],
                                        target[done:], decrypt)
        self._ghash.text_bytes = start + length
        return finish(target, output)

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt the next piece. Returns bytes, or None when ``output`` receives it."""
        return self._process(plaintext, output, "encrypt")

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt the next piece WITHOUT authenticating it (use decrypt_and_verify)."""
        return self._process(ciphertext, output, "decrypt")

    def encrypt_and_digest(
        self, plaintext: BytesLike, output: Any = None
    ) -> tuple[bytes | None, bytes]:
        """Encrypt the (last) piece and return it with the tag."""
        return self.encrypt(plaintext, output=output), self.digest()

    def decrypt_and_verify(
        self, ciphertext: BytesLike, received_mac_tag: bytes, output: Any = None
    ) -> bytes | None:
        """Authenticate the whole message, and only then decrypt the (last) piece.

        On a wrong tag it raises :class:`AuthenticationError` and releases no
        plaintext: neither a return value nor a byte of ``output``.
        """
        if self._phase in ("aad", "decrypt") and not self._ghash.text_bytes % BLOCK_SIZE:
            source = input_array(ciphertext)
            self._start_text("decrypt", source.nbytes)
            first_block = self._ghash.text_bytes // BLOCK_SIZE
            whole = source.nbytes - source.nbytes % BLOCK_SIZE
            # Pass 1: GHASH only, then the tag check.
            self._hash_run(source[:whole])
            self._ghash.pending += source[whole:].tobytes()
            self._ghash.text_bytes += source.nbytes
            self.verify(received_mac_tag)
            # Pass 2: authenticated, so decrypt.
            target = (
                np.empty_like(source) if output is None else output_array(output, source.nbytes)
            )
            if whole:
                self._engine.stream(
                    source[:whole], target[:whole], self._j0, first_block, decrypt=True,
                    hash_text=False,
                )
            if whole < source.nbytes:
                keystream = np.frombuffer(
                    self._keystream_at(first_block + whole // BLOCK_SIZE), np.uint8)
                np.bitwise_xor(
                    source[whole:], keystream[: source.nbytes - whole], out=target[whole:]
                )
            return finish(target, output)
        # After a decrypt() that ended mid-block (its plaintext is already out):
        # decrypt this piece aside and release it only once the tag matches.
        plaintext = self.decrypt(ciphertext)
        assert plaintext is not None
        self.verify(received_mac_tag)
        if output is None:
            return plaintext
        output_array(output, len(plaintext))[:] = np.frombuffer(plaintext, np.uint8)
        return None
