"""The CUDA engine's programs: the kernels of ``cl/`` compiled as CUDA C++ by NVRTC.

There is one AES core: ``cl/aes_vendor_cuda.h`` maps the OpenCL C that the kernels
are written in onto CUDA's, as hashcat builds its OpenCL kernels for CUDA. NVRTC
(the ``nvidia-cuda-nvrtc`` wheel, through ``cuda-core``) compiles for a GPU
architecture with no GPU present, which is how the test suite checks every CUDA
kernel on machines without one. A built module is kept in memory for the process
and, as a cubin, in aescl's cache directory (``<cache>/cuda``), in the same checked
entries as the OpenCL engine's binaries.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from ..._cache import (
    MAX_BINARY_BYTES,
    binary_of_entry,
    cache_entry,
    cache_root,
    disk_cache_enabled,
    read_cache_file,
    write_cache_file,
)
from ...errors import KernelBuildError
from ..sources import load_source

# The kernels the CUDA engine runs, by source file.
KERNELS: dict[str, tuple[str, ...]] = {
    "aes_ecb.cl": ("aes_ecb_encrypt", "aes_ecb_decrypt"),
    "aes_ctr.cl": ("aes_ctr_xor",),
    "aes_gcm.cl": ("gcm_ctr_xor", "gcm_ghash", "gcm_crypt_hash", "ghash_power_tables",
                   "ghash_position_tables", "ghash_powers", "gcm_tags",
                   "ghash_sums_as_blocks"),
    "chunk_layout.cl": ("chunks_tags", "chunks_counters", "chunks_first_mismatch"),
}

# Copies of each round table in shared memory: one per bank, as the OpenCL engine
# uses on NVIDIA GPUs (aes_core.cl, AES_TABLE_LANES).
TABLE_LANES = 32
# As many of the four round tables as a thread block's shared memory holds (aes_core.cl,
# AES_ROUND_TABLES), so that a round needs fewer rotates, or none with all four: 128
# KiB of dynamic shared memory per block, which only CUDA can ask for (NVIDIA's OpenCL
# stops at 48 KiB). Swept on the H100 (2026-11-24, docs/benchmarks): CTR AES-128 580
# GB/s with one table, 720 with two, 771 with four.
ROUND_TABLES = 4
# Shared memory a block keeps beside the tables (the inverse S-box, the compiler's own).
_SHARED_BESIDE_TABLES = 1024
# The kernels that stage the round tables, and so launch with table_bytes() of dynamic
# shared memory.
TABLE_KERNELS = frozenset({"aes_ecb_encrypt", "aes_ecb_decrypt", "aes_ctr_xor", "gcm_ctr_xor",
                           "gcm_tags", "gcm_crypt_hash"})


def table_bytes(tables: int, lanes: int = TABLE_LANES) -> int:
    """Dynamic shared memory of a block that stages ``tables`` round tables, ``lanes``
    copies of each."""
    return 256 * 4 * lanes * tables


def round_tables_for(block_shared_bytes: int) -> int:
    """The most round tables (4, 2 or 1) whose copies fit in ``block_shared_bytes``, the
    shared memory a block may opt into: 227 KiB on Hopper and 163 KiB on the A100 hold
    four; 99 KiB (consumer Ampere, Ada) and 96 KiB (Volta) two; Turing's 64 KiB one."""
    for tables in (ROUND_TABLES, 2):
        if table_bytes(tables) + _SHARED_BESIDE_TABLES <= block_shared_bytes:
            return tables
    return 1


def cuda_defines(rounds: int, tables: int = ROUND_TABLES, lanes: int = TABLE_LANES
                 ) -> dict[str, int]:
    """The ``-D`` options of a CUDA build: the OpenCL engine's for an NVIDIA GPU (round
    keys expanded on the host, the tables in shared memory a copy per bank, byte
    extraction by PRMT), with ``tables`` round tables in dynamic shared memory, and
    GHASH's stride tables read through the cache (workers._GHASH_ITEMS says why)."""
    return {"AES_ROUNDS": rounds, "AES_KEY_SCHEDULE_DEVICE": 0, "AES_TABLES_IN_LOCAL": 1,
            "AES_TABLE_LANES": lanes, "AES_BYTE_PERMUTE": 1,
            "AES_ROUND_TABLES": tables, "AES_TABLES_DYNAMIC": 1,
            "GHASH_STRIDE_IN_LOCAL": 0}


