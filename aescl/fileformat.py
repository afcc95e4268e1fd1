"""The ``aescl encrypt`` file format: a small versioned header, then the chunked payload.

Layout (docs/format.md#the-file-header)::

    magic "aescl\\0" (6) | version 1 (1) | key source (1) | [scrypt: log2 N (1) | r (1) | p (1)
    | salt (16)] | chunked payload (salt || commitment || chunks, AES-256-GCM)

The whole header is the chunked payload's ``context``, so changing any header
byte fails the commitment check like a wrong key does. The payload key is the
32-byte key file, or scrypt(passphrase, salt, N, r, p).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from . import chunked
from ._streams import read_full, read_small_file, remaining_file_bytes
from .atomicfile import NewFile
from .errors import FormatError, KeySourceError, TruncatedError
from .teams import DevicesSpec

MAGIC = b"aescl\x00"
VERSION = 1
KEY_FILE = 1
PASSPHRASE = 2
KEY_SOURCES = {KEY_FILE: "key file", PASSPHRASE: "passphrase"}

SCRYPT_SALT_SIZE = 16
DEFAULT_WORK_FACTOR = 17  # log2 N: 128 MiB of memory with r = 8, under a second
SCRYPT_R, SCRYPT_P = 8, 1
# Encryption offers log2 N from 10 to 20: 1 MiB to 1 GiB of memory with r = 8. What
# decryption accepts is the same, with r and p fixed at what encryption writes: a
# hostile header must not make scrypt exhaust memory or time (p = 16 with log2 N = 20
# cost 32 s of CPU before "wrong key"), as age fixes r and p and caps the work factor.
MIN_WORK_FACTOR, MAX_WORK_FACTOR = 10, 20
MAX_SCRYPT_MEMORY = 128 * SCRYPT_R << MAX_WORK_FACTOR  # 1 GiB

MAX_HEADER_SIZE = len(MAGIC) + 2 + 3 + SCRYPT_SALT_SIZE  # a passphrase header

READ_SIZE = 1 << 20
ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class Header:
    key_source: int
    work_factor: int = 0
    r: int = 0
    p: int = 0
    salt: bytes = b""

    def encode(self) -> bytes:
        head = MAGIC + bytes([VERSION, self.key_source])
        if self.key_source == PASSPHRASE:
            head += bytes([self.work_factor, self.r, self.p]) + self.salt
        return head

    @classmethod
    def new(cls, key_source: int, work_factor: int = DEFAULT_WORK_FACTOR) -> Header:
        if key_source == KEY_FILE:
            return cls(KEY_FILE)
        if not (isinstance(work_factor, int) and
                MIN_WORK_FACTOR <= work_factor <= MAX_WORK_FACTOR):
            raise ValueError(f"work_factor must be a whole number {MIN_WORK_FACTOR}.."
                             f"{MAX_WORK_FACTOR} (log2 of scrypt's N), not {work_factor!r}")
        header = cls(PASSPHRASE, work_factor, SCRYPT_R, SCRYPT_P, os.urandom(SCRYPT_SALT_SIZE))
        header.check_scrypt()
        return header

    @classmethod
    def read(cls, source: BinaryIO) -> Header:
        """Parse a header, or raise :class:`FormatError` saying what is wrong."""
        start = read_full(source, len(MAGIC) + 2)
        if start[: len(MAGIC)] != MAGIC[: len(start)]:
            raise FormatError("not an aescl file (no aescl header)")
        if len(start) < len(MAGIC) + 2:
            raise TruncatedError("truncated: the header is cut short")
        version, key_source = start[len(MAGIC)], start[len(MAGIC) + 1]
        if version != VERSION:
            raise FormatError(f"unsupported aescl file version {version} (this aescl reads 1)")
        if key_source == KEY_FILE:
            return cls(KEY_FILE)
        if key_source != PASSPHRASE:
            raise FormatError(f"unknown key source {key_source} in the header")
        rest = read_full(source, 3 + SCRYPT_SALT_SIZE)
        if len(rest) < 3 + SCRYPT_SALT_SIZE:
            raise TruncatedError("truncated: the header is cut short")
        header = cls(PASSPHRASE, rest[0], rest[1], rest[2], rest[3:])
        header.check_scrypt()
        return header

    def check_scrypt(self) -> None:
        if not (1 <= self.work_factor <= MAX_WORK_FACTOR and self.r == SCRYPT_R
                and self.p == SCRYPT_P):
            raise FormatError(
                f"refusing scrypt parameters log2 N={self.work_factor}, r={self.r}, p={self.p}: "
                f"aescl files have log2 N <= {MAX_WORK_FACTOR}, r = {SCRYPT_R}, p = {SCRYPT_P}"
            )

    @property
    def scrypt_memory(self) -> int:
        return 128 * self.r * (1 << self.work_factor)

    def payload_key(self, key: bytes | None, passphrase: Callable[[], bytes] | None) -> bytes:
        """The chunked payload's 32-byte key from the key file or the passphrase."""
        if self.key_source == KEY_FILE:
            if key is None:
                raise KeySourceError("this file was encrypted with a key file, not a passphrase")
            return key
        if passphrase is None:
            raise KeySourceError("this file was encrypted with a passphrase, not a key file")
        return hashlib.scrypt(
            passphrase(), salt=self.salt, n=1 << self.work_factor, r=self.r, p=self.p,
            # scrypt's V array and its p B blocks, and room for the rest; 2x the memory
            # broke at 1 GiB (OpenSSL takes maxmem below 2 GiB).
            maxmem=self.scrypt_memory + 128 * self.r * (self.p + 2) + (1 << 20),
            dklen=chunked.KEY_SIZE,
        )


