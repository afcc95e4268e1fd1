"""The chunked message format: C2SP chunked-encryption with AES-256-GCM, on the device.

This implements https://c2sp.org/chunked-encryption (v1) with HKDF-Expand over
SHA-512 and the AEAD ``AEAD_AES_256_GCM``:

* ``key(32) || base_nonce(12) || commitment(32) = HKDF-Expand(prk=input key,
  info="c2sp.org/chunked-encryption@v1+" || "AEAD_AES_256_GCM" || 0x00 || salt(24)
  || context, L=76)``;
* ciphertext = salt || commitment || the sealed chunks;
* the plaintext splits into 16384-byte chunks and a final chunk that is always
  shorter (possibly empty); chunk ``k`` is AES-256-GCM with empty AAD under
  ``base_nonce XOR k`` (big-endian, 12 bytes) and sits at ciphertext offset
  ``56 + k * 16400``.

Decryption checks the commitment before any chunk (a mismatch means a wrong key
or context), authenticates every chunk before releasing its plaintext, treats a
missing short final chunk as truncation, and fails on anything after it.

Many chunks go to the device per launch (``batch_chunks``, 1024 = 16 MiB by
default): the GCM kernels take one chunk per message slot and compute the tags
on the device (:meth:`aescl.gcm.GcmEngine.seal_messages`). Runs of full chunks
stream through the device's overlapped pipeline (aescl._pipeline), and the
device also converts between the sealed layout and its slots
(cl/chunk_layout.cl), so the host touches each byte once.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any, BinaryIO

import numpy as np
import pyopencl as cl

from ._arrays import BytesLike, finish, input_array, output_array
from ._pipeline import FileSink, FileSource, Launch, Piece, copy_parts, pipeline
from ._streams import read_full
from .devices import Device, resolve
from .errors import (
    AuthenticationError,
    CounterOverflowError,
    FormatError,
    TruncatedError,
    WrongKeyError,
)
from .gcm import GcmEngine
from .kernels import kernel
from .tuning import launch_config

KEY_SIZE = 32
SALT_SIZE = 24
COMMITMENT_SIZE = 32
HEADER_SIZE = SALT_SIZE + COMMITMENT_SIZE  # 56
NONCE_SIZE = 12
TAG_SIZE = 16
CHUNK_SIZE = 16384
SEALED_CHUNK_SIZE = CHUNK_SIZE + TAG_SIZE  # 16400
MAX_CHUNKS = 2**38
DEFAULT_BATCH_CHUNKS = 1024

INFO_PREFIX = b"c2sp.org/chunked-encryption@v1+"
AEAD_NAME = b"AEAD_AES_256_GCM"


def hkdf_expand_sha512(prk: bytes, info: bytes, length: int) -> bytes:
    """HKDF-Expand (RFC 5869, section 2.3) with HMAC-SHA-512."""
    output, block, counter = b"", b"", 1
    while len(output) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha512).digest()
        output += block
        counter += 1
    return output[:length]


def derive(key: bytes, salt: bytes, context: bytes) -> tuple[bytes, bytes, bytes]:
    """(chunk key, base nonce, commitment) for one message."""
    _check_key(key)
    if len(salt) != SALT_SIZE:
        raise ValueError(f"the salt must be {SALT_SIZE} bytes, not {len(salt)}")
    info = INFO_PREFIX + AEAD_NAME + b"\x00" + bytes(salt) + bytes(context)
    material = hkdf_expand_sha512(bytes(key), info, KEY_SIZE + NONCE_SIZE + COMMITMENT_SIZE)
    return (
        material[:KEY_SIZE],
        material[KEY_SIZE : KEY_SIZE + NONCE_SIZE],
        material[KEY_SIZE + NONCE_SIZE :],
    )


def _check_key(key: bytes) -> None:
    if len(key) != KEY_SIZE:
        raise ValueError(f"the chunked format takes a {KEY_SIZE}-byte key, not {len(key)} bytes")


def chunk_nonce(base_nonce: bytes, index: int) -> bytes:
    """The GCM nonce of chunk ``index``: the base nonce XOR the big-endian index."""
    return (int.from_bytes(base_nonce, "big") ^ index).to_bytes(NONCE_SIZE, "big")


def chunk_offset(index: int, raw: bool = False) -> int:
    """Where sealed chunk ``index`` starts in the ciphertext."""
    return (0 if raw else HEADER_SIZE) + index * SEALED_CHUNK_SIZE


def sealed_size(message_bytes: int, raw: bool = False) -> int:
    """The ciphertext length of a message of ``message_bytes`` bytes."""
    return chunk_offset(message_bytes // CHUNK_SIZE, raw) + message_bytes % CHUNK_SIZE + TAG_SIZE


class ChunkCipher:
    """Seals and opens runs of consecutive chunks under one (key, base nonce): raw mode.

    A run is some full chunks, optionally followed by the final short chunk;
    it goes to the device in one launch.
    """

    def __init__(self, key: bytes, base_nonce: bytes, device: Device | str | None = None) -> None:
        _check_key(key)
        if len(base_nonce) != NONCE_SIZE:
            raise ValueError(f"the base nonce must be {NONCE_SIZE} bytes, not {len(base_nonce)}")
        self._device = resolve(device)
        self._engine = GcmEngine(bytes(key), self._device, "host")
        self._base_nonce = np.frombuffer(bytes(base_nonce), dtype=np.uint8)
        # J0 of chunk 0 as the AES core's four columns (cl/chunk_layout.cl).
        self._base_j0 = np.frombuffer(bytes(base_nonce) + b"\x00\x00\x00\x01",
                                      dtype="<u4").view(cl.cltypes.uint4)[0]

    @staticmethod
    def _check_chunk_range(first: int, count: int) -> None:
        if first + count > MAX_CHUNKS:
            raise CounterOverflowError("the message exceeds 2^38 chunks (4 PiB)")

    def _j0s(self, first: int, count: int) -> np.ndarray:
        self._check_chunk_range(first, count)
        j0s = np.zeros((count, 16), dtype=np.uint8)
        j0s[:, :NONCE_SIZE] = self._base_nonce
        indices = np.arange(first, first + count, dtype=">u8").view(np.uint8).reshape(count, 8)
        j0s[:, 4:NONCE_SIZE] ^= indices  # the index, big-endian, in the nonce's last 8 bytes
        j0s[:, 15] = 1
        return j0s

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
        make.set_args(self._base_j0, np.uint64(first), np.uint32(count), counters, lengths)
        group = self._launch_config.work_group_size
        cl.enqueue_nd_range_kernel(queue, make, (-(-count // group) * group,), (group,))
        return self._engine.full_slots_batch(buffer, CHUNK_SIZE, count, counters, lengths,
                                             scratch)

    def _seal_launch(self, first: int, count: int) -> Launch:
        """Device work of sealing full chunks: plaintext slots in, sealed layout out."""
        def launch(queue: Any, slots: Any, sealed: Any, scratch: dict[str, Any]) -> Any:
            batch = self._full_chunks_batch(queue, slots, first, count, scratch)
            batch.crypt()
            batch.hash()
            return self._enqueue_layout(queue, "chunks_pack",
                                        (slots, batch.tags_buffer, sealed), count)
        return launch

    def _open_launch(self, first: int, count: int) -> Launch:
        """Device work of opening full chunks: sealed layout in; out, the plaintext slots,
        then the computed tags, then the received tags (see :meth:`_checked`)."""
        def launch(queue: Any, sealed: Any, out: Any, scratch: dict[str, Any]) -> Any:
            text_blocks = count * (CHUNK_SIZE // 16)
            self._enqueue_layout(queue, "chunks_unpack",
                                 (sealed, out, np.uint32(text_blocks + count)), count)
            batch = self._full_chunks_batch(queue, out, first, count, scratch)
            batch.hash()  # over the ciphertext, before it is decrypted in place
            cl.enqueue_copy(queue, out, batch.tags_buffer, byte_count=TAG_SIZE * count,
                            dst_offset=16 * text_blocks)
            return batch.crypt()[-1]
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

    def _runs(self, first: int, count: int, batch_chunks: int, opening: bool
              ) -> Iterator[tuple[int, int, Piece]]:
        """Runs of at most ``batch_chunks`` full chunks from chunk ``first`` on, as
        (chunks before the run, chunks in it, a pipeline piece with its launch and
        sizes); the caller attaches the piece's input and output. An opening piece's
        output is the plaintext, then the computed and the received tags."""
        self._check_chunk_range(first, count)
        for start in range(first, first + count, batch_chunks):
            chunks = min(batch_chunks, first + count - start)
            if opening:
                piece = Piece(chunks * SEALED_CHUNK_SIZE, chunks * (CHUNK_SIZE + 2 * TAG_SIZE),
                              self._open_launch(start, chunks))
            else:
                piece = Piece(chunks * CHUNK_SIZE, chunks * SEALED_CHUNK_SIZE,
                              self._seal_launch(start, chunks))
            yield start - first, chunks, piece

    def seal_full(self, plaintext: np.ndarray, sealed: np.ndarray, first: int,
                  batch_chunks: int = DEFAULT_BATCH_CHUNKS) -> None:
        """Seal whole chunks ``first, ...`` of ``plaintext`` into ``sealed`` (16400 bytes
        each). Either array may be pinned memory (aescl.pinned_empty)."""
        def piece(done: int, chunks: int, piece: Piece) -> Piece:
            return Piece.through(
                self._device, plaintext[done * CHUNK_SIZE :][: chunks * CHUNK_SIZE],
                sealed[done * SEALED_CHUNK_SIZE :][: chunks * SEALED_CHUNK_SIZE], piece.launch)

        count = plaintext.nbytes // CHUNK_SIZE
        pipeline(self._device).run(
            piece(*run) for run in self._runs(first, count, batch_chunks, opening=False))

    def open_full(self, sealed: np.ndarray, plaintext: np.ndarray, first: int,
                  batch_chunks: int = DEFAULT_BATCH_CHUNKS) -> None:
        """Open whole sealed chunks into ``plaintext``. Each run's plaintext is copied out
        only after all of its tags matched; a failure raises AuthenticationError, and
        the runs before it have been written."""
        def piece(done: int, chunks: int, piece: Piece) -> Piece:
            target = plaintext[done * CHUNK_SIZE :][: chunks * CHUNK_SIZE]
            piece.read_from(
                self._device, sealed[done * SEALED_CHUNK_SIZE :][: chunks * SEALED_CHUNK_SIZE])
            piece.store = lambda result: copy_parts(
                target, self._checked(result, first + done, chunks))
            return piece

        count = sealed.nbytes // SEALED_CHUNK_SIZE
        pipeline(self._device).run(
            piece(*run) for run in self._runs(first, count, batch_chunks, opening=True))

    def seal_file(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                  batch_chunks: int = DEFAULT_BATCH_CHUNKS,
                  progress: Callable[[int], None] | None = None) -> None:
        """Seal ``count`` full chunks read from ``source`` into ``sink``: reads land in
        pinned staging and writes leave from it, overlapped with the device."""
        self._file_runs(source, sink, first, count, batch_chunks, progress, opening=False)

    def open_file(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                  batch_chunks: int = DEFAULT_BATCH_CHUNKS,
                  progress: Callable[[int], None] | None = None) -> None:
        """Open ``count`` full sealed chunks from ``source`` into ``sink``, writing each
        run only after all of its tags matched."""
        self._file_runs(source, sink, first, count, batch_chunks, progress, opening=True)

    def _file_runs(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                   batch_chunks: int, progress: Callable[[int], None] | None,
                   opening: bool) -> None:
        out_bytes = CHUNK_SIZE if opening else SEALED_CHUNK_SIZE
        reads, writes = FileSource(source), FileSink(sink, count * out_bytes)

        def piece(done: int, chunks: int, piece: Piece) -> Piece:
            def store(result: np.ndarray) -> list[Callable[[], None]]:
                data = self._checked(result, first + done, chunks) if opening else result
                if progress:
                    progress(piece.in_bytes)
                return writes.store(data)
            piece.load, piece.store = reads.load(piece.in_bytes), store
            return piece

        try:
            pipeline(self._device).run(
                piece(*run) for run in self._runs(first, count, batch_chunks, opening))
        finally:
            reads.close()
            writes.close()

    def seal(self, plaintext: BytesLike, first: int, final: bool) -> np.ndarray:
        """Seal chunks ``first, first+1, ...``; with ``final`` the last one is the short final one.

        Without ``final`` the plaintext must be whole chunks. Returns the sealed
        chunks as a uint8 array, which every writer and ``bytes.join`` accept:
        converting to ``bytes`` here would cost a copy as slow as the device work.
        """
        source = input_array(plaintext)
        full, rest = divmod(source.nbytes, CHUNK_SIZE)
        if rest and not final:
            raise ValueError("only the final chunk may be shorter than 16384 bytes")
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
        full, rest = divmod(source.nbytes, SEALED_CHUNK_SIZE)
        if final and rest < TAG_SIZE:
            raise TruncatedError(f"truncated: chunk {first + full} is cut short")
        if rest and not final:
            raise ValueError("only the final sealed chunk may be shorter than 16400 bytes")
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


def _random_salt(salt: bytes | None) -> bytes:
    # `salt=` exists for tests and test vectors only: a salt must never repeat for a key.
    return os.urandom(SALT_SIZE) if salt is None else bytes(salt)


def _open_header(key: bytes, header: bytes, context: bytes) -> tuple[bytes, bytes]:
    """Check the commitment; returns (chunk key, base nonce)."""
    if len(header) < HEADER_SIZE:
        raise TruncatedError("truncated: the input is shorter than the 56-byte salt and commitment")
    chunk_key, base_nonce, commitment = derive(key, header[:SALT_SIZE], context)
    if not hmac.compare_digest(commitment, header[SALT_SIZE:HEADER_SIZE]):
        raise WrongKeyError("wrong key or context: the key commitment does not match")
    return chunk_key, base_nonce


def _seal_all(cipher: ChunkCipher, message: np.ndarray, batch_chunks: int,
              sealed: np.ndarray) -> None:
    full = message.nbytes // CHUNK_SIZE
    cipher.seal_full(message[: full * CHUNK_SIZE], sealed[: full * SEALED_CHUNK_SIZE], 0,
                     batch_chunks)
    sealed[full * SEALED_CHUNK_SIZE :] = cipher.seal(message[full * CHUNK_SIZE :], full,
                                                     final=True)


def _opened_size(body_bytes: int) -> int:
    """The plaintext size of a body, or TruncatedError when it cannot end in a final chunk."""
    full, rest = divmod(body_bytes, SEALED_CHUNK_SIZE)
    if rest == 0:  # nothing, or only full chunks: no final chunk
        raise TruncatedError("truncated: the final chunk is missing")
    if rest < TAG_SIZE:
        raise TruncatedError(f"truncated: chunk {full} is cut short")
    return full * CHUNK_SIZE + rest - TAG_SIZE


def _open_all(cipher: ChunkCipher, body: np.ndarray, batch_chunks: int,
              plaintext: np.ndarray) -> None:
    full = body.nbytes // SEALED_CHUNK_SIZE
    try:
        cipher.open_full(body[: full * SEALED_CHUNK_SIZE], plaintext[: full * CHUNK_SIZE], 0,
                         batch_chunks)
        plaintext[full * CHUNK_SIZE :] = cipher.open(body[full * SEALED_CHUNK_SIZE :], full,
                                                     final=True)
    except Exception:
        plaintext[:] = 0  # runs that passed stay unreleased when a later one fails
        raise


def encrypt_raw(
    key: bytes, base_nonce: bytes, message: BytesLike, *, device: Device | str | None = None,
    batch_chunks: int = DEFAULT_BATCH_CHUNKS, output: Any = None,
) -> bytes | None:
    """Raw mode (the spec's appendix): chunks under a caller's key and base nonce, no header.

    The caller must derive ``key`` and ``base_nonce`` uniformly at random and never
    reuse them; this is a building block for protocols and test vectors. With
    ``output`` (``sealed_size(len(message), raw=True)`` bytes, pinned memory from
    :func:`aescl.pinned_empty` is fastest) the result goes there and None is returned.
    """
    source = input_array(message)
    size = sealed_size(source.nbytes, raw=True)
    sealed = np.empty(size, np.uint8) if output is None else output_array(output, size)
    _seal_all(ChunkCipher(key, base_nonce, device), source, batch_chunks, sealed)
    return finish(sealed, output)


def decrypt_raw(
    key: bytes, base_nonce: bytes, ciphertext: BytesLike, *,
    device: Device | str | None = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    output: Any = None,
) -> bytes | None:
    """Raw mode decryption: every chunk authenticated, truncation detected. On failure
    nothing is returned, and an ``output`` buffer is left zeroed."""
    body = input_array(ciphertext)
    size = _opened_size(body.nbytes)
    plaintext = np.empty(size, np.uint8) if output is None else output_array(output, size)
    _open_all(ChunkCipher(key, base_nonce, device), body, batch_chunks, plaintext)
    return finish(plaintext, output)


def encrypt(
    key: bytes, message: BytesLike, context: bytes = b"", *, salt: bytes | None = None,
    device: Device | str | None = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
) -> bytes:
    """Encrypt a whole message: salt || commitment || sealed chunks.

    ``key`` is 32 uniformly random bytes. A fresh random salt makes every
    encryption use a new chunk key and base nonce. ``salt=`` is for tests only.
    """
    salt = _random_salt(salt)
    chunk_key, base_nonce, commitment = derive(key, salt, context)
    body = encrypt_raw(chunk_key, base_nonce, message, device=device, batch_chunks=batch_chunks)
    assert body is not None
    return salt + commitment + body


def decrypt(
    key: bytes, ciphertext: BytesLike, context: bytes = b"", *,
    device: Device | str | None = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
) -> bytes:
    """Decrypt and authenticate a whole message, or raise (no plaintext is returned then).

    :class:`WrongKeyError`: the commitment does not match (wrong key or context).
    :class:`AuthenticationError`: a chunk was modified, reordered or added.
    :class:`TruncatedError`: the message was cut short.
    """
    data = input_array(ciphertext)
    chunk_key, base_nonce = _open_header(key, data[:HEADER_SIZE].tobytes(), context)
    plaintext = decrypt_raw(
        chunk_key, base_nonce, data[HEADER_SIZE:], device=device, batch_chunks=batch_chunks
    )
    assert plaintext is not None
    return plaintext


class Writer:
    """Streaming encryption into a binary file object, with bounded memory.

    Writes the salt and commitment at once, then sealed chunks a batch at a
    time; :meth:`close` (or leaving a ``with`` block normally) writes the final
    chunk. Leaving the block by an exception does NOT: the output then lacks
    its final chunk and will not decrypt, rather than look complete.
    The sink is not closed.
    """

    def __init__(
        self, sink: BinaryIO, key: bytes, context: bytes = b"", *, salt: bytes | None = None,
        device: Device | str | None = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    ) -> None:
        salt = _random_salt(salt)
        chunk_key, base_nonce, commitment = derive(key, salt, context)
        self._cipher = ChunkCipher(chunk_key, base_nonce, device)
        self._sink = sink
        self._batch_chunks = batch_chunks
        self._batch_bytes = batch_chunks * CHUNK_SIZE
        self._buffer = bytearray()
        self._next_chunk = 0
        self._closed = False
        self.bytes_in = 0
        sink.write(salt + commitment)

    def write(self, data: BytesLike) -> int:
        if self._closed:
            raise ValueError("write to a closed Writer")
        view = memoryview(input_array(data))
        self._buffer += view
        self.bytes_in += len(view)
        while len(self._buffer) >= self._batch_bytes:  # full chunks are never final
            batch = memoryview(self._buffer)[: self._batch_bytes]
            self._sink.write(self._cipher.seal(batch, self._next_chunk, final=False))
            batch.release()
            del self._buffer[: self._batch_bytes]
            self._next_chunk += self._batch_bytes // CHUNK_SIZE
        return len(view)

    def write_file(self, source: BinaryIO, length: int,
                   progress: Callable[[int], None] | None = None) -> None:
        """Encrypt exactly ``length`` bytes read from ``source`` (a file whose size is
        known): whole chunks stream through the device's pipeline straight from and
        to the files; the rest stays buffered for :meth:`close`."""
        if self._closed:
            raise ValueError("write to a closed Writer")
        if self._buffer:  # chunk boundaries are not where the file starts
            while length and (block := read_full(source, min(length, self._batch_bytes))):
                self.write(block)
                length -= len(block)
            return
        full = length // CHUNK_SIZE
        self._cipher.seal_file(source, self._sink, self._next_chunk, full, self._batch_chunks,
                               progress)
        self._next_chunk += full
        self.bytes_in += full * CHUNK_SIZE
        rest = read_full(source, length - full * CHUNK_SIZE)
        if len(rest) < length - full * CHUNK_SIZE:
            raise TruncatedError("truncated: the input ended early (did it change while "
                                 "being read?)")
        self.write(rest)
        if progress:
            progress(len(rest))

    def close(self) -> None:
        """Seal what is buffered, ending with the final short chunk. Idempotent."""
        if not self._closed:
            self._sink.write(self._cipher.seal(self._buffer, self._next_chunk, final=True))
            self._buffer.clear()
            self._closed = True

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self._closed = True  # an aborted message stays visibly incomplete


class Reader:
    """Streaming decryption from a binary file object: releases only authenticated chunks.

    The commitment is checked when the Reader is created. :meth:`read` returns
    plaintext a batch of chunks at a time, each chunk authenticated first, and
    ``b""`` only after the final short chunk has been authenticated. A missing
    final chunk raises :class:`TruncatedError` at the point the data ends. Once
    a read has failed, every later read raises the same error.
    """

    def __init__(
        self, source: BinaryIO, key: bytes, context: bytes = b"", *,
        device: Device | str | None = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    ) -> None:
        self._source = source
        chunk_key, base_nonce = _open_header(key, read_full(source, HEADER_SIZE), context)
        self._cipher = ChunkCipher(chunk_key, base_nonce, device)
        self._batch_chunks = batch_chunks
        self._batch_bytes = batch_chunks * SEALED_CHUNK_SIZE
        self._next_chunk = 0
        self._plaintext = bytearray()
        self._finished = False
        self._error: Exception | None = None

    def _fill(self) -> None:
        data = read_full(self._source, self._batch_bytes)
        if len(data) == self._batch_bytes:  # all full chunks; the final one comes later
            plaintext = self._cipher.open(data, self._next_chunk, final=False)
            self._next_chunk += len(data) // SEALED_CHUNK_SIZE
        elif len(data) % SEALED_CHUNK_SIZE == 0:
            raise TruncatedError("truncated: the input ends without its final chunk")
        else:
            plaintext = self._cipher.open(data, self._next_chunk, final=True)
            self._finished = True
        self._plaintext += memoryview(plaintext)  # not `+= array`: numpy would add them

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of authenticated plaintext (all of it if negative)."""
        if self._error is not None:
            raise self._error
        try:
            while (size < 0 or len(self._plaintext) < size) and not self._finished:
                self._fill()
        except Exception as exc:
            self._error = exc
            raise
        count = len(self._plaintext) if size < 0 else min(size, len(self._plaintext))
        with memoryview(self._plaintext) as view:
            out = bytes(view[:count])  # one copy; slicing the bytearray would add another
        del self._plaintext[:count]
        return out

    def read_file(self, sink: BinaryIO, body_bytes: int,
                  progress: Callable[[int], None] | None = None) -> None:
        """Decrypt the whole message into ``sink`` when the sealed chunks that follow the
        header are ``body_bytes`` long (a file whose size is known). Whole chunks stream
        through the device's pipeline; each run is written only after all of its tags
        matched, and the final chunk is authenticated last."""
        if self._error is not None:
            raise self._error
        if self._next_chunk or self._plaintext or self._finished:
            raise ValueError("read_file must be the first read")
        try:
            _opened_size(body_bytes)
            full, rest = divmod(body_bytes, SEALED_CHUNK_SIZE)
            self._cipher.open_file(self._source, sink, 0, full, self._batch_chunks, progress)
            self._next_chunk = full
            final = read_full(self._source, rest)
            if len(final) < rest:
                raise TruncatedError("truncated: the input ended early (did it change while "
                                     "being read?)")
            if self._source.read(1):
                raise FormatError("the input grew while it was being read")
            sink.write(memoryview(self._cipher.open(final, full, final=True)))
            self._finished = True
            if progress:
                progress(rest)
        except Exception as exc:
            self._error = exc
            raise

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def decrypt_range(
    key: bytes, source: BinaryIO | BytesLike, offset: int, length: int, context: bytes = b"",
    *, device: Device | str | None = None,
) -> bytes:
    """Random access: bytes ``offset .. offset+length`` of the plaintext, authenticated.

    ``source`` is a seekable binary file or a bytes-like ciphertext. Only the
    chunks that hold the range are read and decrypted, after the commitment
    check. The message length comes from the ciphertext size; whenever the
    range reaches the end of the message, the final chunk is authenticated too,
    so a truncated ciphertext cannot pass for a shorter message.
    """
    if offset < 0 or length < 0:
        raise ValueError("offset and length must not be negative")
    total_bytes, read_at = _random_access(source)
    chunk_key, base_nonce = _open_header(key, read_at(0, HEADER_SIZE), context)
    final_index, final_sealed = divmod(total_bytes - HEADER_SIZE, SEALED_CHUNK_SIZE)
    if final_sealed < TAG_SIZE:
        raise TruncatedError("truncated: the ciphertext has no valid final chunk")
    message_bytes = final_index * CHUNK_SIZE + final_sealed - TAG_SIZE
    if length == 0 and offset < message_bytes:
        return b""
    if offset + length >= message_bytes:
        first, last = min(offset // CHUNK_SIZE, final_index), final_index
    else:
        first, last = offset // CHUNK_SIZE, (offset + length - 1) // CHUNK_SIZE
    sealed = read_at(chunk_offset(first), chunk_offset(last + 1) - chunk_offset(first))
    plaintext = ChunkCipher(chunk_key, base_nonce, device).open(
        sealed, first, final=last == final_index
    )
    start = offset - first * CHUNK_SIZE
    return plaintext[start : start + length].tobytes()


def _random_access(source: BinaryIO | BytesLike) -> tuple[int, Any]:
    """(size, read_at(start, count)) over a seekable file or a bytes-like object."""
    if hasattr(source, "seek"):
        stream: BinaryIO = source  # type: ignore[assignment]

        def read_at(start: int, count: int) -> bytes:
            stream.seek(start)
            return read_full(stream, count)

        return stream.seek(0, io.SEEK_END), read_at
    data = input_array(source)
    return data.nbytes, lambda start, count: data[start : start + count].tobytes()
