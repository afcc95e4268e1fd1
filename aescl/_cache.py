"""Where aescl keeps files between runs: compiled kernels and the ICD vendors directory.

The cache is trusted only where it is the user's own (docs/security.md, "The cache
directory"). Its entries are code a driver runs (kernel binaries, ICD entries naming
libraries) and settings that decide what the kernels compute (launch settings, the
rounds check), and a checksum cannot tell the user's entry from one written by
someone else: so aescl creates its folders 0700 whatever the umask, and uses a folder
or entry only when the user owns it and no one else can write it, nor any folder above
it but the user, root, or a sticky directory such as /tmp. Anything else is passed over
with one line on stderr, and the work is done without the cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path

import platformdirs

# What the cache root is made of: aescl's own setting, and what platformdirs reads.
_ROOT_SETTINGS = ("AESCL_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "LOCALAPPDATA")


def cache_root() -> Path:
    """``$AESCL_CACHE_DIR`` if set, else the platform's user cache directory for aescl."""
    return _cache_root(*(os.environ.get(name) for name in _ROOT_SETTINGS))


@functools.lru_cache(maxsize=8)
def _cache_root(configured: str | None, *platform_settings: str | None) -> Path:
    # (Made once for each setting: every job's device choice reads the rates store, and
    # working the path out took 26 of the 70 us of each of a plain call's four reads.)
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("aescl"))


def kernel_cache_dir() -> Path:
    """Where the OpenCL engine keeps built programs (diagnostics reports on it too)."""
    return cache_root() / "kernels"


def disk_cache_enabled() -> bool:
    """``AESCL_NO_CACHE=1`` turns the on-disk kernel cache off."""
    return os.environ.get("AESCL_NO_CACHE", "") in ("", "0")


_said: set[str] = set()


def say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(f"aescl: {message}", file=sys.stderr)


def _others_can_write(status: os.stat_result) -> bool:
    return bool(status.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _own(status: os.stat_result) -> bool:
    """The user's own, and writable by no one else."""
    return status.st_uid == os.geteuid() and not _others_can_write(status)


def _safe_above(folder: Path) -> bool:
    """Whether only the user or root can replace ``folder`` (its ancestors: each owned by
    the user or root, and writable by others only where sticky, as /tmp is)."""
    for above in folder.parents:
        status = os.stat(above)
        if status.st_uid not in (0, os.geteuid()):
            return False
        if _others_can_write(status) and not status.st_mode & stat.S_ISVTX:
            return False
    return True


def private_folder(folder: Path) -> Path | None:
    """``folder`` (the cache root or a folder under it), made 0700 where missing, if it is
    the user's own (the module docstring); else None, said once on stderr."""
    try:
        missing = [folder, *folder.parents]
        missing = missing[: next(i for i, p in enumerate(missing) if p.exists())]
        for path in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)  # (0700 under any umask: it only removes bits)
        status = os.stat(folder)
        trusted = stat.S_ISDIR(status.st_mode) and _own(status) and _safe_above(folder)
    except OSError:
        return None  # (cannot be made or looked at: no cache, said by nobody)
    if not trusted:
        say_once(f"not using the cache folder {folder}: it is not yours alone (owned by "
                  "another user, or writable by others); running without it")
        return None
    return folder


def read_cache_file(path: Path, max_bytes: int) -> bytes | None:
    """A cache entry's bytes, or None: missing, or not to be trusted (not a regular file of
    at most ``max_bytes``, or in a folder or a file that is not the user's own; said once
    on stderr). Opened without following a link or waiting on a FIFO."""
    if private_folder(path.parent) is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not (stat.S_ISREG(status.st_mode) and _own(status)
                and status.st_size <= max_bytes):
            say_once(f"ignoring the cache entry {path}: not a regular file of yours alone "
                      f"of at most {max_bytes} bytes")
            return None
        try:
            return handle.read(max_bytes + 1)[: max_bytes]
        except OSError:
            return None


def write_cache_file(path: Path, data: bytes) -> None:
    """Write a cache entry whole or not at all: readers never see a partial file.
    A cache that cannot be written (or is not the user's own) only costs redoing the
    work next time, so failures are ignored."""
    if private_folder(path.parent) is None:
        return
    try:
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


MAX_BINARY_BYTES = 64 << 20  # a kernel binary (aescl's are a few MiB at most)
MAX_RECORD_BYTES = 1 << 20  # a JSON record: a tuning, the rates, a check


def read_cache_json(path: Path) -> object:
    """A JSON record from the cache (:func:`read_cache_file`), or None."""
    import json

    data = read_cache_file(path, MAX_RECORD_BYTES)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


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
