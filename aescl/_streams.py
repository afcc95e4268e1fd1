"""Reading binary streams whole-piece at a time."""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO


def read_full(source: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes, fewer only at the end of the stream.

    Pipes and sockets return short reads; callers need whole blocks, chunks and
    headers, so this keeps reading until it has them or the data ends.
    """
    parts, total = [], 0
    while total < size:
        part = source.read(size - total)
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def remaining_file_bytes(source: BinaryIO) -> int | None:
    """Bytes from the current position to the end, if ``source`` is a regular file."""
    try:
        status = os.fstat(source.fileno())
        position = source.tell()
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return max(0, status.st_size - position)


def read_small_file(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The whole of a small file that the user names (a key, a passphrase): a regular
    file, a FIFO (a shell's ``<(...)``, ``/dev/stdin`` on a pipe) or ``-`` for standard
    input, of at most ``max_bytes``. Anything else (``/dev/zero``, a terminal, a
    directory) or anything longer is refused with ValueError (the reason, to follow
    "the file"), before
    more than ``max_bytes + 1`` bytes are read; OSError where it cannot be opened."""
    import sys

    if os.fspath(path) == "-":
        stream: BinaryIO = sys.stdin.buffer
        status = os.fstat(stream.fileno())
        close = False
    else:
        stream = open(path, "rb")  # noqa: SIM115  (closed below)
        status = os.fstat(stream.fileno())
        close = True
    try:
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISFIFO(status.st_mode)
                or os.fspath(path) == "-"):
            raise ValueError("must be a regular file, a pipe or -")
        data = read_full(stream, max_bytes + 1)
    finally:
        if close:
            stream.close()
    if len(data) > max_bytes:
        raise ValueError(f"is too large (more than {max_bytes} bytes)")
    return data
