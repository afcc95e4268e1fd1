"""aescl/kernels.py: source loading, the build cache, build errors and launch settings."""

from __future__ import annotations

import os
import re
import warnings

import pyopencl as cl
import pytest

import aescl
from aescl.engines.opencl import kernels
from aescl.engines.opencl import runtime as opencl_runtime
from test_devices import fake


def test_includes_are_resolved_once_each():
    source = kernels.load_source("aes_ctr.cl")
    assert "#include" not in source
    assert source.count("#define AES_CORE_CL") == 1
    assert source.count("#define AES_VENDOR_H") == 1
    assert source.count("AES_CONSTANT_TABLE uint aes_te0[256]") == 1
    assert "__kernel void aes_ctr_xor" in source


def test_every_kernel_file_opens_with_its_contract():
    for path in kernels.kernel_dir().glob("*.cl"):
        head = path.read_text()[:3000]
        assert head.startswith("/*"), path.name
        assert "-D" in head, f"{path.name} does not say which -D options it reads"


def test_every_kernels_scalar_arguments_are_read_as_the_compiler_reports_them(device):
    """sources.scalar_arguments reads each kernel's signature from the source, and
    kernels.kernel gives pyopencl those types: a wrong one would pass a wrong value
    silently. Every kernel of every file, built here from source with the options aescl
    uses on the device, against the argument types its compiler reports
    (clGetKernelArgInfo): scalars as numpy's, by-value vectors and the key struct as
    their bytes, pointers as None."""
    from aescl.engines.opencl.tuning import launch_config
    from aescl.engines.sources import scalar_arguments

    context = opencl_runtime.device_runtime(device).context
    options = kernels.aes_options(14, "host", launch_config(device)) + " -cl-kernel-arg-info"
    scalars = {"uint": "uint32", "ulong": "uint64", "int": "int32", "long": "int64",
               "uchar": "uint8", "ushort": "uint16", "char": "int8", "short": "int16",
               "float": "float32"}
    by_value = {"uint4": "V16", "ulong2": "V16", "aes_key_argument": "V240"}
    checked = 0
    for path in sorted(kernels.kernel_dir().glob("*.cl")):
        source = kernels.load_source(path.name)
        # (the names from the source: NVIDIA's OpenCL crashes when asked for the kernel
        # names of a program that has none, as a file of helpers builds)
        names = sorted(set(re.findall(r"__kernel\s+void\s+(\w+)", source)))
        if not names:
            continue
        program = cl.Program(context, source).build(options=options)
        for name in names:
            try:
                made = cl.Kernel(program, name)
            except cl.LogicError:  # (left out of this build by its options)
                continue
            reported = [made.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME).strip()
                        for i in range(made.num_args)]
            expected = tuple(by_value.get(kind, scalars.get(kind)) for kind in reported)
            assert scalar_arguments(path.name, name) == expected, (path.name, name, reported)
            checked += 1
    assert checked >= 15


def _fresh_runtime(device):
    # Drop the in-memory programs so the next build must come from disk or source.
    opencl_runtime._runtimes.pop(device.id, None)
    return opencl_runtime.device_runtime(device)


OPTIONS = "-DAES_ROUNDS=10 -DAES_KEY_SCHEDULE_DEVICE=0 -DAES_TABLES_IN_LOCAL=0 -DAES_TABLE_LANES=1"