@dataclass(frozen=True, repr=False)
class PayloadKey:
    """A file's encoded header and the chunked payload's 32-byte key under it.

    One passphrase gives one scrypt run for a whole set of files: they share the
    header, and every file still gets its own chunk key and nonces from its own
    random 24-byte payload salt. ``repr`` never shows the key.
    """

    header: bytes
    key: bytes

    def __repr__(self) -> str:
        return f"PayloadKey(header={self.header.hex()}, key=<hidden>)"

    @classmethod
    def new(cls, key: bytes | None = None, passphrase: bytes | None = None,
            work_factor: int = DEFAULT_WORK_FACTOR) -> PayloadKey:
        """For encrypting: from a key file's key, or a passphrase through scrypt."""
        if (key is None) == (passphrase is None):
            raise ValueError("give exactly one of key and passphrase")
        header = Header.new(KEY_FILE if key is not None else PASSPHRASE, work_factor)
        return cls(header.encode(), header.payload_key(key, lambda: passphrase or b""))

    @classmethod
    def read(cls, source: BinaryIO, key: bytes | None,
             passphrase: Callable[[], bytes] | None) -> PayloadKey:
        """For decrypting: parse the header at ``source``'s position (which is left just
        after it) and derive its payload key; ``passphrase`` is called only if needed."""
        header = Header.read(source)
        return cls(header.encode(), header.payload_key(key, passphrase))


class KeyRing:
    """Payload keys for decrypting many files with one key or one passphrase: the
    passphrase is asked for at most once, and scrypt runs once per distinct header
    (files encrypted together share theirs)."""

    def __init__(self, key: bytes | None, passphrase: Callable[[], bytes] | None) -> None:
        self._key = key
        self._passphrase = passphrase
        self._text: bytes | None = None
        self._keys: dict[bytes, bytes] = {}

    def _ask(self) -> bytes:
        if self._text is None:
            assert self._passphrase is not None
            self._text = self._passphrase()
        return self._text

    def read(self, source: BinaryIO) -> PayloadKey:
        """Parse the header at ``source``'s position (left just after it); its payload key."""
        header = Header.read(source)
        encoded = header.encode()
        if encoded not in self._keys:
            self._keys[encoded] = header.payload_key(
                self._key, self._ask if self._passphrase is not None else None)
        return PayloadKey(encoded, self._keys[encoded])


