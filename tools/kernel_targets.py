"""Build every OpenCL kernel for GPUs this machine does not have, with Debian's clang.

aescl builds its kernels at run time, for the device it finds. An AMD GPU or an
unknown vendor's would get options no machine here exercises, so this builds them
ahead of time, as aescl would on such a device:

* ``gfx90a`` (CDNA2, MI200: wave64), ``gfx1100`` (RDNA3: wave32, and wave64 as
  ``gfx1100-wave64``), through clang's amdgcn target, linked with ROCm's device
  library (Debian's ``rocm-device-libs``: ``get_global_id`` and the other work-item
  functions; without it each is an external call, and clang then reserves 16 KiB of
  scratch per work-item and the calling convention's registers, which hide the
  kernels' own). Its OpenCL and ockl parts are linked by hand: Debian's ROCm 5.2
  predates RDNA3, and the ISA-version part it lacks for gfx1100 is read by none of
  the functions the kernels call (the linked module declares nothing but LLVM's
  intrinsics);
* ``spir64``: a generic SPIR module, what a SPIR-V consuming runtime would take.

Each target stands for a device as its OpenCL runtime reports it (local memory,
work-group size, compute units), and the ``-D`` options are those aescl's defaults
choose for that device (``kernels.default_config``, ``kernels.aes_options``): every
key size, both key schedules. The AMD builds report each kernel's registers and
LDS, which must fit the device (``python3 tools/kernel_targets.py`` prints them;
docs/kernel-targets.md keeps a copy). tests/test_kernel_targets.py runs it all.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CLANG = "clang-16"
NM = "llvm-nm-16"  # (clang-16 brings it)
DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")  # Debian's rocm-device-libs
KERNEL_DIR = Path(__file__).resolve().parent.parent / "cl"
# The kernel files the OpenCL engine builds on a GPU, by the options they read.
GPU_KERNEL_FILES = ("aes_ecb.cl", "aes_ctr.cl", "aes_gcm.cl", "chunk_seal.cl",
                    "chunk_layout.cl")


@dataclass(frozen=True)
class Target:
    name: str
    clang_args: tuple[str, ...]
    # As the vendor's OpenCL runtime reports the device (ROCm: 64 KiB of LDS per
    # work-group, work-groups of up to 256; a generic device: OpenCL's minimum of
    # 32 KiB of local memory).
    local_mem_bytes: int
    max_work_group_size: int
    compute_units: int
    vendor: str
    vgpr_limit: int | None = None  # registers one work-item may use (AMD), else None


def _amd(cpu: str, wave64: bool) -> tuple[str, ...]:
    """clang's arguments for an AMD GPU, the device library linked (code object v4,
    whose implicit arguments ockl's ABI-version 400 part reads)."""
    parts = ("opencl.bc", "ockl.bc", f"oclc_wavefrontsize64_{'on' if wave64 else 'off'}.bc",
             "oclc_abi_version_400.bc")
    linked = [arg for part in parts
              for arg in ("-Xclang", "-mlink-builtin-bitcode", "-Xclang", str(DEVICE_LIBS / part))]
    return ("-target", "amdgcn-amd-amdhsa", "-nogpulib", f"-mcpu={cpu}",
            "-mcode-object-version=4", *(["-mwavefrontsize64"] if wave64 else []), *linked)


TARGETS = (
    Target("gfx90a", _amd("gfx90a", True), 65536, 256, 110, "amd", 512),
    Target("gfx1100", _amd("gfx1100", False), 65536, 256, 96, "amd", 256),
    Target("gfx1100-wave64", _amd("gfx1100", True), 65536, 256, 96, "amd", 256),
    Target("spir64", ("-target", "spir64", "-emit-llvm"), 32768, 256, 32, "other"),
)


def device_of(target: Target):  # -> aescl.Device
    """An aescl Device record for ``target``, as an OpenCL runtime would describe it."""
    from aescl.devices import host_device

    return dataclasses.replace(
        host_device(), id=target.name, name=target.name, vendor=target.vendor, type="gpu",
        platform_name=f"offline {target.name}", compute_units=target.compute_units,
        local_mem_bytes=target.local_mem_bytes, max_alloc_bytes=1 << 30,
        max_work_group_size=target.max_work_group_size, opencl_c_version="OpenCL C 1.2",
        driver_version="offline")


def option_sets(target: Target) -> list[str]:
    """The ``-D`` options aescl would build its GPU kernels with on ``target``."""
    from aescl.engines.opencl.kernels import aes_options, default_config

    config = default_config(device_of(target))
    return [aes_options(rounds, schedule, config)
            for rounds in (10, 12, 14) for schedule in ("host", "device")]


@dataclass(frozen=True)
class Usage:
    """One kernel's resources on an AMD target, from clang's resource remarks."""

    kernel: str
    vgprs: int
    sgprs: int
    lds_bytes: int
    scratch_bytes: int  # per work-item: registers spilled to memory
    waves_per_simd: int  # occupancy, as registers and LDS allow


