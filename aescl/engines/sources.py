"""The kernel sources in ``cl/``, which every engine that runs kernels compiles: the
OpenCL engine as OpenCL C, the CUDA engine as CUDA C++ (cl/aes_vendor_cuda.h).

Includes are resolved here rather than by a compiler (``-I``): some OpenCL drivers
keep their own compiler cache keyed on the top-level source only, and would
otherwise reuse a stale binary after an edit to an included header; and a cache key
made from the resolved text covers every included file.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)


def kernel_dir() -> Path:
    """The folder of ``.cl`` sources: ``aescl/cl`` when installed, ``cl/`` in a checkout."""
    package = Path(__file__).resolve().parents[1]  # aescl/
    installed = package / "cl"
    return installed if installed.is_dir() else package.parent / "cl"


@cache
def load_source(filename: str) -> str:
    """The source of a kernel file with its ``#include "..."`` lines resolved, each file once."""
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return ""  # the guards would make a second copy empty anyway
        seen.add(name)
        text = (kernel_dir() / name).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    return expand(filename)
