"""The chunked format between device arrays: a message in device memory sealed into its
sealed chunks in device memory, and opened back, a batch of chunks at a time.

The GCM kernels (``cl/aes_gcm.cl``) take messages at a stride: the plaintext's chunk k
at block 1024k, the sealed chunk k at block 1025k (its tag in the block after it). So a
batch of full chunks is sealed in one pass from the plaintext's layout straight into
the sealed one (CTR from the one into the other, then GHASH and the tags over the
sealed chunks, each tag written after its chunk), and opened the same way back, with
no copies through slots. Only a side that lies where a kernel cannot take it (an
array at an odd offset) goes through aligned scratch memory by a copy; the final,
shorter chunk goes through a zero-padded slot of its own (GHASH pads it with zeros),
and where it is empty (a message of whole chunks) its tag, E(J0), is made on the host.
Every step is device work on one queue or stream, in order. Opening compares the
tags on the device (only the first mismatch's index comes back), and on a mismatch
zeroes all the plaintext written before raising.

Where an engine has the fused kernel (``cl/aes_gcm.cl``'s gcm_crypt_hash), CTR, GHASH and
the tags of a batch are one launch that reads the text once, makes each chunk's J0 and
length itself, and when opening compares each tag with the received one as it makes
it: a batch is one command. Elsewhere (the carry-less GHASH of x86 CPUs) CTR and the
tags are two launches, the hashed side first when opening, after a launch that makes
the J0s and lengths (:func:`_crypt_and_tags`); the tags are gathered and compared by
two more.

The engines supply the operations (:class:`ChunkKernels`) over their spans of memory
(anything with ``nbytes`` and ``at(offset, nbytes)``, as in device_runs.py).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from ..._arrays import IN_PLACE_REFUSED
from ...chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    base_j0,
    chunk_nonce,
    plaintext_run,
    sealed_run,
)
from ...errors import AuthenticationError
from ..interface import BLOCK_SIZE

# Chunks per batch when a side goes through scratch memory: 64 MiB of it.
BATCH_CHUNKS = 4096
# Chunks per batch straight between the caller's arrays: 1 GiB of text per launch (the
# kernels index blocks in 32 bits), so that a launch's tail is rare.
DIRECT_BATCH_CHUNKS = 65536
SLOT_BLOCKS = CHUNK_SIZE // BLOCK_SIZE  # from one plaintext chunk to the next
SEALED_BLOCKS = SEALED_CHUNK_SIZE // BLOCK_SIZE  # from one sealed chunk to the next
NO_MISMATCH = 0xFFFFFFFF  # a verdict's value where every tag matched
# A verdict's span (ChunkKernels.verdict): the word, then room for up to 16 bytes that
# read_verdict copies beside it on the device and reads back with it.
VERDICT_BYTES = 32
VERDICT_ALSO_AT = 16
# Work-items a message in one launch of gcm_crypt_hash (message_items): at most 32
# while messages are many, more halving each item's Horner steps but adding a level to
# the pairing, whose barriers stall a compute unit; up to 256 where the messages are
# fewer than a wave's groups (AESGCM.encrypt of one 64 KiB device array: 32 threads,
# 128 Horner steps each, ran 285 us on an H200).
MESSAGE_ITEMS_MOST = 32
MESSAGE_ITEMS_ALONE = 256  # GCM_MAX_GHASH_ITEMS (cl/aes_gcm.cl): H's position tables end there


class ChunkRun(NamedTuple):
    """A batch's chunks, whose J0s and lengths the fused kernel makes: chunks ``first``
    on of the message with base J0 ``base_j0`` (chunkformat.base_j0), all full but the
    batch's last, which holds ``last_bytes``."""

    base_j0: bytes
    first: int
    last_bytes: int


class TagCheck(NamedTuple):
    """Where an opening launch compares the tags it makes: received tag m at block
    ``m * stride`` of ``received``; a mismatch lowers the verdict word in ``verdict``
    to ``first + m``."""

    received: Any
    stride: int
    verdict: Any
    first: int


class Messages(NamedTuple):
    """A launch's messages given one by one, where they are not the chunked format's
    chunks (device_messages.py), each ``message_blocks`` whole blocks: the J0 (16 bytes)
    of every message in a span on the device, and where ``masks`` is not None, a
    16-byte mask XORed into each tag (the share of its associated data), message m's at
    ``m * mask_step`` (0: one for all). A lone message may instead have ``j0s`` None and
    its J0 in ``j0``, by value, as a chunk run of one with that J0 (nothing to upload
    for it)."""

    j0s: Any
    message_blocks: int
    masks: Any
    mask_step: int
    j0: bytes | None = None


