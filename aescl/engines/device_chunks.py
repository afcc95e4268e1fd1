"""The chunked format between device arrays: a message in device memory sealed into its
sealed chunks in device memory, and opened back, a batch of chunks at a time.

The GCM kernels (``cl/aes_gcm.cl``) work on slots: chunk k at block 1024k of an aligned
buffer, its tag apart. A caller's arrays hold the format's layouts instead, at any
alignment: the plaintext's chunk k at byte 16384k, the sealed chunk k at 16400k after
the header. So a batch is copied into aligned scratch slots, sealed or opened there,
and copied out; full chunks pass through ``chunk_layout.cl``'s packing (straight into
the sealed layout where it lies aligned: the engines place a result they make so that
its chunks do), the final short chunk and its tag are placed by copies. Every step
is device work on one queue or stream, in order. Opening compares the tags
on the host (16 bytes a chunk) once all are made, and on a mismatch zeroes all the
plaintext written before raising.

The engines supply the operations (:class:`ChunkKernels`) over their spans of memory
(anything with ``nbytes`` and ``at(offset, nbytes)``, as in device_runs.py).
"""

from __future__ import annotations

import hmac
from typing import Any, Protocol

import numpy as np

from ..chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    chunk_j0s,
    plaintext_run,
    sealed_run,
)
from ..errors import AuthenticationError
from .interface import BLOCK_SIZE

BATCH_CHUNKS = 4096  # chunks per batch: 64 MiB of slots in scratch memory
_CHUNK_BLOCKS = CHUNK_SIZE // BLOCK_SIZE


class ChunkKernels(Protocol):
    """One call's device operations, each enqueued after the one before it."""

    def aligned(self, span: Any) -> bool:
        """Whether a kernel can take ``span`` where it lies."""

    def scratch(self, nbytes: int) -> Any:
        """A new span of ``nbytes`` on the device, zero-filled."""

    def copy(self, target: Any, source: Any) -> None: ...

    def zero(self, span: Any) -> None: ...

    def upload(self, target: Any, data: bytes) -> None: ...

    def download(self, span: Any) -> bytes:
        """The bytes of a span, once the work before is done."""

    def crypt(self, slots: Any, count: int, blocks: int, j0s: Any, lengths: Any) -> None:
        """CTR over ``blocks`` blocks of ``count`` messages in slots, in place."""

    def tags(self, slots: Any, count: int, blocks: int, j0s: Any, lengths: Any,
             tags: Any) -> None:
        """The tags of the messages in slots (GHASH over them as they are now)."""

    def pack(self, slots: Any, tags: Any, sealed: Any, count: int) -> None: ...

    def unpack(self, sealed: Any, out: Any, tags_block: int, count: int) -> None: ...


def _batches(chunks: int) -> list[tuple[int, int]]:
    return [(first, min(BATCH_CHUNKS, chunks - first)) for first in range(0, chunks,
                                                                             BATCH_CHUNKS)]


class _Scratch:
    """Scratch memory made when first used."""

    def __init__(self, kernels: ChunkKernels, nbytes: int) -> None:
        self._kernels, self._nbytes, self._span = kernels, nbytes, None

    @property
    def span(self) -> Any:
        if self._span is None:
            self._span = self._kernels.scratch(self._nbytes)
        return self._span


