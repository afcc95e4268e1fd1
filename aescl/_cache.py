"""Where aescl keeps files between runs: compiled kernels and the ICD vendors directory."""

from __future__ import annotations

import contextlib
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