class ChunkKernels(Protocol):
    """One call's device operations, each enqueued after the one before it."""

    def aligned(self, span: Any) -> bool:
        """Whether a kernel can take ``span`` where it lies."""

    def scratch(self, nbytes: int) -> Any:
        """A new span of ``nbytes`` on the device, its bytes undefined until written (it
        may hold an earlier call's: every use here writes before it reads, or zeroes).
        Filling each one cost the GPU's host a command apiece before a call's first
        launch."""

    def copy(self, target: Any, source: Any) -> None: ...

    def zero(self, span: Any) -> None: ...

    def upload(self, target: Any, data: bytes) -> None: ...

    def empty_message_tag(self, j0: bytes) -> bytes:
        """The GCM tag of an empty message with no AAD under the chunk key: E(J0), since
        GHASH of nothing is 0. On the host: one AES block."""

    def first_mismatch(self, computed: Any, received: Any, count: int) -> int:
        """The first of ``count`` tags that differ between the two spans, ``count`` where
        none does, once the work before is done (compared on the device, every tag)."""

    def verdict(self) -> Any:
        """A verdict (:class:`TagCheck`): VERDICT_BYTES on the device, its first word
        NO_MISMATCH before the work that follows (with no command of its own, where the
        engine keeps such words from call to call)."""

    def read_verdict(self, verdict: Any, also: Any) -> tuple[int, bytes]:
        """The verdict word's value and the bytes of the span ``also`` (up to 16; none
        where it is None), once the work before is done: one read of the device."""

    def crypt(self, source: Any, target: Any, count: int, blocks: int, j0s: Any,
              lengths: Any, strides: tuple[int, int]) -> None:
        """CTR over ``blocks`` blocks (``SLOT_BLOCKS`` a message but the last) of ``count``
        messages: message m from block ``m * strides[0]`` of ``source`` to block
        ``m * strides[1]`` of ``target`` (which may be the same memory)."""

    def tags(self, text: Any, stride: int, count: int, blocks: int, j0s: Any,
             lengths: Any, tags: Any, tag_stride: int) -> None:
        """The tags of the messages in ``text`` (message m at block ``m * stride``; GHASH
        over them as they are then), tag m to block ``m * tag_stride`` of ``tags``."""

    fused: bool
    """Whether :meth:`crypt_and_tags` is there."""

    takes_messages: bool
    """Whether :meth:`crypt_and_tags` takes a :class:`Messages` run (many messages in one
    launch: device_messages.py): by the fused kernel, or by another of the engine's
    (a CPU device's one-pass kernel) where it has no fused one."""

    def crypt_and_tags(self, source: Any, target: Any, count: int, blocks: int,
                       run: ChunkRun | Messages, strides: tuple[int, int], tags: Any,
                       tag_stride: int, sealing: bool, check: TagCheck | None) -> None:
        """:meth:`crypt` and :meth:`tags` in one launch over the chunks of ``run`` (or the
        :class:`Messages` it gives): GHASH over the ciphertext, the output when
        ``sealing``, else the input (which may be the same memory). Where ``check`` is
        given, each tag is compared there, and written to ``tags`` only where that is not
        None."""

    def gather_tags(self, sealed: Any, tags: Any, count: int) -> None:
        """The tags of ``count`` sealed full chunks, side by side into ``tags``."""

    def counters(self, base_nonce: bytes, first: int, count: int, last_bytes: int,
                 j0s: Any, lengths: Any) -> None:
        """J0 and length of chunks ``first .. first + count - 1`` (full but the last, of
        ``last_bytes``) into ``j0s`` and ``lengths``, made on the device
        (chunk_layout.cl's chunks_counters)."""


def check_output(source_at: int, source_bytes: int, output_at: int, output_bytes: int,
                 result_bytes: int, same_memory: bool = True) -> None:
    """A caller's ``output=`` for a sealed or opened message: ``result_bytes`` long, and
    apart from the input (positions ``*_at`` in one memory where ``same_memory``; the
    kernels read each chunk at another offset than they write it, so an overlap would
    read what the call already wrote)."""
    if output_bytes != result_bytes:
        raise ValueError(f"output has {output_bytes} bytes; the result has {result_bytes}")
    if same_memory and output_at < source_at + source_bytes \
            and source_at < output_at + output_bytes:
        raise ValueError(IN_PLACE_REFUSED)


