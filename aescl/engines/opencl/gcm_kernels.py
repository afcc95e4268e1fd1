"""GCM's kernel set on an OpenCL device (``cl/aes_gcm.cl``), for one key: CTR with inc32,
GHASH partial sums by powers of H, the tags of many messages, the fused kernel that does
all three in one launch, and GHASH's tables, built on the device and kept per key.

:class:`GcmKernels` enqueues them over device buffers for three callers: the GCM stream
on host data (gcm.py), the chunked format's device program (device_chunks.py, through
workers.OpenclChunkKernels) and GCM on pyopencl arrays (arrays.py).

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
from ..._arrays import default_slice_bytes
from ...chunkformat import CHUNK_SIZE
from ...devices import Device
from ..programs.device_chunks import message_items
from .kernels import (
    aes_options,
    carryless_ghash,
    kernel_in,
    key_argument,
)
from .runtime import DeviceRuntime, device_runtime, kept_per_object, one_job_per_device
from .tuning import launch_config

BLOCK_SIZE = 16
_SEGMENT_STEPS = 64  # Horner steps per work-item when one long message is split for GHASH
_MAX_LAUNCH_BLOCKS = 2**32 - 2**20  # kernels index blocks with 32-bit integers
_MAX_GHASH_ITEMS = 256  # GCM_MAX_GHASH_ITEMS in cl/aes_gcm.cl
_MAX_CRYPT_HASH_GROUP = 256  # GCM_CRYPT_HASH_MAX_GROUP's default in cl/aes_gcm.cl
# Work-items per message in gcm_crypt_hash where messages fill the device: few, each with
# many Horner steps, so that the pairing's barriers are rare (engines/cuda/workers.py,
# _CRYPT_HASH_ITEMS); more where they do not (device_chunks.message_items).
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


def _build_launches(rt: DeviceRuntime, options: str, config: Any) -> _Launches:
    # Kept by the runtime (its ``made``), so that a runtime made anew for a device (tests
    # drop them) never meets kernels of the one it replaced, and they go with it.
    device = rt.device
    key = ("launches", options, config)
    found = rt.made.get(key)
    if found is not None:
        return found

    def made(name: str) -> Any:
        return kernel_in(rt, "aes_gcm.cl", options, name)

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
        return rt.made.setdefault(key, found)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Shape:
    """What an engine is for any key of one size on one device, in one context, with one
    launch config: made once (:func:`_shape`), as a chunked call makes an engine for
    each message's new key before its first launch."""

    options: str
    runtime: Any
    launches: _Launches
    slice_bytes: int


def _shape(device: Device, context: Any, rounds: int, key_schedule: str, config: Any) -> _Shape:
    rt = device_runtime(device, context)  # (asked each time: see _build_launches)
    key = ("shape", rounds, key_schedule, config)
    found = rt.made.get(key)
    if found is None:
        options = aes_options(rounds, key_schedule, config)
        found = rt.made.setdefault(key, _Shape(
            options, rt, _build_launches(rt, options, config),
            min(default_slice_bytes(device), _MAX_LAUNCH_BLOCKS * BLOCK_SIZE)))
    return found


