"""Where aescl keeps files between runs: compiled kernels and the ICD vendors directory."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_root() -> Path:
    """``$AESCL_CACHE_DIR`` if set, else the platform's user cache directory for aescl."""
    configured = os.environ.get("AESCL_CACHE_DIR")
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("aescl"))


def disk_cache_enabled() -> bool:
    """``AESCL_NO_CACHE=1`` turns the on-disk kernel cache off."""
    return os.environ.get("AESCL_NO_CACHE", "") in ("", "0")