def fused_gcm() -> bool:
    """``$AESCL_GCM_FUSED``: unset or 1 seals and opens each batch with the fused kernel
    where an engine has it; 0 keeps CTR and GHASH apart (to compare the two)."""
    value = os.environ.get("AESCL_GCM_FUSED", "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"AESCL_GCM_FUSED must be 0 or 1, not {value!r}")
    return value != "0"


def message_items(count: int, least: int, group: int, groups_a_wave: int) -> int:
    """Work-items a message for ``count`` messages (or chunks) in one launch of the fused
    kernel, in groups of ``group`` items, ``groups_a_wave`` groups at once on the
    device: ``least`` (few, each with many Horner steps, as each engine swept its
    build), or more, a power of two up to MESSAGE_ITEMS_MOST (MESSAGE_ITEMS_ALONE where
    the messages are fewer than a wave's groups), where ``count`` messages of ``least``
    would not fill one wave. A run of 256 chunks (4 MiB, a team's last pieces) at 8
    items a chunk, 1,024 to a block, ran on 2 of an H200's 132 SMs."""
    items = least
    most = min(group, MESSAGE_ITEMS_ALONE) if count < groups_a_wave else MESSAGE_ITEMS_MOST
    while items < most and count * items < groups_a_wave * group and group % (2 * items) == 0:
        items *= 2
    return items


def _crypt_and_tags(kernels: ChunkKernels, source: Any, target: Any, count: int,
                    batch: _Batch, strides: tuple[int, int], tags: Any, tag_stride: int,
                    sealing: bool, check: TagCheck | None = None) -> None:
    """CTR from ``source`` into ``target`` and the tags of the ciphertext (the target's
    when ``sealing``, else the source's, hashed before it is decrypted) into ``tags``;
    or, with ``check`` (the fused kernel only), compared there."""
    if kernels.fused:
        kernels.crypt_and_tags(source, target, count, batch.blocks, batch.run, strides, tags,
                               tag_stride, sealing, check)
        return
    assert check is None  # (the separate kernels' tags are compared by first_mismatch)
    if not sealing:
        kernels.tags(source, strides[0], count, batch.blocks, batch.j0s, batch.sizes, tags,
                     tag_stride)
    kernels.crypt(source, target, count, batch.blocks, batch.j0s, batch.sizes, strides)
    if sealing:
        kernels.tags(target, strides[1], count, batch.blocks, batch.j0s, batch.sizes, tags,
                     tag_stride)


def _batches(chunks: int, per_batch: int) -> list[tuple[int, int]]:
    return [(first, min(per_batch, chunks - first)) for first in range(0, chunks, per_batch)]


class _Batch:
    """One batch's GCM arguments: J0 and length of each of ``count`` chunks from chunk
    ``first``, all full but the last, which holds ``last_bytes``. The fused kernel makes
    them itself (``run``); for the separate kernels they are made on the device into
    ``j0s`` and ``sizes``. (Made on the host they took milliseconds a 1 GiB batch, with
    the GPU waiting; and an upload from ordinary memory waits on NVIDIA's OpenCL for all
    the work before it.)"""

    def __init__(self, kernels: ChunkKernels, base_nonce: bytes, first: int, count: int,
                 last_bytes: int = CHUNK_SIZE) -> None:
        self.blocks = (count - 1) * SLOT_BLOCKS + -(-last_bytes // BLOCK_SIZE)
        self.run = ChunkRun(base_j0(base_nonce), first, last_bytes)
        self.j0s = self.sizes = None
        if not kernels.fused:
            self.j0s = kernels.scratch(count * BLOCK_SIZE)
            self.sizes = kernels.scratch(count * 8)
            kernels.counters(base_nonce, first, count, last_bytes, self.j0s, self.sizes)


class _Staging:
    """Where one side of a run of full chunks is taken by the kernels, a batch at a time:
    the caller's span where it is aligned, else aligned scratch memory (made when first
    needed), copied through."""

    def __init__(self, kernels: ChunkKernels, span: Any, chunk_bytes: int,
                 per_batch: int) -> None:
        self._kernels, self._span, self._chunk_bytes = kernels, span, chunk_bytes
        self._room = min(per_batch, span.nbytes // chunk_bytes) * chunk_bytes
        self._scratch: Any = None

    def _place(self, first: int, count: int) -> tuple[Any, Any]:
        """(the caller's span of a batch, the scratch it goes through; None where the
        kernels take the caller's span as it is)."""
        mine = self._span.at(first * self._chunk_bytes, count * self._chunk_bytes)
        if self._kernels.aligned(mine):
            return mine, None
        if self._scratch is None:
            self._scratch = self._kernels.scratch(self._room)
        return mine, self._scratch.at(0, count * self._chunk_bytes)

    def source(self, first: int, count: int) -> Any:
        """Where the kernels read a batch (copied into scratch first where staged)."""
        mine, staged = self._place(first, count)
        if staged is None:
            return mine
        self._kernels.copy(staged, mine)
        return staged

    def target(self, first: int, count: int) -> Any:
        """Where the kernels write a batch (:meth:`written` once they have)."""
        mine, staged = self._place(first, count)
        return mine if staged is None else staged

    def written(self, first: int, count: int) -> None:
        """A batch the kernels wrote into :meth:`target`, copied out where staged."""
        mine, staged = self._place(first, count)
        if staged is not None:
            self._kernels.copy(mine, staged)


def _per_batch(kernels: ChunkKernels, *spans: Any) -> int:
    return DIRECT_BATCH_CHUNKS if all(kernels.aligned(span) for span in spans) else BATCH_CHUNKS


def _full_chunks(kernels: ChunkKernels, full: int, source: Any, source_chunk: int,
                 target: Any, target_chunk: int) -> tuple[int, _Staging, _Staging]:
    """The chunks a batch takes, and where the kernels read and write the ``full`` whole
    chunks of a run: from ``source`` (``source_chunk`` bytes a chunk) into ``target``."""
    given = source.at(0, full * source_chunk)
    made = target.at(0, full * target_chunk)
    per_batch = _per_batch(kernels, given, made)
    return (per_batch, _Staging(kernels, given, source_chunk, per_batch),
            _Staging(kernels, made, target_chunk, per_batch))


def seal(kernels: ChunkKernels, base_nonce: bytes, plaintext: Any, sealed: Any,
         run_first: int = 0, run_final: bool = True) -> None:
    """Seal the chunks in ``plaintext`` into ``sealed`` (``sealed_size(n, raw=True)`` bytes
    for a whole message). They are chunks ``run_first, ...`` of the message; the run ends
    in the final chunk (always shorter, possibly empty) where ``run_final`` says so, and
    is whole chunks otherwise (a part of a message, as the scheduler hands engines)."""
    full, final_bytes = plaintext_run(plaintext.nbytes, run_final)
    if full:
        per_batch, sources, targets = _full_chunks(kernels, full, plaintext, CHUNK_SIZE,
                                                   sealed, SEALED_CHUNK_SIZE)
        for first, count in _batches(full, per_batch):
            batch = _Batch(kernels, base_nonce, run_first + first, count)
            source, target = sources.source(first, count), targets.target(first, count)
            _crypt_and_tags(kernels, source, target, count, batch, (SLOT_BLOCKS, SEALED_BLOCKS),
                            target.at(CHUNK_SIZE, target.nbytes - CHUNK_SIZE), SEALED_BLOCKS,
                            sealing=True)
            targets.written(first, count)
    if run_final:
        at = full * SEALED_CHUNK_SIZE
        slot = _final_chunk(kernels, base_nonce, run_first + full, final_bytes,
                            plaintext.at(full * CHUNK_SIZE, final_bytes), decrypt=False,
                            tag_into=sealed.at(at + final_bytes, TAG_SIZE))
        if slot is not None:
            kernels.copy(sealed.at(at, final_bytes), slot.at(0, final_bytes))


def _empty_chunk_tag(kernels: ChunkKernels, base_nonce: bytes, index: int) -> bytes:
    """The tag of an empty final chunk (that of a message of whole chunks), made on the
    host: E(J0), with no kernel to run."""
    return kernels.empty_message_tag(chunk_nonce(base_nonce, index) + (1).to_bytes(4, "big"))


def _final_chunk(kernels: ChunkKernels, base_nonce: bytes, index: int, nbytes: int,
                 text: Any, decrypt: bool, tag_into: Any, check: TagCheck | None = None
                 ) -> Any:
    """The final chunk (``nbytes`` of plaintext or ciphertext in ``text``) through a slot
    of its own, whose zero padding GHASH reads: returns the slot, processed, and writes
    its tag into ``tag_into`` (or compares it, with ``check``: the fused kernel's
    opening). An empty one has no slot (None): its tag is made on the host
    (:func:`_empty_chunk_tag`) and uploaded into ``tag_into``."""
    if not nbytes:
        kernels.upload(tag_into, _empty_chunk_tag(kernels, base_nonce, index))
        return None
    slot = kernels.scratch(CHUNK_SIZE)
    tag = None if check is not None else kernels.scratch(TAG_SIZE)
    batch = _Batch(kernels, base_nonce, index, 1, nbytes)
    kernels.zero(slot.at(nbytes, CHUNK_SIZE - nbytes))
    kernels.copy(slot.at(0, nbytes), text)
    _crypt_and_tags(kernels, slot, slot, 1, batch, (SLOT_BLOCKS, SLOT_BLOCKS), tag, 1,
                    sealing=not decrypt, check=check)
    if tag is not None:
        kernels.copy(tag_into, tag)
    return slot


def _nothing() -> None:
    pass


def open_sealed(kernels: ChunkKernels, base_nonce: bytes, sealed: Any, plaintext: Any,
                run_first: int = 0, run_final: bool = True,
                meanwhile: Callable[[], Any] = _nothing) -> None:
    """Open the sealed chunks in ``sealed`` (after the header; their size checked by the
    caller) into ``plaintext``, which does not overlap it: chunks ``run_first, ...`` of
    the message, ending in the final chunk where ``run_final`` says so. Raises
    :class:`AuthenticationError` naming the first chunk (of the message) whose tag does
    not match; ``plaintext`` is then all zeros.

    The batches run one after another with no wait between them, each tag compared on
    the device with the received one (by the fused kernel as it makes it; else
    gathered and compared once, at the end). Until then the plaintext written lies
    only in ``plaintext``, which this call has not returned; on a mismatch it is
    zeroed before the error is raised. It returns once all the work it enqueued is
    done (reading the verdict waits for it). ``meanwhile`` is called once all of the
    opening's work is enqueued, before that wait: a caller that enqueues its copy of
    the plaintext there has it made beside the verdict's, and must zero that copy itself
    where this raises."""
    full, rest = sealed_run(sealed.nbytes, run_first, run_final)
    final_bytes = rest - TAG_SIZE
    chunks = full + int(run_final)
    if not chunks:
        return
    opened = _open_checked if kernels.fused else _open_then_compare
    index = opened(kernels, base_nonce, sealed, plaintext, run_first, run_final, full,
                   final_bytes, meanwhile)
    if index < chunks:
        kernels.zero(plaintext)
        raise failed_chunk(run_first, index, run_final and index == full)


def failed_chunk(run_first: int, index: int, final: bool) -> AuthenticationError:
    """The error of chunk ``index`` of a run from message chunk ``run_first`` whose tag did
    not match; ``final``: it is the message's final chunk, where a cut looks the same."""
    cause = "truncated or modified" if final else "modified"
    return AuthenticationError(f"chunk {run_first + index} failed authentication: the data "
                               f"was {cause}", chunk=run_first + index)


def _open_checked(kernels: ChunkKernels, base_nonce: bytes, sealed: Any, plaintext: Any,
                  run_first: int, run_final: bool, full: int, final_bytes: int,
                  meanwhile: Callable[[], Any]) -> int:
    """:func:`open_sealed` by the fused kernel, which compares each tag as it makes it:
    the index (in the run) of the first chunk whose tag does not match, or the number of
    chunks where none fails. Its only commands besides the batches' launches read the
    verdict after them, with an empty final chunk's received tag, which is compared on
    the host with the one made there (a staged batch or a final chunk with bytes adds
    its copies)."""
    verdict = kernels.verdict()
    if full:
        per_batch, sources, targets = _full_chunks(kernels, full, sealed, SEALED_CHUNK_SIZE,
                                                   plaintext, CHUNK_SIZE)
        for first, count in _batches(full, per_batch):
            batch = _Batch(kernels, base_nonce, run_first + first, count)
            source = sources.source(first, count)
            # (the received tags lie after each chunk: block 1024 of it, stride 1025)
            check = TagCheck(source.at(CHUNK_SIZE, source.nbytes - CHUNK_SIZE), SEALED_BLOCKS,
                             verdict, first)
            _crypt_and_tags(kernels, source, targets.target(first, count), count, batch,
                            (SEALED_BLOCKS, SLOT_BLOCKS), None, 0, sealing=False, check=check)
            targets.written(first, count)
    received_final = expected_final = None
    if run_final:
        at = full * SEALED_CHUNK_SIZE
        received_final = sealed.at(at + final_bytes, TAG_SIZE)
        if final_bytes:
            received = kernels.scratch(TAG_SIZE)  # (where a kernel can read it)
            kernels.copy(received, received_final)
            slot = _final_chunk(kernels, base_nonce, run_first + full, final_bytes,
                                sealed.at(at, final_bytes), decrypt=True, tag_into=None,
                                check=TagCheck(received, 1, verdict, full))
            kernels.copy(plaintext.at(full * CHUNK_SIZE, final_bytes), slot.at(0, final_bytes))
            received_final = None
        else:
            expected_final = _empty_chunk_tag(kernels, base_nonce, run_first + full)
    meanwhile()
    index, received_bytes = kernels.read_verdict(verdict, received_final)
    if index == NO_MISMATCH:
        index = full + int(run_final)
        if expected_final is not None and not hmac.compare_digest(expected_final,
                                                                  received_bytes):
            index = full
    return index


def _open_then_compare(kernels: ChunkKernels, base_nonce: bytes, sealed: Any,
                       plaintext: Any, run_first: int, run_final: bool, full: int,
                       final_bytes: int, meanwhile: Callable[[], Any]) -> int:
    """:func:`open_sealed` by the separate kernels: each batch's computed and received tags
    gathered on the device (:func:`open_unchecked`), and compared there once, at the end
    (the index as in :func:`_open_checked`)."""
    chunks = full + int(run_final)
    computed, received = (kernels.scratch(chunks * TAG_SIZE) for _ in range(2))
    open_unchecked(kernels, base_nonce, sealed, plaintext, computed, received, run_first,
                   run_final)
    meanwhile()
    return kernels.first_mismatch(computed, received, chunks)


def open_unchecked(kernels: ChunkKernels, base_nonce: bytes, sealed: Any, plaintext: Any,
                   computed: Any, received: Any, run_first: int = 0,
                   run_final: bool = True) -> None:
    """Decrypt the sealed chunks in ``sealed`` into ``plaintext`` (as :func:`open_sealed`)
    and compare nothing: each chunk's tag, made from its ciphertext before it is
    decrypted, goes into ``computed`` and its received tag into ``received`` (16 bytes a
    chunk, in order), for the caller to compare before it releases any of the plaintext.
    For a caller that compares elsewhere: the OpenCL engine's pipeline checks a piece's
    tags on the host when its results are back, so that no launch waits for a verdict."""
    full, rest = sealed_run(sealed.nbytes, run_first, run_final)
    final_bytes = rest - TAG_SIZE
    if full:
        per_batch, sources, targets = _full_chunks(kernels, full, sealed, SEALED_CHUNK_SIZE,
                                                   plaintext, CHUNK_SIZE)
        # (a batch's tags go straight into place where a kernel takes them there)
        made_tags, found_tags = (_Staging(kernels, tags, TAG_SIZE, per_batch)
                                 for tags in (computed, received))
        for first, count in _batches(full, per_batch):
            batch = _Batch(kernels, base_nonce, run_first + first, count)
            source = sources.source(first, count)
            made, found = made_tags.target(first, count), found_tags.target(first, count)
            _crypt_and_tags(kernels, source, targets.target(first, count), count, batch,
                            (SEALED_BLOCKS, SLOT_BLOCKS), made, 1, sealing=False)
            # The received tags after the batch's launch, which writes only the plaintext
            # side, so that the device starts on the batch a command sooner (the host's
            # commands before a launch are time the device idles, in an opening that
            # waits for its tags at the end).
            kernels.gather_tags(source, found, count)
            for staging in (targets, made_tags, found_tags):
                staging.written(first, count)
    if run_final:
        at = full * SEALED_CHUNK_SIZE
        slot = _final_chunk(kernels, base_nonce, run_first + full, final_bytes,
                            sealed.at(at, final_bytes), decrypt=True,
                            tag_into=computed.at(full * TAG_SIZE, TAG_SIZE))
        kernels.copy(received.at(full * TAG_SIZE, TAG_SIZE),
                     sealed.at(at + final_bytes, TAG_SIZE))
        if slot is not None:
            kernels.copy(plaintext.at(full * CHUNK_SIZE, final_bytes), slot.at(0, final_bytes))