class GcmKernels:
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
        self._device = device

    @cached_property
    def multipliers(self) -> ghash.PowerMultipliers:
        """Products by powers of H on the host, for the callers that fold GHASH sums
        there (the chunked format's tags are made on the device: made when first
        used, they cost its calls nothing before their first launch)."""
        return ghash.PowerMultipliers(self.h)

    def times_power(self, value: int, exponent: int) -> int:
        return self.multipliers.times_power(value, exponent)

    def constant(self, array: np.ndarray) -> Any:
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
    def positions_of(self, base: int) -> Any:
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

    def enqueue_ctr(
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

    def enqueue_ghash(
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
            tables if self._carryless else self.positions_of(base), partials,
        )
        return cl.enqueue_nd_range_kernel(
            self.runtime.queue, self._ghash, (groups * items,), (items,)
        )

    @property
    def fused(self) -> bool:
        """Whether :meth:`enqueue_crypt_hash` is there."""
        return self._crypt_hash is not None

    def one_pass(self, name: str) -> Any:
        """A kernel of ``cl/chunk_seal.cl`` (the chunked format's full chunks, or many
        messages, in one pass over memory), built with this engine's options; None
        where the device has none: they serve CPU devices on AES-NI with carry-less
        GHASH, which the portable route's extra trips through memory slow down
        (docs/benchmarks), where the compiler grants the instructions."""
        config = self.launch
        if (self._device.type != "cpu" or not carryless_ghash(config)
                or (CHUNK_SIZE // BLOCK_SIZE) % config.blocks_per_item):
            return None
        try:
            return kernel_in(self.runtime, "chunk_seal.cl", self.options, name)
        except cl.LogicError:  # the compiler did not grant the instructions: none built
            return None

    @kept_per_object
    def _messages_one_pass(self) -> Any:
        """chunk_seal.cl's messages_crypt where there is no fused kernel, once asked for
        (its build is seconds on PoCL); None where the device has neither."""
        return None if self.fused else self.one_pass("messages_crypt")

    @property
    def messages_in_one_pass(self) -> bool:
        """Whether :meth:`enqueue_messages` is there: many messages of one length in one
        launch on a device without the fused kernel (a CPU's, by chunk_seal.cl)."""
        return self._messages_one_pass is not None

    def enqueue_messages(
        self, source: Any, target: Any, message_blocks: int, count: int,
        strides: tuple[int, int], j0s: Any, lone_j0: bytes | None, tags: Any,
        tag_stride: int, sealing: bool, firsts: tuple[int, int, int],
        check: tuple[Any, int, int, Any, int] | None, tag_masks: tuple[Any, int] | None,
    ) -> Any:
        """``count`` messages of ``message_blocks`` whole blocks each in one launch of
        chunk_seal.cl's messages_crypt, on a device without the fused kernel; the
        arguments as :meth:`enqueue_crypt_hash`'s, but J0s from ``j0s`` or, for a batch
        of one, ``lone_j0`` by value. One work-item a message, in as many work-groups
        of one (eight for each of the launch settings' groups: 16,384 messages of 1 KiB
        took 3.2 ms in 64 on the 2-core CI kind, 5.9 ms in 8, 3.7 ms in 512), each going
        over the messages by strides: a work-group a message cost PoCL more than a
        small message's work."""
        launch = self._messages_one_pass
        received, received_first, received_stride, verdict, verdict_first = \
            check or (None, 0, 0, None, 0)
        groups = max(1, min(8 * self._max_work_groups, count))
        launch.set_args(
            source, target, message_blocks, strides[0], strides[1], firsts[0], firsts[1],
            count, int(not sealing), j0s, lone_j0 or bytes(BLOCK_SIZE), tags, firsts[2],
            tag_stride, *(tag_masks or (None, 0)), received, received_first,
            received_stride, verdict, verdict_first,
            self.h_tables(self.launch.blocks_per_item), self.key,
        )
        return cl.enqueue_nd_range_kernel(self.runtime.queue, launch, (groups,), (1,))

    def enqueue_crypt_hash(
        self, source: Any, target: Any, blocks: int, message_blocks: int, count: int,
        strides: tuple[int, int], j0s: Any, tags: Any, tag_stride: int,
        sealing: bool, firsts: tuple[int, int, int] = (0, 0, 0),
        chunk_run: tuple[bytes, int, int] | None = None,
        check: tuple[Any, int, int, Any, int] | None = None,
        tag_masks: tuple[Any, int] | None = None,
    ) -> Any:
        """CTR, GHASH and the tags of ``count`` messages of up to ``message_blocks`` blocks
        (``blocks`` in all) in one launch (aes_gcm.cl's gcm_crypt_hash), each from its first
        block's counter on (J0 + 1): message m from block ``m * strides[0]`` of
        ``source`` to block ``m * strides[1]`` of ``target``, its tag to block
        ``m * tag_stride`` of ``tags`` (None: not written), each counted from block
        ``firsts`` (source, target, tags) of its buffer; GHASH over the output when
        ``sealing``, else over the input.

        Message m's J0 is read from ``j0s`` (each message ``message_blocks`` whole
        blocks), or, where that is None, J0s and lengths are made by the kernel for the
        chunked format's chunks ``chunk_run`` (base J0, first chunk, bytes of the last
        message). ``check`` (received tags, their first block and stride, the verdict
        word's buffer, the index of message 0 in it): each tag compared with the
        received one, the verdict lowered to the first mismatch.
        ``tag_masks`` (a buffer, the step from one message's mask to the next: 0 for one
        mask for all): XORed into each tag before it is written or compared."""
        group = self._crypt_hash_group
        items = message_items(count, self._crypt_hash_items, group, self._max_work_groups)
        groups = min(self._max_work_groups, -(-count // (group // items)))
        first_j0, first_chunk, last_bytes = chunk_run or (bytes(BLOCK_SIZE), 0, 0)
        received, received_first, received_stride, verdict, verdict_first = \
            check or (None, 0, 0, None, 0)
        # (plain ints and J0's bytes: the kernel's by-value types are set (kernels.kernel),
        # and a numpy scalar apiece cost more than the packing)
        self._crypt_hash.set_args(
            source, target, blocks, message_blocks, strides[0], strides[1], firsts[0],
            firsts[1], count, items, int(sealing), j0s,
            first_j0, first_chunk, last_bytes,
            self.positions_of(self.h), tags, firsts[2], tag_stride,
            *(tag_masks or (None, 0)), received, received_first,
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
        # (blocking: pyopencl's event of a copy from host memory, freed unfinished, waits
        # for it holding the GIL, and every other thread of the process with it)
        cl.enqueue_copy(queue, buffer, blocks, is_blocking=True)
        counters = self.constant(np.frombuffer(b"".join(j0s), dtype=np.uint8))
        lengths = self.constant(np.full(len(j0s), BLOCK_SIZE, dtype=np.uint64))
        self.enqueue_ctr(buffer, len(j0s), 1, first_step, counters, lengths)
        cl.enqueue_copy(queue, blocks, buffer, is_blocking=True)
        return [row.tobytes() for row in blocks]

    # ---- one message, any length: the GCM stream's path (gcm.py) -----------------

    def lengths_of(self, nbytes: int) -> Any:
        """A device buffer of one message length, as the CTR kernel takes lengths."""
        return self.constant(np.array([nbytes], dtype=np.uint64))

    def enqueue_partial_sum(self, buffer: Any, blocks: int) -> tuple[Any, Any, int]:
        """Enqueue the GHASH partial sum of the first ``blocks`` blocks of a device buffer,
        left on the device for :meth:`partial_sum_read`: GHASH in segments, and where there
        are several, their sums folded on the device too (ghash.fold_on_device says how)
        into a second buffer. Returns (the segments' sums, their fold or None, blocks), in
        scratch of the runtime. (Folding thousands of segments' sums on the host took
        longer than the GHASH itself: a GCM stream's 1 GiB message on an H200 sealed at
        16-23 GB/s so, against 44 on the CUDA engine's device fold, 2026-12-02. Read back
        at once, they were a copy into pageable memory in the middle of a pipeline, which
        NVIDIA's OpenCL makes wait for the work before it.)"""
        segment = self._ghash_items * _SEGMENT_STEPS
        count = -(-blocks // segment)
        partials = self.runtime.take_scratch(16 * count)
        self.enqueue_ghash(buffer, blocks, segment, count, partials)
        if count == 1:
            return partials, None, blocks
        folded = self.runtime.take_scratch(16)
        self._sums_as_blocks.set_args(partials, np.uint32(count))
        cl.enqueue_nd_range_kernel(self.runtime.queue, self._sums_as_blocks, (256,), None)
        self.enqueue_ghash(partials, count - 1, count - 1, 1, folded,
                           base=self.multipliers.power(segment))
        return partials, folded, blocks

    def partial_sum_read(self, pending: tuple[Any, Any, int]) -> int:
        """The partial sum :meth:`enqueue_partial_sum` left on the device, read back once
        the work before it is done; its scratch goes back to the runtime."""
        partials, folded, blocks = pending
        segment = self._ghash_items * _SEGMENT_STEPS
        count = -(-blocks // segment)
        queue = self.runtime.queue
        try:
            # (blocking reads: see keystream)
            if folded is None:  # one segment: its sum as gcm_ghash left it
                last = np.zeros(2, np.uint64)
                cl.enqueue_copy(queue, last, partials, is_blocking=True)
                return (int(last[0]) << 64) | int(last[1])
            outer = np.zeros(2, np.uint64)
            cl.enqueue_copy(queue, outer, folded, is_blocking=True)
            block = np.zeros(16, np.uint8)  # the last sum, now a block in memory order
            cl.enqueue_copy(queue, block, partials, src_offset=16 * (count - 1),
                            is_blocking=True)
            return ghash.fold_on_device((int(outer[0]) << 64) | int(outer[1]),
                                        ghash.block_to_int(block.tobytes()), segment,
                                        blocks - segment * (count - 1), self.multipliers)
        finally:
            self.runtime.give_back_scratch([partials] if folded is None else [partials, folded])

    @one_job_per_device
    def partial_sum(self, buffer: Any, blocks: int) -> int:
        """The GHASH partial sum of the first ``blocks`` blocks of a device buffer (data
        already on the device: GCM on a caller's arrays)."""
        return self.partial_sum_read(self.enqueue_partial_sum(buffer, blocks))

    # ---- many messages with empty AAD: the chunked format's path ------------------

    @one_job_per_device
    def host_partial_sum(self, blocks: np.ndarray) -> int:
        """The GHASH partial sum of whole blocks in host memory (a device array's AAD), a
        slice at a time through a buffer of this engine's context."""
        step = self.slice_bytes - self.slice_bytes % BLOCK_SIZE
        buffer = self._scratch(min(step, blocks.nbytes))
        total = 0
        for start in range(0, blocks.nbytes, step):
            part = blocks[start : start + step]
            cl.enqueue_copy(self.runtime.queue, buffer, part, is_blocking=True)  # (keystream)
            count = part.nbytes // BLOCK_SIZE
            total = self.times_power(total, count) ^ self.partial_sum(buffer, count)
        return total

    def enqueue_tags(
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