@dataclass(frozen=True)
class Build:
    target: str
    filename: str
    options: str
    returncode: int
    log: str
    usage: tuple[Usage, ...]
    # Functions the built code calls but does not define: on an AMD GPU none may be
    # left. A SPIR module leaves OpenCL's built-ins (mangled ``_Z`` names) to its
    # runtime, and for AES-192/256 the core's C99-inline helpers too, which a runtime
    # that does not inline them would fail to link (docs/kernel-targets.md).
    undefined: tuple[str, ...]

    @property
    def unresolved(self) -> tuple[str, ...]:
        """What the device's runtime would not supply (AMD: anything undefined)."""
        if self.target.startswith("spir"):
            return ()
        return self.undefined


def _usage(log: str) -> tuple[Usage, ...]:
    """Per kernel, from ``-Rpass-analysis=kernel-resource-usage`` remarks."""
    found: list[Usage] = []
    for block in re.split(r"remark: Function Name: ", log)[1:]:
        name = block.split()[0]

        def value(label: str, text: str = block) -> int:
            match = re.search(rf"{re.escape(label)}: (\d+)", text)
            return int(match.group(1)) if match else 0

        found.append(Usage(name, value("VGPRs"), value("SGPRs"),
                           value("LDS Size [bytes/block]"), value("ScratchSize [bytes/lane]"),
                           value("Occupancy [waves/SIMD]")))
    return tuple(found)


def build(target: Target, filename: str, options: str) -> Build:
    """Compile one kernel file for ``target`` with ``options``."""
    with tempfile.TemporaryDirectory() as folder:
        built = Path(folder) / "kernel.o"
        done = subprocess.run(
            [CLANG, "-x", "cl", "-cl-std=CL1.2", *target.clang_args, "-O3",
             f"-I{KERNEL_DIR}", *options.split(), "-Rpass-analysis=kernel-resource-usage",
             "-c", "-o", str(built), str(KERNEL_DIR / filename)],
            capture_output=True, text=True, timeout=300, check=False)
        undefined: list[str] = []
        kernels: set[str] = set()
        if done.returncode == 0:
            listed = subprocess.run([NM, str(built)], capture_output=True, text=True,
                                    timeout=60, check=True)
            for line in listed.stdout.splitlines():
                kind, name = line.split()[-2:]
                if kind == "U":
                    undefined.append(name)
                elif name.endswith(".kd"):  # an AMD kernel's descriptor
                    kernels.add(name.removesuffix(".kd"))
    # (Helper functions the compiler kept are reported too: only kernels are listed.)
    usage = tuple(u for u in _usage(done.stderr) if u.kernel in kernels)
    return Build(target.name, filename, options, done.returncode, done.stderr, usage,
                 tuple(undefined))


def build_each(target: Target, jobs: list[tuple[str, str]]) -> list[Build]:
    """:func:`build` for each (filename, options) of ``jobs``, in order, one clang per CPU
    at a time: one after another, a target's thirty builds took 47-52 s on the 2-core CI
    kind (2026-11-26), the longest tests of the suite."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda job: build(target, *job), jobs))


def missing() -> str | None:
    """What this machine lacks to build for every target (None: nothing)."""
    if shutil.which(CLANG) is None or shutil.which(NM) is None:
        return f"{CLANG} is not installed (Debian: apt-get install clang-16)"
    if not (DEVICE_LIBS / "opencl.bc").is_file():
        return "ROCm's device library is not installed (Debian: apt-get install rocm-device-libs)"
    return None


def main() -> int:
    """Build everything; print each AMD kernel's resources (AES-128, host key schedule:
    the others differ by a few registers) and any failure. Exit 1 on a failure."""
    if (lacking := missing()) is not None:
        print(lacking, file=sys.stderr)
        return 1
    failed = 0
    for target in TARGETS:
        print(f"\n### {target.name}\n\n`{option_sets(target)[0]}`\n")
        if target.vendor == "amd":
            print("| file | kernel | VGPRs | SGPRs | LDS bytes | scratch bytes | waves/SIMD |")
            print("|---|---|---:|---:|---:|---:|---:|")
        first_options = option_sets(target)[0]
        jobs = [(filename, options) for options in option_sets(target)
                for filename in GPU_KERNEL_FILES]
        for result in build_each(target, jobs):
            if result.returncode or result.unresolved:
                failed += 1
                print(f"FAILED {target.name} {result.filename} {result.options}\n{result.log}"
                      f"{' '.join(result.unresolved)}", file=sys.stderr)
            elif result.options == first_options and result.filename != "chunk_seal.cl":
                for usage in result.usage:  # (chunk_seal.cl: the other two files' kernels)
                    print(f"| {result.filename} | {usage.kernel} | {usage.vgprs} "
                          f"| {usage.sgprs} | {usage.lds_bytes} | {usage.scratch_bytes} "
                          f"| {usage.waves_per_simd} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
