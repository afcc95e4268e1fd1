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

What the format is (derivation, nonces, offsets, the commitment) lives in
:mod:`aescl.chunkformat`; who seals the chunks is the scheduler's business: a
message's chunks are one job that :mod:`aescl.scheduler` splits over the
engines of the chosen devices (``device=`` takes a device, a spec, ``"all"`` or
a list), and any split gives the same bytes. On an OpenCL device many chunks go
to the device per launch (``batch_chunks``, 1024 = 16 MiB by default) through
its overlapped pipeline (aescl.engines.opencl); the host engine seals a chunk
per OpenSSL call on every core (aescl.engines.host).
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable
from typing import Any, BinaryIO

from ._arrays import (
    BytesLike,
    BytesResult,
    byte_view,
    check_apart,
    new_buffer,
    output_view,
    wipe,
)
from ._streams import read_full
from .chunkformat import (
    AEAD_NAME,
    CHUNK_SIZE,
    COMMITMENT_SIZE,
    HEADER_SIZE,
    INFO_PREFIX,
    KEY_SIZE,
    MAX_CHUNKS,
    NONCE_SIZE,
    SALT_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    chunk_nonce,
    chunk_offset,
    derive,
    hkdf_expand_sha512,
    sealed_size,
)
from .chunkformat import open_header as _open_header
from .chunkformat import opened_size as _opened_size
from .chunkformat import random_salt as _random_salt
from .engines import DEFAULT_BATCH_CHUNKS, MAX_BATCH_CHUNKS
from .engines.device_arrays import ArrayKind
from .engines.registry import array_kind_of
from .errors import FormatError, TruncatedError, check_whole_number
from .scheduler import TeamChunks
from .teams import DevicesSpec, array_device_rule, team

__all__ = [
    "AEAD_NAME", "CHUNK_SIZE", "COMMITMENT_SIZE", "DEFAULT_BATCH_CHUNKS", "HEADER_SIZE",
    "MAX_BATCH_CHUNKS",
    "INFO_PREFIX", "KEY_SIZE", "MAX_CHUNKS", "NONCE_SIZE", "SALT_SIZE", "SEALED_CHUNK_SIZE",
    "TAG_SIZE", "Reader", "Writer", "chunk_nonce", "chunk_offset", "decrypt",
    "decrypt_range", "decrypt_raw", "derive", "encrypt", "encrypt_raw", "hkdf_expand_sha512",
    "open_from_file", "seal_from_file", "sealed_size",
]


def _chunks(key: bytes, base_nonce: bytes, device: DevicesSpec, batch_chunks: int
            ) -> TeamChunks:
    check_whole_number("batch_chunks", batch_chunks, 1, MAX_BATCH_CHUNKS)
    return team(device).chunks(key, base_nonce, batch_chunks)


def _array_chunks(kind: ArrayKind, chunk_key: bytes, base_nonce: bytes, device: DevicesSpec
                  ) -> Any:
    """The engine's sealer and opener of device arrays of ``kind``, for the arrays that
    ``device`` allows (teams.array_device_rule)."""
    return kind.chunks(chunk_key, base_nonce, array_device_rule(kind.name, team(device)))


def _seal_all(cipher: TeamChunks, message: memoryview, sealed: memoryview) -> None:
    full = len(message) // CHUNK_SIZE
    cipher.seal_full(message[: full * CHUNK_SIZE], sealed[: full * SEALED_CHUNK_SIZE], 0)
    sealed[full * SEALED_CHUNK_SIZE :] = cipher.seal(message[full * CHUNK_SIZE :], full,
                                                     final=True)


def _open_all(cipher: TeamChunks, body: memoryview, plaintext: memoryview) -> None:
    full = len(body) // SEALED_CHUNK_SIZE
    try:
        cipher.open_full(body[: full * SEALED_CHUNK_SIZE], plaintext[: full * CHUNK_SIZE], 0)
        plaintext[full * CHUNK_SIZE :] = cipher.open(body[full * SEALED_CHUNK_SIZE :], full,
                                                     final=True)
    except Exception:
        wipe(plaintext)  # runs that passed stay unreleased when a later one fails
        raise


