"""Where aescl keeps files between runs: compiled kernels and the ICD vendors directory."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

import platformdirs


def cache_root() -> Path:
    """``$AESCL_CACHE_DIR`` if set, else the platform's user cache directory for aescl."""
    configured = os.environ.get("AESCL_CACHE_DIR")
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("aescl"))


def disk_cache_enabled() -> bool:
    """``AESCL_NO_CACHE=1`` turns the on-disk kernel cache off."""
    return os.environ.get("AESCL_NO_CACHE", "") in ("", "0")


def write_cache_file(path: Path, data: bytes) -> None:
    """Write a cache entry whole or not at all: readers never see a partial file.
    A cache that cannot be written only costs redoing the work next time, so
    failures are ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


# A cache entry: this tag, the binary's length (8 bytes, little-endian), its SHA-256,
# then the binary. A driver handed a damaged binary may crash rather than refuse it
# (PoCL segfaulted on one cut short), so an entry is checked before the driver sees it.
_ENTRY_TAG = b"aescl-kernel-1\0"  # (the same for every engine's binaries)
_ENTRY_HEAD = len(_ENTRY_TAG) + 8 + 32


def cache_entry(binary: bytes) -> bytes:
    """A device binary as the disk cache keeps it, with its length and checksum."""
    return (_ENTRY_TAG + len(binary).to_bytes(8, "little") + hashlib.sha256(binary).digest()
            + binary)


def binary_of_entry(entry: bytes) -> bytes | None:
    """The binary of an intact cache entry; None for a damaged, empty or foreign one."""
    head, binary = entry[:_ENTRY_HEAD], entry[_ENTRY_HEAD:]
    tag_end = len(_ENTRY_TAG)
    if (len(head) < _ENTRY_HEAD or head[:tag_end] != _ENTRY_TAG or not binary
            or int.from_bytes(head[tag_end : tag_end + 8], "little") != len(binary)
            or hashlib.sha256(binary).digest() != head[tag_end + 8 :]):
        return None
    return binary