class KeySource:
    """A command's key for the format, from a key file or a passphrase, read once
    however many files the command seals or opens (one prompt; encrypting, one scrypt
    run for the whole set, each file still getting its own payload salt).

    The rules: one kind of key, never both; encrypting needs one; decrypting asks for the
    passphrase only if a file was sealed with one. ``passphrase(confirm)`` reads it
    (the caller's prompt, file or variable; ``confirm``: ask twice, as when encrypting),
    or is None where no passphrase was offered. Raises :class:`KeySourceError` where the
    rules are broken or the key file cannot be used.
    """

    def __init__(self, key_file: str | Path | None,
                 passphrase: Callable[[bool], bytes] | None,
                 work_factor: int = DEFAULT_WORK_FACTOR) -> None:
        if key_file and passphrase is not None:
            raise KeySourceError("choose one key: a key file, or a passphrase")
        self._key: bytes | None = None
        if key_file:
            try:
                self._key = read_key_file(key_file)
            except OSError as exc:
                raise KeySourceError(f"cannot read the key file: {exc.strerror}") from None
            except FormatError as exc:
                raise KeySourceError(str(exc)) from None
        self._passphrase = passphrase
        self._work_factor = work_factor
        self._payload: PayloadKey | None = None
        self._ring: KeyRing | None = None

    def for_encrypting(self) -> PayloadKey:
        """The payload key for sealing (scrypt runs here, once, for a passphrase)."""
        if self._payload is None:
            if self._key is None and self._passphrase is None:
                raise KeySourceError("choose a key: a key file or a passphrase")
            text = None if self._key is not None else self._passphrase(True)  # type: ignore[misc]
            self._payload = PayloadKey.new(self._key, text, self._work_factor)
        return self._payload

    def for_decrypting(self) -> KeyRing:
        """The keys for opening: the key file's, or the passphrase when a file needs it."""
        if self._ring is None:
            passphrase = self._passphrase
            self._ring = KeyRing(self._key, None if passphrase is None or self._key else
                                 lambda: passphrase(False))
        return self._ring


def encrypt_stream(
    source: BinaryIO, sink: BinaryIO, *, key: bytes | None = None,
    passphrase: bytes | None = None, work_factor: int = DEFAULT_WORK_FACTOR,
    device: DevicesSpec = None, batch_chunks: int = chunked.DEFAULT_BATCH_CHUNKS,
    progress: ProgressCallback | None = None,
) -> None:
    """Encrypt everything ``source`` yields into ``sink``, with a key or a passphrase."""
    encrypt_payload(source, sink, PayloadKey.new(key, passphrase, work_factor), device=device,
                    batch_chunks=batch_chunks, progress=progress)


def encrypt_payload(
    source: BinaryIO, sink: BinaryIO, payload: PayloadKey, *, device: DevicesSpec = None,
    batch_chunks: int = chunked.DEFAULT_BATCH_CHUNKS, progress: ProgressCallback | None = None,
) -> None:
    """Encrypt everything ``source`` yields into ``sink`` under a prepared header and key,
    with a fresh random payload salt."""
    sink.write(payload.header)
    with chunked.Writer(sink, payload.key, payload.header, device=device,
                        batch_chunks=batch_chunks) as writer:
        length = remaining_file_bytes(source)
        if length is not None:  # a regular file: straight through the device's pipeline
            sink.flush()
            writer.write_file(source, length, progress)
        while block := source.read(READ_SIZE):  # a pipe, or a file that grew
            writer.write(block)
            if progress:
                progress(len(block))


def output_size_bound(source: BinaryIO, decrypt: bool) -> int | None:
    """The most bytes that encrypting or decrypting the rest of ``source`` writes,
    if it is a regular file, for reserving room for the output ahead; else None.
    Decryption writes less than it reads."""
    input_bytes = remaining_file_bytes(source)
    if input_bytes is None or decrypt:
        return input_bytes
    return MAX_HEADER_SIZE + chunked.sealed_size(input_bytes)