def encrypt_raw(
    key: bytes, base_nonce: bytes, message: BytesLike, *, device: DevicesSpec = None,
    batch_chunks: int = DEFAULT_BATCH_CHUNKS, output: Any = None,
) -> bytes | None:
    """Raw mode (the spec's appendix): chunks under a caller's key and base nonce, no header.

    The caller must derive ``key`` and ``base_nonce`` uniformly at random and never
    reuse them; this is a building block for protocols and test vectors. With
    ``output`` (``sealed_size(len(message), raw=True)`` bytes, pinned memory from
    :func:`aescl.pinned_empty` is fastest) the result goes there and None is returned.
    """
    source = byte_view(message)
    size = sealed_size(len(source), raw=True)
    result = BytesResult(size) if output is None else None
    sealed = result.view if result is not None else output_view(output, size)
    if result is None:
        check_apart(source, sealed)
    _seal_all(_chunks(key, base_nonce, device, batch_chunks), source, sealed)
    return result.done() if result is not None else None


def decrypt_raw(
    key: bytes, base_nonce: bytes, ciphertext: BytesLike, *,
    device: DevicesSpec = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    output: Any = None,
) -> bytes | None:
    """Raw mode decryption: every chunk authenticated, truncation detected. On failure
    nothing is returned, and an ``output`` buffer is left zeroed."""
    body = byte_view(ciphertext)
    size = _opened_size(len(body))
    result = BytesResult(size) if output is None else None
    plaintext = result.view if result is not None else output_view(output, size)
    if result is None:
        check_apart(body, plaintext)
    _open_all(_chunks(key, base_nonce, device, batch_chunks), body, plaintext)  # (wipes)
    return result.done() if result is not None else None


def encrypt(
    key: bytes, message: BytesLike, context: bytes = b"", *, salt: bytes | None = None,
    device: DevicesSpec = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS, output: Any = None,
) -> Any:
    """Encrypt a whole message: salt || commitment || sealed chunks.

    A device array (a pyopencl array; a CUDA array: torch, CuPy) is sealed on its own
    device into a new flat uint8 array of the same kind, byte for byte what host data
    gives for the same key and salt (docs/gpu-arrays.md). ``device`` then only
    restricts where the array may lie (``cuda``/``cuda:N`` for CUDA arrays, OpenCL
    devices for pyopencl arrays); ``batch_chunks`` does not apply.

    With ``output`` (``sealed_size(n)`` bytes that do not overlap the message: a
    writable host buffer for host data, an array of the same kind on the same device
    for a device array) the result goes there and None is returned. An ``output`` in
    the message's memory is refused (ValueError) before anything is written.

    ``key`` is 32 uniformly random bytes. A fresh random salt makes every
    encryption use a new chunk key and base nonce. ``salt=`` is for tests only.
    """
    salt = _random_salt(salt)
    chunk_key, base_nonce, commitment = derive(key, salt, context)
    kind = array_kind_of(message)
    if kind is not None:  # a device array: sealed on its device
        return _array_chunks(kind, chunk_key, base_nonce, device).seal(
            message, salt + commitment, sealed_size(kind.nbytes(message)), output)
    source = byte_view(message)
    if output is None:  # (header and chunks written once, into the bytes returned)
        result = BytesResult(sealed_size(len(source)))
        result.view[:HEADER_SIZE] = salt + commitment
        _seal_all(_chunks(chunk_key, base_nonce, device, batch_chunks), source,
                  result.view[HEADER_SIZE:])
        return result.done()
    target = output_view(output, sealed_size(len(source)))
    check_apart(source, target)  # (before the header is written)
    target[:HEADER_SIZE] = salt + commitment
    encrypt_raw(chunk_key, base_nonce, source, device=device, batch_chunks=batch_chunks,
                output=target[HEADER_SIZE:])
    return None