def test_programs_are_cached_on_disk_and_reused(device, tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    _fresh_runtime(device)
    kernels.build(device, "aes_ecb.cl", OPTIONS)
    stored = list((tmp_path / "kernels").glob("*.bin"))
    assert len(stored) == 1
    rt = _fresh_runtime(device)
    kernels.build(device, "aes_ecb.cl", OPTIONS)
    assert rt.build_log[-1].from_disk_cache
    # The cached program is a working program.
    key = bytes(range(16))
    assert aescl.new(key, aescl.MODE_ECB, device=device).encrypt(bytes(16)).hex() == (
        "c6a13b37878f5b826f4f8162a1c8d879"
    )


def test_the_cache_key_covers_source_options_and_device(device):
    base = kernels.cache_key(device, "src", "-DA=1")
    assert kernels.cache_key(device, "src ", "-DA=1") != base
    assert kernels.cache_key(device, "src", "-DA=2") != base
    other = fake("9:9", device.name, device.vendor, device.type)
    other = type(other)(**{**other.to_dict(), "driver_version": "something else"})
    assert kernels.cache_key(other, "src", "-DA=1") != base


def test_aescl_no_cache_writes_nothing(device, tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AESCL_NO_CACHE", "1")
    rt = _fresh_runtime(device)
    kernels.build(device, "aes_ctr.cl", OPTIONS)
    assert not (tmp_path / "kernels").exists()
    assert not rt.build_log[-1].from_disk_cache


def test_a_corrupt_cache_entry_is_rebuilt(device, tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    source = kernels.load_source("aes_ecb.cl")
    path = tmp_path / "kernels" / f"{kernels.cache_key(device, source, OPTIONS)}.bin"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a device binary")
    rt = _fresh_runtime(device)
    kernels.build(device, "aes_ecb.cl", OPTIONS)
    assert not rt.build_log[-1].from_disk_cache
    assert path.read_bytes() != b"not a device binary"


def test_a_build_failure_carries_the_compiler_log(device):
    broken = "__kernel void broken(__global uint *out) { out[0] = undefined_name; }"
    with pytest.raises(aescl.KernelBuildError) as caught:
        kernels.build_source(device, broken, "", "broken.cl")
    assert "undefined_name" in caught.value.build_log
    assert "broken.cl" in str(caught.value)


def test_launch_settings_follow_the_device_kind():
    gpu = kernels.default_config(fake("0:0", "GPU", "nvidia", "gpu", units=132))
    cpu = kernels.default_config(fake("1:0", "CPU", "pocl", "cpu", units=16))
    sim = kernels.default_config(fake("2:0", "Oclgrind", "oclgrind", "simulator"))
    assert gpu.tables_in_local and not cpu.tables_in_local
    assert gpu.table_lanes == 32 and cpu.table_lanes == 1
    # Inline PTX only where NVIDIA's compiler reads it; everyone else takes the portable form.
    amd = kernels.default_config(fake("3:0", "GPU", "amd", "gpu", units=60))
    assert gpu.byte_permute and not (cpu.byte_permute or sim.byte_permute or amd.byte_permute)
    assert "-DAES_BYTE_PERMUTE=1" in kernels.aes_options(10, "host", gpu)
    assert "-DAES_BYTE_PERMUTE=0" in kernels.aes_options(10, "host", amd)
    assert gpu.work_group_size == 256 and gpu.max_work_groups == 132 * 16
    assert sim.work_group_size <= 16
    tiny = type(fake("3:0", "old", "amd", "gpu"))(
        **{**fake("3:0", "old", "amd", "gpu").to_dict(), "local_mem_bytes": 1024,
           "max_work_group_size": 64}
    )
    small = kernels.default_config(tiny)
    assert not small.tables_in_local and small.work_group_size == 64
    # CPUs ask for their AES instructions (tests/test_core_variants.py); GPUs have none.
    assert cpu.hardware_rounds and not (gpu.hardware_rounds or sim.hardware_rounds)
    assert "-DAES_HARDWARE_ROUNDS=1" in kernels.aes_options(10, "host", cpu)
    # CPUs stream one span of blocks per work-item; GPUs keep the coalescing grid-stride.
    assert cpu.contiguous_runs and not (gpu.contiguous_runs or sim.contiguous_runs)
    assert "-DAES_CONTIGUOUS_RUNS=1" in kernels.aes_options(10, "host", cpu)


def test_the_hardware_rounds_request_can_be_turned_off(monkeypatch):
    cpu = fake("1:0", "CPU", "pocl", "cpu", units=16)
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")
    assert "-DAES_HARDWARE_ROUNDS=0" in kernels.aes_options(10, "host", kernels.default_config(cpu))
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "yes")
    with pytest.raises(ValueError, match="AESCL_HARDWARE_ROUNDS must be 0 or 1"):
        kernels.default_config(cpu)


def test_cpus_ask_for_the_widest_aes_instructions_they_have(monkeypatch):
    cpu = fake("1:0", "CPU", "pocl", "cpu", units=16)
    features = kernels.cpu_features()
    widest = (512 if {"vaes", "vpclmulqdq", "avx512f", "avx512bw"} <= features else
              256 if {"vaes", "vpclmulqdq", "avx2"} <= features else 0)
    config = kernels.default_config(cpu)
    assert config.wide_rounds == widest
    assert f"-DAES_WIDE_ROUNDS={widest}" in kernels.aes_options(10, "host", config)
    assert config.blocks_per_item == (32 if widest else 8)
    # $AESCL_WIDE_ROUNDS caps the width; 0 keeps the 128-bit instructions.
    monkeypatch.setenv("AESCL_WIDE_ROUNDS", "256")
    assert kernels.default_config(cpu).wide_rounds == min(widest, 256)
    monkeypatch.setenv("AESCL_WIDE_ROUNDS", "0")
    assert kernels.default_config(cpu) == kernels.without_wide_rounds(config)
    assert kernels.default_config(cpu).blocks_per_item == 8
    # A run that would not fill whole wide registers keeps the 128-bit instructions.
    monkeypatch.delenv("AESCL_WIDE_ROUNDS")
    monkeypatch.setenv("AESCL_BLOCKS_PER_ITEM", "5")
    assert kernels.default_config(cpu).wide_rounds == 0
    monkeypatch.setenv("AESCL_WIDE_ROUNDS", "128")
    with pytest.raises(ValueError, match="AESCL_WIDE_ROUNDS must be 0, 256 or 512"):
        kernels.default_config(cpu)


@pytest.mark.parametrize("local_bytes,group,override,lanes", [
    (65536, 256, "", 32),     # one copy per bank
    (49152, 256, "", 32),     # NVIDIA's 48 KiB: 32 KiB of copies fit
    (32768, 16, "", 16),      # no more copies than work-items in a group
    (32768, 256, "", 16),     # 16 KiB left for copies
    (40960, 256, "", 16),     # 24 KiB left: the power of two below (32 would leave 8 KiB,
                              # less than gcm_crypt_hash keeps beside the tables)
    (4096, 256, "", 1),
    (65536, 256, "1", 1),     # $AESCL_TABLE_LANES picks a layout to compare
    (65536, 256, "8", 8),
    (65536, 256, "64", 32),   # but never more than fits
])
def test_table_copies_fit_local_memory(monkeypatch, local_bytes, group, override, lanes):
    monkeypatch.setenv("AESCL_TABLE_LANES", override)
    assert kernels.table_lanes(local_bytes, group) == lanes


def test_an_unknown_key_schedule_is_refused():
    with pytest.raises(ValueError, match="key_schedule"):
        kernels.aes_options(10, "gpu", kernels.LaunchConfig(256, 1, True))


def test_a_successful_builds_remarks_are_kept_not_shown(device):
    source = '#warning "aescl remark probe"\n__kernel void probe(__global int *x) { x[0] = 1; }\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning that escapes fails the test
        program, log = kernels._compile(device, source, "", "probe.cl",
                                       opencl_runtime.device_runtime(device).context)
    assert program.get_info(cl.program_info.KERNEL_NAMES).strip(";") == "probe"
    if device.vendor in ("pocl", "oclgrind"):  # clang-based: reports #warning in the log
        assert "aescl remark probe" in log


@pytest.mark.parametrize("damage", ["cut in half", "cut to nothing", "one bit flipped",
                                    "no header (an older aescl's)"])
def test_a_damaged_cache_entry_is_rebuilt_never_loaded(device, tmp_path, damage):
    """A driver may crash on a damaged binary rather than refuse it (PoCL segfaulted on
    an entry cut short, in every later run): entries carry their length and checksum."""
    import subprocess
    import sys

    environment = {**os.environ, "AESCL_CACHE_DIR": str(tmp_path)}
    encrypt = ("import aescl; print(aescl.new(bytes(range(16)), aescl.MODE_ECB, "
               f"device={device.id!r}).encrypt(bytes(16)).hex())")

    def run_once() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", encrypt], capture_output=True,
                              text=True, env=environment, timeout=300, cwd=tmp_path)

    first = run_once()
    assert first.returncode == 0, first.stderr[-3000:]
    entries = sorted((tmp_path / "kernels").glob("*.bin"))
    assert entries
    for entry in entries:
        data = entry.read_bytes()
        assert kernels.binary_of_entry(data) is not None
        binary = kernels.binary_of_entry(data)
        entry.write_bytes({"cut in half": data[: len(data) // 2],
                           "cut to nothing": b"",
                           "one bit flipped": data[:-1] + bytes([data[-1] ^ 1]),
                           "no header (an older aescl's)": binary}[damage])
    result = run_once()
    assert result.returncode == 0, result.stderr[-2000:]  # not a crash (-11)
    assert result.stdout.strip() == "c6a13b37878f5b826f4f8162a1c8d879"
    # The ECB program's entry, which that run needed, is whole again. Its name as that
    # run made it, in a run of the same environment: this process's launch config may
    # be another (a GPU tuned here by an earlier test, where the runs found no tuning
    # in their new cache folder).
    name = ("import aescl; from aescl.engines.opencl import kernels, tuning; "
            f"device = aescl.engines.registry.resolve({device.id!r}); "
            "options = kernels.aes_options(10, 'host', tuning.launch_config(device)); "
            "print(kernels.cache_key(device, kernels.load_source('aes_ecb.cl'), options))")
    named = subprocess.run([sys.executable, "-c", name], capture_output=True, text=True,
                           env=environment, timeout=300, cwd=tmp_path)
    assert named.returncode == 0, named.stderr[-2000:]
    ecb = tmp_path / "kernels" / (named.stdout.strip() + ".bin")
    assert ecb in entries
    assert kernels.binary_of_entry(ecb.read_bytes()) is not None