def crypt_hash_tables(block_shared_bytes: int, wanted: int, threads: int,
                      stride_in_local: int, lanes: int = TABLE_LANES) -> int:
    """Round tables (``wanted`` at most: 4, 2 or 1) for gcm_crypt_hash's blocks, whose
    shared memory also holds the sums of ``threads`` threads and, with
    ``stride_in_local``, the stride's position tables (8 KiB): the most that fit in
    ``block_shared_bytes``, the shared memory a block may opt into."""
    beside = _SHARED_BESIDE_TABLES + 16 * threads + 8192 * stride_in_local
    for tables in (4, 2):
        if tables <= wanted and table_bytes(tables, lanes) + beside <= block_shared_bytes:
            return tables
    return 1


def crypt_hash_defines(rounds: int, tables: int, threads: int, stride_in_local: int,
                       lanes: int = TABLE_LANES, sums_by_powers: int = 0) -> dict[str, int]:
    """The ``-D`` options of the build that gcm_crypt_hash (cl/aes_gcm.cl) runs from: its
    own count of round tables and copies of each (``lanes``), blocks of ``threads``
    (which size its sums' scratch), GHASH's stride tables in shared memory (1) or
    read through the cache (0), and the work-items' sums put together by pairs (0) or
    each by its own power of H (1, GCM_SUMS_BY_POWERS), as workers._CRYPT_HASH_SHAPE
    (and _LONE_CRYPT_HASH_SHAPE, for a lone message) chose them by measurement."""
    return {**cuda_defines(rounds, tables, lanes), "GCM_CRYPT_HASH_MAX_GROUP": threads,
            "GHASH_STRIDE_IN_LOCAL": stride_in_local, "GCM_SUMS_BY_POWERS": sums_by_powers}


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def compile_cubin(filename: str, defines: Mapping[str, int], arch: str) -> bytes:
    """The cubin of one kernel file for GPU architecture ``arch`` (``"90"``: sm_90).
    Needs NVRTC, not a GPU. Raises :class:`KernelBuildError` with NVRTC's log."""
    from cuda.core import Program, ProgramOptions
    from cuda.core._utils.cuda_utils import NVRTCError

    macros = [(k, str(v)) for k, v in sorted(defines.items())]
    options = ProgramOptions(arch=f"sm_{arch}", std="c++17", name=filename,
                             define_macro=macros or None)
    try:
        code = Program(load_source(filename), "c++", options).compile("cubin")
    except NVRTCError as exc:
        raise KernelBuildError(f"building {filename} for CUDA sm_{arch} failed",
                               str(exc)) from None
    return bytes(code.code)


def cache_key(filename: str, defines: Mapping[str, int], arch: str) -> str:
    identity = {"source": load_source(filename), "defines": sorted(defines.items()),
                "arch": arch, "nvrtc": nvrtc_version()}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


_modules: dict[tuple[str, str, str], Any] = {}
_modules_lock = threading.Lock()


def module(filename: str, defines: Mapping[str, int], arch: str) -> Any:
    """The loaded module (``cuda.core.ObjectCode``) of a kernel file, from memory, the
    disk cache or NVRTC."""
    from cuda.core import ObjectCode

    key = (filename, json.dumps(sorted(defines.items())), arch)
    with _modules_lock:
        if key not in _modules:
            path = cache_root() / "cuda" / f"{cache_key(filename, defines, arch)}.cubin"
            cubin = None
            if disk_cache_enabled():
                entry = read_cache_file(path, MAX_BINARY_BYTES)
                cubin = None if entry is None else binary_of_entry(entry)
            if cubin is None:
                cubin = compile_cubin(filename, defines, arch)
                if disk_cache_enabled():
                    write_cache_file(path, cache_entry(cubin))
            _modules[key] = ObjectCode.from_cubin(cubin)
        return _modules[key]