def decrypt(
    key: bytes, ciphertext: BytesLike, context: bytes = b"", *,
    device: DevicesSpec = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS, output: Any = None,
) -> Any:
    """Decrypt and authenticate a whole message, or raise (no plaintext is returned then).

    A device array is opened on its own device into a new flat uint8 array of the same
    kind; on a failed tag it raises, and the array it was opening into is zeroed.

    With ``output`` (the message's size, not overlapping the ciphertext, else refused;
    of the ciphertext's kind, as for :func:`encrypt`) the plaintext goes there and None
    is returned; a chunk that fails authentication leaves ``output`` zeroed, and what is
    refused before any chunk is opened (a wrong key, a cut message, an ``output`` that
    does not fit) leaves it as it was.

    :class:`WrongKeyError`: the commitment does not match (wrong key or context).
    :class:`AuthenticationError`: a chunk was modified, reordered or added.
    :class:`TruncatedError`: the message was cut short.
    """
    kind = array_kind_of(ciphertext)
    if kind is not None:  # a device array: opened into a new one on its device
        nbytes = kind.nbytes(ciphertext)
        header = kind.read(ciphertext, 0, min(nbytes, HEADER_SIZE))
        chunk_key, base_nonce = _open_header(key, header, context)
        return _array_chunks(kind, chunk_key, base_nonce, device).open(
            ciphertext, HEADER_SIZE, nbytes - HEADER_SIZE, 0, True,
            _opened_size(nbytes - HEADER_SIZE), output)
    data = byte_view(ciphertext)
    if output is not None:
        check_apart(data, output)  # (the header's bytes too: nothing of the input is written)
    chunk_key, base_nonce = _open_header(key, data[:HEADER_SIZE].tobytes(), context)
    return decrypt_raw(chunk_key, base_nonce, data[HEADER_SIZE:], device=device,
                       batch_chunks=batch_chunks, output=output)


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
        device: DevicesSpec = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    ) -> None:
        salt = _random_salt(salt)
        chunk_key, base_nonce, commitment = derive(key, salt, context)
        self._cipher = _chunks(chunk_key, base_nonce, device, batch_chunks)
        self._sink = sink
        self._batch_chunks = batch_chunks
        self._batch_bytes = batch_chunks * CHUNK_SIZE
        self._buffer = bytearray()
        self._next_chunk = 0
        self._closed = False
        self._error: Exception | None = None
        self.bytes_in = 0
        sink.write(salt + commitment)

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("write to a closed Writer")

    def _failed(self, exc: Exception) -> None:
        """A write that raised may have sealed chunks past ``_next_chunk``: their nonces
        are used, so the Writer is dead from here on (every later call raises ``exc``),
        never sealing other plaintext under them."""
        self._error = exc

    def write(self, data: BytesLike) -> int:
        self._check_open()
        try:
            return self._write(data)
        except Exception as exc:
            self._failed(exc)
            raise

    def _write(self, data: BytesLike) -> int:
        view = byte_view(data)
        self._buffer += view
        self.bytes_in += len(view)
        while len(self._buffer) >= self._batch_bytes:  # full chunks are never final
            batch = memoryview(self._buffer)[: self._batch_bytes]
            self._sink.write(self._cipher.seal(batch, self._next_chunk, final=False))
            batch.release()
            # A new buffer rather than resizing this one: a device may still hold an
            # export of the sealed bytes for a moment (a CPU device uses them in place).
            self._buffer = self._buffer[self._batch_bytes :]
            self._next_chunk += self._batch_bytes // CHUNK_SIZE
        return len(view)

    def write_file(self, source: BinaryIO, length: int,
                   progress: Callable[[int], None] | None = None) -> None:
        """Encrypt exactly ``length`` bytes read from ``source`` (a file whose size is
        known): whole chunks stream through the device's pipeline straight from and
        to the files; the rest stays buffered for :meth:`close`."""
        self._check_open()
        try:
            self._write_file(source, length, progress)
        except Exception as exc:
            self._failed(exc)
            raise

    def _write_file(self, source: BinaryIO, length: int,
                    progress: Callable[[int], None] | None) -> None:
        if self._buffer:  # chunk boundaries are not where the file starts
            while length:
                block = read_full(source, min(length, self._batch_bytes))
                if not block:
                    raise ended_early()
                self._write(block)
                length -= len(block)
                if progress:
                    progress(len(block))
            return
        full = length // CHUNK_SIZE
        seal_from_file(self._cipher, source, self._sink, self._next_chunk, full, progress)
        self._next_chunk += full
        self.bytes_in += full * CHUNK_SIZE
        rest = read_full(source, length - full * CHUNK_SIZE)
        if len(rest) < length - full * CHUNK_SIZE:
            raise ended_early()
        self._write(rest)
        if progress:
            progress(len(rest))

    def close(self) -> None:
        """Seal what is buffered, ending with the final short chunk. Idempotent once it
        has succeeded; after a failed write it raises that write's error."""
        if self._error is not None:
            raise self._error
        if not self._closed:
            try:
                self._sink.write(self._cipher.seal(self._buffer, self._next_chunk,
                                                   final=True))
            except Exception as exc:
                self._failed(exc)
                raise
            self._buffer = bytearray()
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
        device: DevicesSpec = None, batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    ) -> None:
        check_whole_number("batch_chunks", batch_chunks, 1, MAX_BATCH_CHUNKS)
        self._source = source
        chunk_key, base_nonce = _open_header(key, read_full(source, HEADER_SIZE), context)
        self._cipher = _chunks(chunk_key, base_nonce, device, batch_chunks)
        self._batch_chunks = batch_chunks
        self._batch_bytes = batch_chunks * SEALED_CHUNK_SIZE
        self._next_chunk = 0
        # Opened plaintext not yet read, in order: the engine's results as they came, each
        # copied once, into what read returns (not gathered into one buffer first).
        self._opened: deque[memoryview] = deque()
        self._opened_bytes = 0
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
        if len(plaintext):
            self._opened.append(byte_view(plaintext))
            self._opened_bytes += len(plaintext)

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of authenticated plaintext (all of it if negative)."""
        if self._error is not None:
            raise self._error
        try:
            while (size < 0 or self._opened_bytes < size) and not self._finished:
                self._fill()
        except Exception as exc:
            self._error = exc
            raise
        count = self._opened_bytes if size < 0 else min(size, self._opened_bytes)
        result, done = BytesResult(count), 0
        while done < count:
            head = self._opened[0]
            take = min(len(head), count - done)
            result.view[done : done + take] = head[:take]
            if take == len(head):
                self._opened.popleft()
            else:
                self._opened[0] = head[take:]
            done += take
        self._opened_bytes -= count
        return result.done()

    def read_file(self, sink: BinaryIO, body_bytes: int,
                  progress: Callable[[int], None] | None = None) -> None:
        """Decrypt the whole message into ``sink`` when the sealed chunks that follow the
        header are ``body_bytes`` long (a file whose size is known). Whole chunks stream
        through the device's pipeline; each run is written only after all of its tags
        matched, and the final chunk is authenticated last."""
        if self._error is not None:
            raise self._error
        if self._next_chunk or self._opened or self._finished:
            raise ValueError("read_file must be the first read")
        try:
            _opened_size(body_bytes)
            full, rest = divmod(body_bytes, SEALED_CHUNK_SIZE)
            open_from_file(self._cipher, self._source, sink, 0, full, progress)
            self._next_chunk = full
            final = read_full(self._source, rest)
            if len(final) < rest:
                raise ended_early()
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


# ---- streaming whole chunks between files ------------------------------------------


def ended_early() -> TruncatedError:
    """The error of a source that ended before the length it was read for."""
    return TruncatedError("truncated: the input ended early (did it change while being read?)")


def seal_from_file(cipher: TeamChunks, source: BinaryIO, sink: BinaryIO, first: int,
                   count: int, progress: Callable[[int], None] | None = None) -> None:
    """Seal ``count`` full chunks (message chunks ``first, ...``) read from ``source`` into
    ``sink``, in windows split over the team (:func:`_windows`)."""
    cipher = cipher.for_files(count)
    _windows(cipher, source, sink, first, count, CHUNK_SIZE, SEALED_CHUNK_SIZE,
             cipher.seal_full, progress)

def open_from_file(cipher: TeamChunks, source: BinaryIO, sink: BinaryIO, first: int,
                   count: int, progress: Callable[[int], None] | None = None) -> None:
    """Open ``count`` full sealed chunks from ``source`` into ``sink``, writing each
    window only after all of its chunks authenticated."""
    cipher = cipher.for_files(count)
    _windows(cipher, source, sink, first, count, SEALED_CHUNK_SIZE, CHUNK_SIZE,
             cipher.open_full, progress)

def _windows(cipher: TeamChunks, source: BinaryIO, sink: BinaryIO, first: int, count: int,
             in_size: int, out_size: int, crypt: Callable[[Any, Any, int], None],
             progress: Callable[[int], None] | None) -> None:
    """Read, split over the team (``cipher``'s, chosen for the whole job:
    :meth:`TeamChunks.for_files`) and write a window of ``batch_chunks`` chunks at a
    time, as the OpenCL pipeline's runs are: memory stays bounded, and an opened
    window is written only after every chunk in it authenticated. With more than
    one window, the next is read (one thread) and the last written (another) while
    a window is sealed or opened: two sets of windows take turns."""
    if count <= 0:
        return
    window = min(count, cipher.batch_chunks)
    # Windows in memory a GPU of the team reads directly, so that it can take part
    # beside the host's cores (scheduler.Team.taking_part). Not memory the host engine's
    # worker processes share: for files they measured slower than its threads
    # (docs/benchmarks: the windows' reads and writes are the job there).
    apart = [e for e in cipher.engines if not e.on_host_cores]
    allocate = apart[0].host_array if apart else new_buffer
    starts = range(0, count, window)
    sets = [(byte_view(allocate(window * in_size)), byte_view(allocate(window * out_size)))
            for _ in range(min(2, len(starts)))]

    def read(index: int) -> int:
        """Window ``index`` into its set's input; returns its chunks."""
        chunks = min(window, count - starts[index])
        view = sets[index % len(sets)][0][: chunks * in_size]
        got = 0
        while got < len(view):
            more = source.readinto(view[got:])  # type: ignore[attr-defined]
            if not more:
                raise ended_early()
            got += more
        return chunks

    def crypt_window(index: int, chunks: int) -> memoryview:
        data, out = sets[index % len(sets)]
        crypt(data[: chunks * in_size], out[: chunks * out_size], first + starts[index])
        if progress:
            progress(chunks * in_size)
        return out[: chunks * out_size]

    if len(starts) == 1:  # one window: no threads to start
        sink.write(crypt_window(0, read(0)))
        return
    from concurrent.futures import Future, ThreadPoolExecutor

    # Leaving the executors waits for their threads, after an error too: nothing
    # still reads into or writes from the windows once this returns.
    with ThreadPoolExecutor(1, "aescl-read") as reader, \
            ThreadPoolExecutor(1, "aescl-write") as writer:
        reading = reader.submit(read, 0)
        writing: list[Future[Any] | None] = [None, None]  # each set's output in flight
        for index in range(len(starts)):
            chunks = reading.result()
            if index + 1 < len(starts):  # into the other set's input, done with
                reading = reader.submit(read, index + 1)
            if (earlier := writing[index % 2]) is not None:
                earlier.result()  # this set's output is out before it is reused
            writing[index % 2] = writer.submit(sink.write, crypt_window(index, chunks))
        for pending in writing:
            if pending is not None:
                pending.result()