def decrypt_stream(
    source: BinaryIO, sink: BinaryIO, *, key: bytes | None = None,
    passphrase: Callable[[], bytes] | None = None, device: DevicesSpec = None,
    batch_chunks: int = chunked.DEFAULT_BATCH_CHUNKS, progress: ProgressCallback | None = None,
) -> None:
    """Decrypt into ``sink``, writing only authenticated chunks; raises on any failure.

    ``passphrase`` is called only if the header says the file needs one.
    """
    payload = PayloadKey.read(source, key, passphrase)
    decrypt_payload(source, sink, payload, device=device, batch_chunks=batch_chunks,
                    progress=progress)


def decrypt_payload(
    source: BinaryIO, sink: BinaryIO, payload: PayloadKey, *, device: DevicesSpec = None,
    batch_chunks: int = chunked.DEFAULT_BATCH_CHUNKS, progress: ProgressCallback | None = None,
) -> None:
    """Decrypt the payload that follows ``payload.header`` (``source`` is positioned just
    after the header) into ``sink``, writing only authenticated chunks."""
    reader = chunked.Reader(source, payload.key, payload.header, device=device,
                            batch_chunks=batch_chunks)
    length = remaining_file_bytes(source)
    if length is not None:  # a regular file: straight through the device's pipeline
        reader.read_file(sink, length, progress)
        return
    while block := reader.read(batch_chunks * chunked.CHUNK_SIZE):
        sink.write(block)
        if progress:
            progress(len(block) + len(block) // chunked.CHUNK_SIZE * chunked.TAG_SIZE)


MAX_KEY_FILE_BYTES = 4096  # 64 hex digits and any whitespace around them, with room
MAX_PASSPHRASE_FILE_BYTES = 64 << 10  # far beyond any passphrase typed or generated


def read_key_file(path: str | Path) -> bytes:
    """A key file's 32 bytes: raw, or 64 hex digits (surrounding whitespace ignored).
    ``path`` is a regular file, a pipe or ``-`` (standard input), of at most
    :data:`MAX_KEY_FILE_BYTES` (else FormatError: ``--key-file /dev/zero`` used to read
    until memory ran out)."""
    try:
        data = read_small_file(path, MAX_KEY_FILE_BYTES)
    except ValueError as exc:
        raise FormatError(f"{path} is not a key file: it {exc}") from None
    if len(data) == chunked.KEY_SIZE:
        return data
    text = data.strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(text) != 2 * chunked.KEY_SIZE or len(key) != chunked.KEY_SIZE:
        raise FormatError(f"{path} is not a key file: it must hold 32 raw bytes or 64 hex digits")
    return key


def read_passphrase_file(path: str | Path) -> bytes:
    """A passphrase file's bytes: a regular file, a pipe or ``-``, of at most
    :data:`MAX_PASSPHRASE_FILE_BYTES` (else FormatError)."""
    try:
        return read_small_file(path, MAX_PASSPHRASE_FILE_BYTES)
    except ValueError as exc:
        raise FormatError(f"the passphrase file {exc}") from None


def write_new_key_file(path: str | Path, replace: bool = False) -> None:
    """Make ``path`` a new random key as 64 hex digits, readable by the owner only.

    The key is written to an unnamed file (mode 0600 from the start) and named only when
    whole (atomicfile.NewFile): a full disk or a signal leaves nothing, not an empty key
    file. Without ``replace`` an existing name fails (``FileExistsError``); with it a
    regular file is replaced by rename, and anything else (a device, a FIFO) is refused
    (``FileExistsError``), never unlinked; a directory is ``IsADirectoryError``.
    """
    target = Path(path)
    with contextlib.suppress(FileNotFoundError):
        status = target.stat()
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(status.st_mode):
            raise FileExistsError(errno.EEXIST, "is not a regular file: keygen replaces "
                                  "only a file", str(path))
        if not replace:
            raise FileExistsError(errno.EEXIST, "exists", str(path))
    new = NewFile(target, replace=replace)
    try:
        text = memoryview((os.urandom(chunked.KEY_SIZE).hex() + "\n").encode())
        while text:
            text = text[os.write(new.fd, text):]
        new.publish()
    finally:
        new.discard()
