"""Raw streams without a header: what ``openssl enc`` reads and writes.

Raw output is NOT authenticated: a flipped bit flips plaintext (CTR) or garbles
a block (ECB) undetected, and ECB shows equal plaintext blocks as equal
ciphertext blocks. It exists for interoperability; the authenticated file
format is the safe default.

CTR takes a 16-byte IV that counts as one 128-bit big-endian number, as
``openssl enc -aes-*-ctr -K … -iv …`` does. ECB pads with PKCS#7 by default, as
``openssl enc -aes-*-ecb`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from ._streams import read_full, remaining_file_bytes
from .errors import PaddingError
from .keyschedule import BLOCK_SIZE
from .modes import MODE_CTR, MODE_ECB, new
from .teams import DevicesSpec

DEFAULT_CHUNK_BYTES = 16 << 20
RAW_MODES = ("ctr", "ecb")


def pkcs7_pad(data: bytes) -> bytes:
    """Append 1..16 bytes, each equal to the count, to reach a whole block."""
    count = BLOCK_SIZE - len(data) % BLOCK_SIZE
    return data + bytes([count]) * count


def pkcs7_unpad(data: bytes) -> bytes:
    """Remove PKCS#7 padding, or raise :class:`PaddingError`."""
    if not data or len(data) % BLOCK_SIZE:
        raise PaddingError("bad padding: the input is not a whole number of blocks")
    count = data[-1]
    if not 1 <= count <= BLOCK_SIZE or data[-count:] != bytes([count]) * count:
        raise PaddingError("bad padding: wrong key, or the data was not PKCS#7-padded")
    return data[:-count]


def output_size_bound(source: BinaryIO, decrypt: bool) -> int | None:
    """The most bytes that transforming the rest of ``source`` writes, if it is a
    regular file; else None. ECB encryption adds up to a block of padding; CTR
    keeps the length; decryption never grows."""
    input_bytes = remaining_file_bytes(source)
    if input_bytes is None or decrypt:
        return input_bytes
    return input_bytes + BLOCK_SIZE


def transform(
    source: BinaryIO,
    sink: BinaryIO,
    *,
    key: bytes,
    mode: str,
    decrypt: bool,
    iv: bytes | None = None,
    pad: bool = True,
    device: DevicesSpec = None,
    key_schedule: str = "host",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Encrypt or decrypt ``source`` into ``sink`` in bounded memory; returns bytes written.

    ``progress``, if given, is called with the number of input bytes consumed.
    Raises ``ValueError`` for bad parameters and :class:`PaddingError` when ECB
    decryption finds no valid padding (after writing all but the last block).
    """
    if mode not in RAW_MODES:
        raise ValueError(f"raw mode must be one of {', '.join(RAW_MODES)}, not {mode!r}")
    if mode == "ctr":
        if iv is None or len(iv) != BLOCK_SIZE:
            raise ValueError("CTR needs a 16-byte IV (32 hex digits)")
        cipher = new(key, MODE_CTR, nonce=b"", initial_value=iv, device=device,
                     key_schedule=key_schedule)
    else:
        if iv is not None:
            raise ValueError("ECB takes no IV")
        cipher = new(key, MODE_ECB, device=device, key_schedule=key_schedule)
    process = cipher.decrypt if decrypt else cipher.encrypt
    chunk_bytes = max(BLOCK_SIZE, chunk_bytes - chunk_bytes % BLOCK_SIZE)

    def read() -> bytes:
        chunk = read_full(source, chunk_bytes)
        if progress and chunk:
            progress(len(chunk))
        return chunk

    written = 0
    if mode == "ctr":  # a stream cipher: every byte goes straight through
        while chunk := read():
            written += sink.write(process(chunk))
        return written

    held = b""  # bytes that must wait for more input or for the end
    while len(chunk := read()) == chunk_bytes:
        data = held + chunk
        keep = len(data) % BLOCK_SIZE
        if decrypt and pad and keep == 0:
            keep = BLOCK_SIZE  # the last block may be the padded one: only the end tells
        held = data[len(data) - keep :]
        written += sink.write(process(data[: len(data) - keep]))
    data = held + chunk
    if decrypt:
        final = process(_whole_blocks(data))
        written += sink.write(pkcs7_unpad(final) if pad else final)
    else:
        written += sink.write(process(pkcs7_pad(data) if pad else _whole_blocks(data)))
    return written


def _whole_blocks(data: bytes) -> bytes:
    if len(data) % BLOCK_SIZE:
        raise ValueError(
            f"the input is not a whole number of 16-byte blocks ({len(data) % BLOCK_SIZE} "
            "bytes left over); use padding, or CTR"
        )
    return data