def decrypt_range(
    key: bytes, source: BinaryIO | BytesLike, offset: int, length: int, context: bytes = b"",
    *, device: DevicesSpec = None,
) -> bytes:
    """Random access: bytes ``offset .. offset+length`` of the plaintext, authenticated.

    ``source`` is a seekable binary file or a bytes-like ciphertext. Only the
    chunks that hold the range are read and decrypted, after the commitment
    check. The message length comes from the ciphertext size; whenever the
    range reaches the end of the message, the final chunk is authenticated too,
    so a truncated ciphertext cannot pass for a shorter message.

    A device array (``engines.device_arrays``) is opened on its own device: only
    the chunks that hold the range, into a new array of the same kind, of which the
    range is returned (a view; empty for ``length`` 0).
    """
    check_whole_number("offset", offset, 0)
    check_whole_number("length", length, 0)
    kind = array_kind_of(source)
    if kind is not None:
        return _array_range(kind, key, source, offset, length, context, device)
    total_bytes, read_at = _random_access(source)
    chunk_key, base_nonce = _open_header(key, bytes(read_at(0, HEADER_SIZE)), context)
    first, last, final_index, message_bytes = _range_chunks(total_bytes, offset, length)
    if length == 0 and offset < message_bytes:
        return b""
    sealed = read_at(chunk_offset(first), chunk_offset(last + 1) - chunk_offset(first))
    plaintext = _chunks(chunk_key, base_nonce, device, DEFAULT_BATCH_CHUNKS).open(
        sealed, first, final=last == final_index
    )
    start = offset - first * CHUNK_SIZE
    # The range's one copy out of the opened chunks, which begin and end at chunk
    # boundaries: into a result written in place (huge pages, no second copy).
    wanted = byte_view(plaintext)[start : start + length]  # (shorter past the end)
    result = BytesResult(len(wanted))
    result.view[:] = wanted
    return result.done()


