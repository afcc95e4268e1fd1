"""The kernel manager: per-device launch settings and builds of the sources in ``cl/``
(aescl/engines/sources.py resolves their includes).

Programs are built per (device, source file, options). A built program is kept
in memory for the process and, as a device binary, on disk under the user cache
directory (``AESCL_NO_CACHE=1`` turns the disk cache off; ``AESCL_CACHE_DIR``
moves it). The cache key covers the full source text after includes are
resolved, the build options, the device and driver identity and the pyopencl
version, so an edit to any included file or a driver update rebuilds. It stays
beside pyopencl's, which defers to the drivers' caches on NVIDIA and PoCL: built
from source, PoCL runs its compiler's front end again in every process and writes
the result to disk, which fails under a file size limit (docs/benchmarks, "aescl's
program cache against pyopencl's").
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

from ... import keyschedule
from ..._cache import (  # noqa: F401  (cache_entry, binary_of_entry: its tests)
    MAX_BINARY_BYTES,
    binary_of_entry,
    cache_entry,
    cache_root,
    disk_cache_enabled,
    kernel_cache_dir,
    read_cache_file,
    write_cache_file,
)
from ...devices import Device
from ...errors import KernelBuildError
from ..interface import check_key_schedule
from ..sources import kernel_dir, load_source, scalar_arguments  # noqa: F401  (kernel_dir: its tests)
from .runtime import BuildRecord, DeviceRuntime, device_runtime

# Room the AES tables and round keys take in __local memory, with margin.
_LOCAL_BYTES_NEEDED = 4096
# __local memory kept free beside the round-table copies (S-box, round keys, GHASH). The
# most a kernel keeps there is gcm_crypt_hash's (aes_gcm.cl): the stride's position
# tables (8 KiB), the sums of up to 256 work-items (4 KiB) and the round keys. With 8
# KiB, a device whose __local memory is 8 KiB above a power of two (40 KiB: 32 copies)
# could not have run it.
_LOCAL_BYTES_BESIDE_TABLES = 16384
_MAX_TABLE_LANES = 32  # the number of shared-memory banks on NVIDIA and AMD GPUs
# On AMD GPUs the 64 KiB a work-group may take is the whole compute unit's LDS, which
# its resident work-groups share (NVIDIA's 48 KiB per block come from 228 KiB per SM
# on Hopper). 32 copies (32 KiB) leave room for two work-groups of 256: 2 waves per
# SIMD on gfx90a, as clang reports (docs/kernel-targets.md). 16 copies leave four.
# Not measured on AMD hardware (none here): tuning on the device tries every count.
_AMD_TABLE_LANES = 16


@dataclass(frozen=True)
class LaunchConfig:
    """How kernels are launched on one device."""

    work_group_size: int
    max_work_groups: int
    tables_in_local: bool
    table_lanes: int = 1  # copies of the round table in __local (AES_TABLE_LANES)
    round_tables: int = 1  # of the four round tables, how many sit in __local (AES_ROUND_TABLES)
    byte_permute: bool = False  # NVIDIA's PRMT through inline PTX (AES_BYTE_PERMUTE)
    hardware_rounds: bool = False  # the CPU's AES instructions (AES_HARDWARE_ROUNDS)
    blocks_per_item: int = 1  # blocks in flight per work-item (AES_BLOCKS_PER_ITEM)
    contiguous_runs: bool = False  # one span of blocks per work-item (AES_CONTIGUOUS_RUNS)
    wide_rounds: int = 0  # VAES register width, 256 or 512 (AES_WIDE_ROUNDS); 0: none
    # The 128-bit AES instructions as inline assembly (AES_X86_ASM): 0 builtins, 1 the
    # SSE encoding, 2 the VEX one.
    assembled_rounds: int = 0


def table_lanes(local_mem_bytes: int, work_group_size: int, wanted: int | None = None,
                tables: int = 1) -> int:
    """Round-table copies for a group: ``wanted`` (default: the most, one per bank,
    32), rounded down to a power of two at which ``tables`` round tables fit beside
    the rest of __local memory, and at most one per work-item of the group.

    ``$AESCL_TABLE_LANES`` overrides ``wanted``, so that ``aescl bench`` can compare
    layouts on one device.
    """
    fit = max(1, (local_mem_bytes - _LOCAL_BYTES_BESIDE_TABLES) // (1024 * tables))
    override = os.environ.get("AESCL_TABLE_LANES", "").strip()
    if override:
        if not override.isdigit():
            raise ValueError(f"AESCL_TABLE_LANES must be a whole number, not {override!r}")
        wanted = int(override)
    lanes = min(_MAX_TABLE_LANES if wanted is None else max(1, wanted), fit, work_group_size)
    return 1 << (lanes.bit_length() - 1)


def default_config(device: Device) -> LaunchConfig:
    """Work-group size, grid size and table placement for a device, before tuning
    (tuning.launch_config starts from these and may replace the first three).

    GPUs stage the tables in __local memory: __constant memory serves one
    address per cycle, and table lookups diverge across a warp. There, one
    copy of the round table per bank removes bank conflicts (aes_core.cl,
    AES_TABLE_LANES). CPU runtimes implement __local as ordinary memory, so
    the copy would only cost time. The simulator gets small groups, so that
    short test inputs still cover several groups, grid-stride steps and
    partial groups, and as many table copies as its groups and memory allow.
    CPUs use their AES instructions where the host CPU has them
    (hardware_rounds_wanted, cpu_features): several GB/s per core against about
    0.2 for tables, with 8 blocks in flight per work-item to fill the pipeline.
    On CPUs each work-item takes one contiguous span of blocks (aes_core.cl,
    AES_CONTIGUOUS_RUNS), so that every thread streams through memory in order.
    """
    local_ok = device.local_mem_bytes >= _LOCAL_BYTES_NEEDED
    if device.type in ("simulator", "gpu"):
        simulator = device.type == "simulator"
        group = min(16 if simulator else 256, device.max_work_group_size)
        groups = 3 if simulator else device.compute_units * 16
        wanted = _AMD_TABLE_LANES if device.vendor == "amd" else None
        tables = round_tables_wanted() if local_ok else 1
        lanes = table_lanes(device.local_mem_bytes, group, wanted, tables) if local_ok else 1
        nvidia_gpu = device.vendor == "nvidia" and not simulator
        return LaunchConfig(group, groups, local_ok, lanes, tables, byte_permute=nvidia_gpu)
    hardware = hardware_rounds_wanted() and "aes" in cpu_features()
    assembled = assembled_rounds_wanted() if hardware else 0
    width = wide_rounds_wanted() if hardware else 0
    config = LaunchConfig(min(64, device.max_work_group_size), device.compute_units * 4, False,
                          hardware_rounds=hardware,
                          blocks_per_item=_blocks_per_item(
                              _WIDE_BLOCKS_PER_ITEM if width else
                              _HARDWARE_BLOCKS_PER_ITEM if hardware else 1),
                          contiguous_runs=True, wide_rounds=width,
                          assembled_rounds=assembled)
    # A run must fill whole wide registers (a chosen $AESCL_BLOCKS_PER_ITEM may not).
    return without_wide_rounds(config) if width and config.blocks_per_item % (width // 128) \
        else config


def round_tables_wanted() -> int:
    """Round tables in __local memory on GPUs (aes_core.cl, AES_ROUND_TABLES): 1, or
    ``$AESCL_ROUND_TABLES`` (1, 2 or 4), so that ``aescl bench`` can compare layouts.
    More tables take fewer instructions per round but as much more __local memory,
    and so fewer table copies within 48 KiB: on the H100's OpenCL (2026-11-24,
    docs/benchmarks) one table in 32 copies was faster than two in 16."""
    value = os.environ.get("AESCL_ROUND_TABLES", "").strip()
    if value not in ("", "1", "2", "4"):
        raise ValueError(f"AESCL_ROUND_TABLES must be 1, 2 or 4, not {value!r}")
    return int(value or 1)


def without_wide_rounds(config: LaunchConfig) -> LaunchConfig:
    """``config`` on the 128-bit AES instructions instead of the wide ones."""
    if not config.wide_rounds:
        return config
    return replace(config, wide_rounds=0,
                   blocks_per_item=_blocks_per_item(_HARDWARE_BLOCKS_PER_ITEM))


def with_assembled_rounds(config: LaunchConfig) -> LaunchConfig:
    """``config`` with the 128-bit AES instructions as inline assembly (aes_vendor.h,
    AES_X86_ASM), in the VEX encoding where the CPU has AVX: for a compiler that
    cannot keep the builtins' target attribute through its work-group function. The
    wide rounds, in functions that are never inlined, keep theirs."""
    return replace(config, assembled_rounds=2 if "avx" in cpu_features() else 1)


def without_hardware_rounds(config: LaunchConfig) -> LaunchConfig:
    """``config`` on the portable table rounds instead of the AES instructions."""
    if not config.hardware_rounds:
        return config
    return replace(config, hardware_rounds=False, wide_rounds=0, assembled_rounds=0,
                   blocks_per_item=_blocks_per_item(1))


# Blocks in flight per work-item on the AES instructions: AESENC's latency over its
# issue interval is 4 to 8 on recent x86 cores, and 8 states plus a round key still
# fit the 16 vector registers. Measured on the CI kind (docs/benchmarks).
_HARDWARE_BLOCKS_PER_ITEM = 8
# On the wide instructions (VAES): 32 blocks, 8 registers of 4. Measured with `aescl
# bench --device pocl --sizes 64M` against 8 and 16 (docs/benchmarks, 2026-11-24): 16
# was slower than the narrow rounds on the H200 host's Xeon.
_WIDE_BLOCKS_PER_ITEM = 32


def _blocks_per_item(default: int) -> int:
    """``default``, or ``$AESCL_BLOCKS_PER_ITEM`` (1..32) to compare on one device."""
    value = os.environ.get("AESCL_BLOCKS_PER_ITEM", "").strip()
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= 32:
        raise ValueError(f"AESCL_BLOCKS_PER_ITEM must be a whole number 1..32, not {value!r}")
    return int(value)


@cache
def cpu_features() -> frozenset[str]:
    """The host CPU's x86 feature flags (``aes``, ``avx``, ``pclmulqdq``, ...) as the
    kernel reports them in /proc/cpuinfo; empty on other CPUs and systems, which
    then keep the portable kernels. A CPU OpenCL device runs on this CPU, so its
    features, not the name the OpenCL runtime gives its target, decide."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def hardware_rounds_wanted() -> bool:
    """Whether CPU devices ask for the AES instructions (aes_vendor.h).

    ``$AESCL_HARDWARE_ROUNDS=0`` keeps them on the T-table rounds, so that the
    portable core can be tested and compared on a CPU that has the instructions.
    """
    value = os.environ.get("AESCL_HARDWARE_ROUNDS", "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"AESCL_HARDWARE_ROUNDS must be 0 or 1, not {value!r}")
    return value != "0"




def assembled_rounds_wanted() -> int:
    """``$AESCL_ASSEMBLED_ROUNDS`` (0, 1 or 2): CPU devices take the 128-bit AES
    instructions as inline assembly (aes_vendor.h, AES_X86_ASM: 1 the SSE encoding, 2
    the VEX one) from the start, so that the form can be tested and compared on a CPU
    whose compiler keeps the builtins; unset or 0, only where the builtins failed
    (tuning.checked_default_config)."""
    value = os.environ.get("AESCL_ASSEMBLED_ROUNDS", "").strip()
    if value not in ("", "0", "1", "2"):
        raise ValueError(f"AESCL_ASSEMBLED_ROUNDS must be 0, 1 or 2, not {value!r}")
    return int(value or 0)


def wide_rounds_wanted() -> int:
    """The VAES register width CPU devices ask for (aes_vendor.h, AES_WIDE_ROUNDS): 512
    where the host CPU has VAES, VPCLMULQDQ, AVX-512F and AVX-512BW, 256 where it has
    VAES, VPCLMULQDQ and AVX2, else 0.
    ``$AESCL_WIDE_ROUNDS`` (0, 256 or 512) caps it, so that the narrower paths can be
    tested and compared on a CPU that has the wide one."""
    value = os.environ.get("AESCL_WIDE_ROUNDS", "").strip()
    if value not in ("", "0", "256", "512"):
        raise ValueError(f"AESCL_WIDE_ROUNDS must be 0, 256 or 512, not {value!r}")
    features = cpu_features()
    widest = (512 if {"vaes", "vpclmulqdq", "avx512f", "avx512bw"} <= features else
              256 if {"vaes", "vpclmulqdq", "avx2"} <= features else 0)
    return min(widest, int(value or 512))


def aes_options(rounds: int, key_schedule: str, config: LaunchConfig) -> str:
    """The ``-D`` options that aes_core.cl reads."""
    check_key_schedule(key_schedule)
    return (
        f"-DAES_ROUNDS={rounds} -DAES_KEY_SCHEDULE_DEVICE={int(key_schedule == 'device')}"
        f" -DAES_TABLES_IN_LOCAL={int(config.tables_in_local)}"
        f" -DAES_TABLE_LANES={config.table_lanes}"
        f" -DAES_ROUND_TABLES={config.round_tables}"
        f" -DAES_BYTE_PERMUTE={int(config.byte_permute)}"
        f" -DAES_HARDWARE_ROUNDS={int(config.hardware_rounds)}"
        f" -DGHASH_CARRYLESS={int(carryless_ghash(config))}"
        f" -DAES_BLOCKS_PER_ITEM={config.blocks_per_item}"
        f" -DAES_CONTIGUOUS_RUNS={int(config.contiguous_runs)}"
        f" -DAES_WIDE_ROUNDS={config.wide_rounds}"
        f" -DAES_X86_ASM={config.assembled_rounds}"
    )


def key_argument(key: bytes, key_schedule: str, decrypt: bool) -> np.void:
    """A kernel's key argument for pyopencl: the words of
    keyschedule.kernel_key_argument as one value, which pyopencl passes by value."""
    return np.void(keyschedule.kernel_key_bytes(key, key_schedule, decrypt))


def carryless_ghash(config: LaunchConfig) -> bool:
    """Whether GHASH runs on the CPU's carry-less multiply (ghash.cl, GHASH_CARRYLESS):
    where the AES instructions are asked for and the CPU has PCLMULQDQ."""
    return config.hardware_rounds and "pclmulqdq" in cpu_features()


CORE_VARIANTS = {0: "t-tables", 1: "x86-aes-ni", 2: "x86-vaes-256", 3: "x86-vaes-512",
                 4: "x86-aes-ni-asm"}


def requested_variant(config: LaunchConfig) -> str:
    """The rounds (CORE_VARIANTS) that ``config`` asks aes_core.cl for; core_variant
    says which it compiled to."""
    if not config.hardware_rounds:
        return "t-tables"
    if config.wide_rounds:
        return f"x86-vaes-{config.wide_rounds}"
    return "x86-aes-ni-asm" if config.assembled_rounds else "x86-aes-ni"


def core_variant(device: Device, options: str) -> str:
    """Which rounds aes_core.cl compiles to on a device with these options
    (CORE_VARIANTS): AES_HARDWARE_ROUNDS is a request the compiler may not grant."""
    rt = device_runtime(device)
    found = cl.Buffer(rt.context, cl.mem_flags.WRITE_ONLY, 4)
    value = bytearray(4)
    with rt.lock:
        kernel(device, "aes_variant.cl", options, "aes_core_variant")(rt.queue, (1,), (1,),
                                                                      found)
        cl.enqueue_copy(rt.queue, value, found)
    return CORE_VARIANTS[int.from_bytes(value, "little")]


def cache_key(device: Device, source: str, options: str) -> str:
    identity = {
        "source": source,
        "options": options,
        "device": device.name,
        "vendor": device.vendor,
        "platform": [device.platform_name, device.platform_version],
        "driver": device.driver_version,
        "opencl_c": device.opencl_c_version,
        "pyopencl": cl.VERSION_TEXT,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _load_cached_binary(rt: DeviceRuntime, path: Path, options: str) -> Any | None:
    """The program from a cache entry, or None (missing, damaged, or rejected by the
    driver): it is then built from source, and the entry written again."""
    entry = read_cache_file(path, MAX_BINARY_BYTES)
    try:
        binary = None if entry is None else binary_of_entry(entry)
        if binary is None:
            return None
        return cl.Program(rt.context, [rt.device.cl_device], [binary]).build(options=options)
    except (OSError, cl.Error):
        return None


def _store_binary(program: Any, path: Path) -> None:
    try:
        binary = program.get_info(cl.program_info.BINARIES)[0]
    except cl.Error:
        return
    if binary:
        write_cache_file(path, cache_entry(bytes(binary)))


def build_source(device: Device, source: str, options: str, label: str,
                 context: Any = None) -> Any:
    """A built program for (device, source, options), from memory, disk or the compiler,
    in aescl's context for the device or a caller's ``context`` (:func:`runtime`).

    ``label`` names the program in error messages. Raises :class:`KernelBuildError`
    with the compiler's log when the build fails.
    """
    return _program_in(device_runtime(device, context), source, options, label)


def _program_in(rt: DeviceRuntime, source: str, options: str, label: str) -> Any:
    key = cache_key(rt.device, source, options)
    with rt.lock:
        program = rt.programs.get(key)
        return program if program is not None else _build(rt, key, source, options, label)


def _build(rt: DeviceRuntime, key: str, source: str, options: str, label: str) -> Any:
    device = rt.device
    started = time.perf_counter()
    cached_path = kernel_cache_dir() / f"{key}.bin"
    program = _load_cached_binary(rt, cached_path, options) if disk_cache_enabled() else None
    from_disk = program is not None
    compiler_log = ""
    if program is None:
        program, compiler_log = _compile(device, source, options, label, rt.context)
        if disk_cache_enabled():
            _store_binary(program, cached_path)
    rt.programs[key] = program
    rt.build_log.append(
        BuildRecord(label, options, time.perf_counter() - started, from_disk, compiler_log)
    )
    return program


def _compile(device: Device, source: str, options: str, label: str,
             context: Any) -> tuple[Any, str]:
    """Compile from source in ``context``; returns the program and what the compiler said.

    A successful build's log is kept rather than shown: pyopencl turns any log
    into a CompilerWarning, and NVIDIA's compiler remarks on every aescl kernel
    that kernels are not inlined, which tells a user nothing.
    """
    with warnings.catch_warnings(record=True) as remarks:
        warnings.simplefilter("always", cl.CompilerWarning)
        try:
            program = cl.Program(context, source).build(
                options=options, devices=[device.cl_device], cache_dir=False
            )
        except cl.Error as exc:
            raise KernelBuildError(
                f"building {label} ({options}) for {device.name} failed", str(exc)
            ) from None
    for remark in remarks:
        if not issubclass(remark.category, cl.CompilerWarning):
            warnings.warn_explicit(remark.message, remark.category, remark.filename,
                                   remark.lineno)
    log = program.get_build_info(device.cl_device, cl.program_build_info.LOG)
    return program, log.strip()


def time_builds(
    device: Device, filename: str, options: str, first_launch: Callable[[Any], None]
) -> tuple[float, float | None]:
    """Seconds to a first result from source with no cache (cold), and from the binary
    as the disk cache keeps it (warm).

    ``first_launch(program)`` runs one small launch to completion: some runtimes
    (PoCL) generate code only when a kernel first runs. A unique ``-D`` option makes
    the build new to every cache, the driver's own included. The warm figure is
    None when the runtime gives no binary.
    """
    rt = device_runtime(device)
    source = load_source(filename)
    # PoCL's cache hashes the compiled code, which a source comment would not change.
    options += f" -DAESCL_COLD_BUILD_PROBE=0x{os.urandom(8).hex()}"
    started = time.perf_counter()
    program, _ = _compile(device, source, options, filename, rt.context)
    first_launch(program)
    cold = time.perf_counter() - started
    binary = program.get_info(cl.program_info.BINARIES)[0]
    if not binary:
        return cold, None
    started = time.perf_counter()
    first_launch(cl.Program(rt.context, [device.cl_device], [binary]).build(options=options))
    return cold, time.perf_counter() - started


def build(device: Device, filename: str, options: str, context: Any = None) -> Any:
    """The program of one kernel file in ``cl/``, built for a device with ``options``
    (in a caller's ``context``, where given: :func:`runtime`)."""
    return build_source(device, load_source(filename), options, filename, context)


def kernel(device: Device, filename: str, options: str, name: str, context: Any = None) -> Any:
    """A kernel object of a built program, one per (program, name) for the process
    (:func:`kernel_in` aescl's runtime for the device, or the one of a caller's
    ``context``)."""
    return kernel_in(device_runtime(device, context), filename, options, name)


def kernel_in(rt: DeviceRuntime, filename: str, options: str, name: str) -> Any:
    """A kernel object of a built program in one runtime, made once and kept there.

    pyopencl prepares each new ``cl.Kernel`` object's argument handling anew,
    which costs more than a small launch; callers set all arguments before each
    enqueue, holding ``rt.lock``, so sharing one object is safe. (The runtime is
    given, not looked up again, so that the lock callers hold is the one of the
    runtime that keeps the object: runtime.py lets callers' runtimes go.)
    The types of its by-value arguments are given to pyopencl
    (sources.scalar_arguments), which then sets them in one step each kind: untyped,
    each numpy scalar took 7 µs to set (82 µs for gcm_crypt_hash's eleven, measured on
    this project's CI kind), and each vector or key struct 9 µs.
    """
    key = (filename, options, name)  # load_source is fixed for the process
    with rt.lock:
        if key not in rt.kernels:
            program = _program_in(rt, load_source(filename), options, filename)
            made = cl.Kernel(program, name)
            made.set_scalar_arg_dtypes([None if dtype is None else np.dtype(dtype)
                                        for dtype in scalar_arguments(filename, name)])
            rt.kernels[key] = made
        return rt.kernels[key]
