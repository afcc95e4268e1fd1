"""Many independent AES-GCM messages of one length between device arrays, each with its
own nonce (and associated data), sealed or opened in one launch of the fused GCM kernel
(``cl/aes_gcm.cl``'s gcm_crypt_hash) a batch: ``aescl.AESGCM.encrypt_many`` and
``decrypt_many`` on the rows of a 2-D device array.

The kernel already takes messages at a stride with their J0s and lengths given (the
chunked format is its other caller, which has it make them): message m of the plaintext
at block ``m * L/16``, its sealed row at block ``m * (L/16 + 1)`` with the tag in the row's
last block. What it does not hash is associated data. GHASH is linear, so a message's AAD
adds to its tag a share that depends on nothing but the AAD, H and the text's length:
the AAD's blocks times the powers of H past the text's, and its bit length in the length
block. That share is made here on the host, once for an AAD common to all (the usual
case) and once a message otherwise, and the kernel XORs it into each tag.

The rows must lie on 16-byte boundaries (L a multiple of 16, the array aligned); other
shapes go the message-by-message way (aead.py). Opening compares every tag on the device
and returns the index of the first that failed (or the count); the caller finds the rest
and zeroes their rows before it releases anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ... import ghash
from ...chunkformat import TAG_SIZE
from ..interface import BLOCK_SIZE
from .device_chunks import NO_MISMATCH, ChunkKernels, Messages, TagCheck

# Messages per launch: at most 1 GiB of text in one (the kernels index blocks in 32 bits).
_BATCH_BYTES = 1 << 30


class MessagePlan(NamedTuple):
    """What the host makes for a batch of messages: ``count`` messages of ``nbytes`` each
    (a multiple of 16), their J0s (16 bytes each, as bytes or a uint8 array), and the
    tag masks: None (no AAD), one 16-byte mask for all, or one a message."""

    count: int
    nbytes: int
    j0s: bytes | np.ndarray
    masks: bytes | None
    one_mask: bool


def fits(nbytes: int, count: int) -> bool:
    """Whether messages of ``nbytes`` each, ``count`` of them, go through one launch a
    batch: rows on block boundaries, some text in each (an empty message's tag is one
    block, made on the host), and a batch's blocks within the kernels' 32-bit index."""
    return count > 0 and nbytes > 0 and nbytes % BLOCK_SIZE == 0 and nbytes <= _BATCH_BYTES


class NotTaken(Exception):
    """The kernels cannot take these messages where they lie (no fused kernel on the
    device, or rows off 16-byte boundaries): the caller goes message by message."""


def plan(key: bytes, nonces: list[bytes] | np.ndarray, nbytes: int,
         common_aad: bytes | None = None, each_aad: list[bytes] | None = None,
         h: int | None = None) -> MessagePlan:
    """J0s and tag masks of ``len(nonces)`` messages of ``nbytes`` each under ``key``,
    with ``common_aad`` for all or ``each_aad`` (one a message; None: no AAD). ``nonces``:
    a list of bytes, or their rows in an N x (nonce length) uint8 array. ``h``: the key's
    GHASH key where the caller keeps it."""
    h = ghash.hash_subkey(key) if h is None else h
    rows = nonces if isinstance(nonces, np.ndarray) else None
    if rows is None and len(nonces) == 1 and len(nonces[0]) == 12:  # (a lone message:
        aad = common_aad if each_aad is None else each_aad[0]  # no NumPy for 16 bytes)
        return MessagePlan(1, nbytes, bytes(nonces[0]) + b"\0\0\0\1",
                           _aad_share(h, aad, nbytes), True)
    if rows is None and set(map(len, nonces)) == {12}:
        rows = np.frombuffer(b"".join(nonces), np.uint8).reshape(len(nonces), 12)
    if rows is not None and rows.shape[1] == 12:  # (J0 = nonce || 1, for all at once)
        j0s = _nonces_and_one(rows)
    else:
        listed = nonces if rows is None else list(map(bytes, rows))
        j0s = b"".join(ghash.initial_counter(h, bytes(nonce)) for nonce in listed)
    if each_aad is None:
        return MessagePlan(len(nonces), nbytes, j0s, _aad_share(h, common_aad, nbytes), True)
    masks = [_aad_share(h, aad, nbytes) or bytes(TAG_SIZE) for aad in each_aad]
    return MessagePlan(len(nonces), nbytes, j0s, b"".join(masks), False)


_NONCE_AND_COUNTER = np.dtype([("nonce", "V12"), ("counter", ">u4")])


def _nonces_and_one(rows: np.ndarray) -> np.ndarray:
    """The J0s of 12-byte nonces (N x 12 bytes), each nonce || 00000001, as N x 16 bytes
    in one uint8 array. As records of a 12-byte field and a number, one copy a field:
    65,536 J0s in 0.3 ms on the CI kind, against 1.7 ms filled as columns of bytes."""
    j0s = np.empty(len(rows), _NONCE_AND_COUNTER)
    j0s["nonce"] = np.ascontiguousarray(rows).view("V12").reshape(-1)
    j0s["counter"] = 1
    return j0s.view(np.uint8)


def _aad_share(h: int, data: bytes | None, text_bytes: int) -> bytes | None:
    """The share of AAD ``data`` in the tag of a message of ``text_bytes`` (None: no
    AAD): its GHASH (blocks zero-padded) times H^(text blocks + 1), and its bit length
    in the length block, times H."""
    if not data:
        return None
    text_blocks = -(-text_bytes // BLOCK_SIZE)
    share = ghash.multiply(ghash.ghash(h, data), ghash.power(h, text_blocks + 1))
    share ^= ghash.multiply(ghash.length_block(len(data), 0), h)
    return ghash.int_to_block(share)


class _Uploaded(NamedTuple):
    j0s: Any
    masks: Any


def _upload(kernels: ChunkKernels, messages: MessagePlan) -> _Uploaded:
    """The plan's J0s and masks on the device (the kernel knows the messages' one
    length); a lone message's J0 goes by value instead (Messages.j0: an upload from
    pageable memory waits for the stream, and each is an allocation and a copy in a
    call of a few microseconds)."""
    j0s = None
    if messages.count > 1:
        j0s = kernels.scratch(len(messages.j0s))
        kernels.upload(j0s, messages.j0s)
    masks = None
    if messages.masks is not None:
        masks = kernels.scratch(len(messages.masks))
        kernels.upload(masks, messages.masks)
    return _Uploaded(j0s, masks)


def _batches(messages: MessagePlan) -> list[tuple[int, int]]:
    per_batch = max(1, _BATCH_BYTES // messages.nbytes)
    return [(first, min(per_batch, messages.count - first))
            for first in range(0, messages.count, per_batch)]


def _launch_messages(uploaded: _Uploaded, messages: MessagePlan, first: int) -> Messages:
    """The kernel's view of a batch from message ``first``."""
    step = 0 if messages.one_mask else 1
    masks = None if uploaded.masks is None else uploaded.masks.at(
        first * TAG_SIZE * step, uploaded.masks.nbytes - first * TAG_SIZE * step)
    if uploaded.j0s is None:  # (a lone message: its J0 by value)
        return Messages(None, messages.nbytes // BLOCK_SIZE, masks, step, bytes(messages.j0s))
    return Messages(uploaded.j0s.at(first * BLOCK_SIZE, uploaded.j0s.nbytes - first * BLOCK_SIZE),
                    messages.nbytes // BLOCK_SIZE, masks, step)


def _check_taken(kernels: ChunkKernels, *spans: Any) -> None:
    if not (kernels.takes_messages and all(kernels.aligned(span) for span in spans)):
        raise NotTaken


def seal(kernels: ChunkKernels, messages: MessagePlan, plaintext: Any, sealed: Any) -> None:
    """The messages in ``plaintext`` (rows of ``nbytes``) sealed into ``sealed`` (rows of
    ``nbytes + 16``: the ciphertext, then the tag). Raises :class:`NotTaken` before any
    work where the kernels cannot take them."""
    _check_taken(kernels, plaintext, sealed)
    uploaded = _upload(kernels, messages)
    blocks = messages.nbytes // BLOCK_SIZE
    for first, count in _batches(messages):
        source = plaintext.at(first * messages.nbytes, count * messages.nbytes)
        width = messages.nbytes + TAG_SIZE
        target = sealed.at(first * width, count * width)
        kernels.crypt_and_tags(source, target, count, count * blocks,
                               _launch_messages(uploaded, messages, first),
                               (blocks, blocks + 1),
                               target.at(messages.nbytes, target.nbytes - messages.nbytes),
                               blocks + 1, sealing=True, check=None)


def open_rows(kernels: ChunkKernels, messages: MessagePlan, sealed: Any,
              plaintext: Any, meanwhile: Callable[[], Any] | None = None) -> int:
    """The messages in ``sealed`` (rows of ``nbytes + 16``) opened into ``plaintext`` (rows
    of ``nbytes``), every tag compared on the device: the index of the first message
    whose tag failed, or the count where none did. The plaintext of every row is written
    either way; the caller zeroes the failed rows before it releases any of it. Returns
    once the work is done (reading the verdict waits for it); ``meanwhile`` is called
    while the device works, before that wait (the caller's own checks of the batch).
    Raises :class:`NotTaken` before any work where the kernels cannot take them."""
    _check_taken(kernels, sealed, plaintext)
    uploaded = _upload(kernels, messages)
    blocks = messages.nbytes // BLOCK_SIZE
    width = messages.nbytes + TAG_SIZE
    verdict = kernels.verdict()
    for first, count in _batches(messages):
        source = sealed.at(first * width, count * width)
        target = plaintext.at(first * messages.nbytes, count * messages.nbytes)
        check = TagCheck(source.at(messages.nbytes, source.nbytes - messages.nbytes),
                         blocks + 1, verdict, first)
        kernels.crypt_and_tags(source, target, count, count * blocks,
                               _launch_messages(uploaded, messages, first),
                               (blocks + 1, blocks), None, 0, sealing=False, check=check)
    if meanwhile is not None:
        meanwhile()
    index, _ = kernels.read_verdict(verdict, None)
    return messages.count if index == NO_MISMATCH else index


class Sealing:
    """:func:`seal` as the work of an engine's array call (``work(kernels, source,
    target)``), with the result's size."""

    def __init__(self, messages: MessagePlan) -> None:
        self.messages = messages
        self.result_bytes = messages.count * (messages.nbytes + TAG_SIZE)

    def __call__(self, kernels: ChunkKernels, source: Any, target: Any) -> None:
        seal(kernels, self.messages, source, target)


class Opening:
    """:func:`open_rows` as the work of an engine's array call, with the result's size,
    and the index it found (``first_failed``) once it has run."""

    def __init__(self, messages: MessagePlan, meanwhile: Callable[[], Any] | None = None
                 ) -> None:
        self.messages = messages
        self.meanwhile = meanwhile
        self.result_bytes = messages.count * messages.nbytes
        self.first_failed = messages.count

    def __call__(self, kernels: ChunkKernels, source: Any, target: Any) -> None:
        self.first_failed = open_rows(kernels, self.messages, source, target, self.meanwhile)