def _range_chunks(total_bytes: int, offset: int, length: int) -> tuple[int, int, int, int]:
    """(first chunk, last chunk, final chunk's index, message bytes) of the chunks that
    hold a range of a message sealed in ``total_bytes`` (its header included)."""
    final_index, final_sealed = divmod(total_bytes - HEADER_SIZE, SEALED_CHUNK_SIZE)
    if final_sealed < TAG_SIZE:
        raise TruncatedError("truncated: the ciphertext has no valid final chunk")
    message_bytes = final_index * CHUNK_SIZE + final_sealed - TAG_SIZE
    if offset + length >= message_bytes:
        return min(offset // CHUNK_SIZE, final_index), final_index, final_index, message_bytes
    return (offset // CHUNK_SIZE, (offset + length - 1) // CHUNK_SIZE, final_index,
            message_bytes)


def _array_range(kind: ArrayKind, key: bytes, source: Any, offset: int, length: int,
                 context: bytes, device: DevicesSpec) -> Any:
    """:func:`decrypt_range` of a device array."""
    total_bytes = kind.nbytes(source)
    if total_bytes < HEADER_SIZE:
        raise TruncatedError("truncated: the ciphertext is shorter than its header")
    header = kind.read(source, 0, HEADER_SIZE)
    chunk_key, base_nonce = _open_header(key, header, context)
    first, last, final_index, message_bytes = _range_chunks(total_bytes, offset,
                                                            max(length, 1))
    final = last == final_index
    start = chunk_offset(first)
    nbytes = min(total_bytes, chunk_offset(last + 1)) - start
    out_bytes = (last - first) * CHUNK_SIZE + (
        message_bytes - final_index * CHUNK_SIZE if final else CHUNK_SIZE)
    opened = _array_chunks(kind, chunk_key, base_nonce, device).open(
        source, start, nbytes, first, final, out_bytes)
    skip = min(offset - first * CHUNK_SIZE, out_bytes)
    return opened[skip : skip + length]


def _random_access(source: BinaryIO | BytesLike) -> tuple[int, Any]:
    """(size, read_at(start, count)) over a seekable file or a bytes-like object: the
    bytes read from a file, or a view of the object's own (no copy of the sealed
    chunks; the engines read views)."""
    if hasattr(source, "seek"):
        stream: BinaryIO = source  # type: ignore[assignment]

        def read_at(start: int, count: int) -> bytes:
            stream.seek(start)
            return read_full(stream, count)

        return stream.seek(0, io.SEEK_END), read_at
    data = byte_view(source)
    return len(data), lambda start, count: data[start : start + count]
