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