class _Batch:
    """One batch's GCM arguments, uploaded: J0 and length of each message."""

    def __init__(self, kernels: ChunkKernels, base_nonce: bytes, first: int,
                 lengths: list[int]) -> None:
        count = len(lengths)
        self.count, self.lengths = count, lengths
        self.text_bytes = sum(lengths)
        self.blocks = (count - 1) * _CHUNK_BLOCKS + -(-lengths[-1] // BLOCK_SIZE)
        self.j0s = kernels.scratch(count * BLOCK_SIZE)
        kernels.upload(self.j0s, chunk_j0s(base_nonce, first, count).tobytes())
        self.sizes = kernels.scratch(count * 8)
        kernels.upload(self.sizes, CHUNK_SIZE.to_bytes(8, "little") * (count - 1)
                       + lengths[-1].to_bytes(8, "little"))


def seal(kernels: ChunkKernels, base_nonce: bytes, plaintext: Any, sealed: Any,
         run_first: int = 0, run_final: bool = True, input_as_slots: bool = False) -> None:
    """Seal the chunks in ``plaintext`` into ``sealed`` (``sealed_size(n, raw=True)`` bytes
    for a whole message). They are chunks ``run_first, ...`` of the message; the run ends
    in the final chunk (always shorter, possibly empty) where ``run_final`` says so, and
    is whole chunks otherwise (a part of a message, as the scheduler hands engines).

    ``input_as_slots``: ``plaintext`` is the engine's own staging, which the sealing may
    overwrite. Whole chunks lie in it as in slots, so where it is aligned they are
    encrypted there, without a copy into scratch slots."""
    full, final_bytes = plaintext_run(plaintext.nbytes, run_final)
    chunks = full + int(run_final)
    if not chunks:
        return
    room = min(BATCH_CHUNKS, chunks)
    # (A final chunk needs its slot's zero padding, which the input has no room for.)
    in_place = input_as_slots and not run_final and kernels.aligned(plaintext)
    slots = None if in_place else kernels.scratch(room * CHUNK_SIZE)
    tags = kernels.scratch(room * TAG_SIZE)
    packed = _Scratch(kernels, room * SEALED_CHUNK_SIZE)
    for first, count in _batches(chunks):
        final = run_final and first + count == chunks
        batch = _Batch(kernels, base_nonce, run_first + first,
                       [CHUNK_SIZE] * (count - 1) + [final_bytes if final else CHUNK_SIZE])
        if slots is None:
            batch_slots = plaintext.at(first * CHUNK_SIZE, count * CHUNK_SIZE)
        else:
            batch_slots = slots
            if batch.text_bytes:
                kernels.copy(slots.at(0, batch.text_bytes),
                             plaintext.at(first * CHUNK_SIZE, batch.text_bytes))
        if batch.text_bytes:
            kernels.crypt(batch_slots, count, batch.blocks, batch.j0s, batch.sizes)
        kernels.tags(batch_slots, count, batch.blocks, batch.j0s, batch.sizes, tags)
        whole = count - int(final)  # chunks that fill their slot
        if whole:
            target = sealed.at(first * SEALED_CHUNK_SIZE, whole * SEALED_CHUNK_SIZE)
            if kernels.aligned(target):  # (a result the engine made lies aligned)
                kernels.pack(batch_slots, tags, target, whole)
            else:
                kernels.pack(batch_slots, tags, packed.span, whole)
                kernels.copy(target, packed.span.at(0, whole * SEALED_CHUNK_SIZE))
        if final:
            at = full * SEALED_CHUNK_SIZE
            if final_bytes:
                kernels.copy(sealed.at(at, final_bytes),
                             batch_slots.at(whole * CHUNK_SIZE, final_bytes))
            kernels.copy(sealed.at(at + final_bytes, TAG_SIZE),
                         tags.at(whole * TAG_SIZE, TAG_SIZE))


def open_sealed(kernels: ChunkKernels, base_nonce: bytes, sealed: Any, plaintext: Any,
                run_first: int = 0, run_final: bool = True) -> None:
    """Open the sealed chunks in ``sealed`` (after the header; their size checked by the
    caller) into ``plaintext``: chunks ``run_first, ...`` of the message, ending in the
    final chunk where ``run_final`` says so. Raises :class:`AuthenticationError` naming
    the first chunk (of the message) whose tag does not match; ``plaintext`` is then all
    zeros.

    The batches run one after another with no wait between them: each batch's computed
    and received tags are gathered on the device, and compared on the host once, at the
    end. Until then the plaintext written lies only in ``plaintext``, which this call
    has not returned; on a mismatch it is zeroed before the error is raised."""
    full, rest = sealed_run(sealed.nbytes, run_first, run_final)
    final_bytes = rest - TAG_SIZE
    chunks = full + int(run_final)
    if not chunks:
        return
    room = min(BATCH_CHUNKS, chunks)
    slots = kernels.scratch(room * (CHUNK_SIZE + TAG_SIZE))  # slots, then received tags
    tags = kernels.scratch(room * TAG_SIZE)
    packed = _Scratch(kernels, room * SEALED_CHUNK_SIZE)
    every_tag = kernels.scratch(2 * chunks * TAG_SIZE)  # all computed, then all received
    for first, count in _batches(chunks):
        final = run_final and first + count == chunks
        batch = _Batch(kernels, base_nonce, run_first + first,
                       [CHUNK_SIZE] * (count - 1) + [final_bytes if final else CHUNK_SIZE])
        received = slots.at(count * CHUNK_SIZE, count * TAG_SIZE)
        whole = count - int(final)
        if whole:
            source = sealed.at(first * SEALED_CHUNK_SIZE, whole * SEALED_CHUNK_SIZE)
            if not kernels.aligned(source):  # the kernel needs the sealed chunks aligned
                kernels.copy(packed.span.at(0, whole * SEALED_CHUNK_SIZE), source)
                source = packed.span
            kernels.unpack(source, slots, count * _CHUNK_BLOCKS, whole)
        if final:
            at, slot = full * SEALED_CHUNK_SIZE, whole * CHUNK_SIZE
            if final_bytes:
                kernels.copy(slots.at(slot, final_bytes), sealed.at(at, final_bytes))
            padding = -final_bytes % BLOCK_SIZE  # GHASH pads the last block with zeros
            if padding:
                kernels.zero(slots.at(slot + final_bytes, padding))
            kernels.copy(received.at(whole * TAG_SIZE, TAG_SIZE),
                         sealed.at(at + final_bytes, TAG_SIZE))
        kernels.tags(slots, count, batch.blocks, batch.j0s, batch.sizes, tags)
        kernels.copy(every_tag.at(first * TAG_SIZE, count * TAG_SIZE),
                     tags.at(0, count * TAG_SIZE))
        kernels.copy(every_tag.at((chunks + first) * TAG_SIZE, count * TAG_SIZE), received)
        if batch.text_bytes:
            kernels.crypt(slots, count, batch.blocks, batch.j0s, batch.sizes)
            kernels.copy(plaintext.at(first * CHUNK_SIZE, batch.text_bytes),
                         slots.at(0, batch.text_bytes))
    both = kernels.download(every_tag)
    computed, expected = both[: chunks * TAG_SIZE], both[chunks * TAG_SIZE :]
    if not hmac.compare_digest(computed, expected):
        kernels.zero(plaintext)
        index = _first_mismatch(computed, expected)
        cause = "truncated or modified" if run_final and index == full else "modified"
        raise AuthenticationError(f"chunk {run_first + index} failed authentication: the "
                                  f"data was {cause}", chunk=run_first + index)


def _first_mismatch(computed: bytes, expected: bytes) -> int:
    """The first chunk whose tags differ (once the whole comparison has failed)."""
    differs = (np.frombuffer(computed, np.uint8).reshape(-1, TAG_SIZE)
               != np.frombuffer(expected, np.uint8).reshape(-1, TAG_SIZE)).any(axis=1)
    return int(np.argmax(differs))
