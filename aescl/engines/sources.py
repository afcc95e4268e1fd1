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

from ..keyschedule import KEY_ARGUMENT_WORDS

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
# Their vectors (uint4, ulong2, ...), which a kernel takes by value as raw bytes: given
# a dtype, pyopencl sets such an argument straight from its bytes, where untyped it
# tried other kinds first (9 µs an argument on the CI kind's host, 2026-11-26).
_VECTOR = re.compile(r"(uchar|ushort|uint|ulong|char|short|int|long|float)(2|3|4|8|16)")
_BYTES = {"uchar": 1, "char": 1, "ushort": 2, "short": 2, "uint": 4, "int": 4, "ulong": 8,
          "long": 8, "float": 4}


@cache
def scalar_arguments(filename: str, name: str) -> tuple[str | None, ...]:
    """For each argument of kernel ``name`` (in ``filename``, its includes resolved): the
    numpy dtype name of what is passed by value (a scalar; a vector or the key argument
    as its raw bytes, ``"V16"`` for a uint4), None for a pointer. Read from the kernel's
    signature in the source, whose arguments are plain declarations
    (tests/test_kernels.py checks each against what an OpenCL compiler reports)."""
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
        dtypes.append(None if "*" in words else _by_value_dtype(words))
    return tuple(dtypes)


def _by_value_dtype(words: list[str]) -> str | None:
    """The dtype name of an argument passed by value, from its declaration's words."""
    if words[0].startswith("AES_KEY_ARGUMENT("):
        return f"V{4 * KEY_ARGUMENT_WORDS}"  # (aes_vendor.h's aes_key_argument)
    if len(words) < 2:
        return None
    vector = _VECTOR.fullmatch(words[-2])
    if vector is not None:
        lanes = int(vector.group(2))
        return f"V{(4 if lanes == 3 else lanes) * _BYTES[vector.group(1)]}"  # (3: a 4's room)
    return _SCALARS.get(words[-2])
