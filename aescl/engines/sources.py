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


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_KERNEL = re.compile(r"__kernel\s+void\s+(\w+)\s*\(")
# OpenCL C's scalar types by name, as numpy's.
_SCALARS = {"uchar": "uint8", "ushort": "uint16", "uint": "uint32", "ulong": "uint64",
            "char": "int8", "short": "int16", "int": "int32", "long": "int64",
            "float": "float32"}


@cache
def scalar_arguments(filename: str, name: str) -> tuple[str | None, ...]:
    """For each argument of kernel ``name`` (in ``filename``, its includes resolved): the
    numpy dtype name of a scalar passed by value, None for anything else (a pointer, a
    vector, the key argument). Read from the kernel's signature in the source, whose
    arguments are plain declarations (tests/test_kernels.py checks each against what
    an OpenCL compiler reports)."""
    source = _COMMENT.sub(" ", load_source(filename))
    found = next((m for m in _KERNEL.finditer(source) if m.group(1) == name), None)
    if found is None:
        raise LookupError(f"no kernel {name!r} in {filename}")
    depth, arguments, current = 1, [], ""
    for char in source[found.end():]:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 or (char == "," and depth == 1):
            arguments.append(current.strip())
            current = ""
            if depth == 0:
                break
        else:
            current += char
    dtypes: list[str | None] = []
    for argument in filter(None, arguments):
        words = argument.replace("*", " * ").split()
        scalar = "*" not in words and len(words) >= 2 and words[-2] in _SCALARS
        dtypes.append(_SCALARS[words[-2]] if scalar else None)
    return tuple(dtypes)
