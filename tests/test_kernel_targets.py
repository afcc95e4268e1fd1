"""Every GPU kernel builds for AMD GPUs (gfx90a, gfx1100 in wave32 and wave64) and a
generic SPIR target, with the options aescl would choose there (tools/kernel_targets.py,
through Debian's clang-16 and ROCm device library; skipped, visibly, without them)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

_TOOL = Path(__file__).resolve().parent.parent / "tools" / "kernel_targets.py"
if not _TOOL.is_file():  # (tests/ copied alone, as on the GPU machine)
    pytest.skip("the source tree (tools/) is not beside tests/ here", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("kernel_targets", _TOOL)
assert _spec is not None and _spec.loader is not None
targets = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = targets  # (its dataclasses look their module up)
_spec.loader.exec_module(targets)

pytestmark = pytest.mark.skipif(targets.missing() is not None,
                                reason=str(targets.missing()))


@pytest.mark.parametrize("target", targets.TARGETS, ids=lambda t: t.name)
def test_every_gpu_kernel_builds_with_aescls_options(target):
    option_sets = targets.option_sets(target)
    assert len(option_sets) == 6  # three key sizes, two key schedules
    jobs = [(filename, options) for options in option_sets
            for filename in targets.GPU_KERNEL_FILES]
    for result in targets.build_each(target, jobs):
        where = (target.name, result.filename, result.options)
        assert result.returncode == 0, (*where, result.log)
        # (A helper left uninlined and undefined: the program would not link.)
        assert result.unresolved == (), where
        if target.vendor != "amd":
            continue
        assert result.usage, result.log  # clang reported every kernel's resources
        for usage in result.usage:
            assert usage.lds_bytes <= target.local_mem_bytes, usage
            assert usage.scratch_bytes == 0, usage  # nothing spilled
            assert 0 < usage.vgprs <= target.vgpr_limit, usage


def test_the_amd_defaults_are_amds_not_nvidias():
    amd = next(t for t in targets.TARGETS if t.vendor == "amd")
    options = dict(re.findall(r"-D(\w+)=(\w+)", targets.option_sets(amd)[0]))
    assert options["AES_BYTE_PERMUTE"] == "0"  # PRMT is NVIDIA's PTX
    assert options["AES_TABLES_IN_LOCAL"] == "1"
    # A quarter of the compute unit's 64 KiB of LDS: four work-groups stay resident.
    assert options["AES_TABLE_LANES"] == "16"
    result = targets.build(amd, "aes_ctr.cl", targets.option_sets(amd)[0])
    (ctr,) = result.usage
    assert ctr.lds_bytes == 16 * 1024 and ctr.waves_per_simd >= 4, ctr


def test_a_kernel_that_does_not_compile_fails_the_build(tmp_path):
    broken = targets.Target("gfx90a-broken", targets.TARGETS[0].clang_args, 65536, 256, 1,
                            "amd", 512)
    result = targets.build(broken, "aes_ctr.cl", "-DAES_ROUNDS=10 -DAES_BYTE_PERMUTE=1")
    assert result.returncode != 0 and "prmt" in result.log.lower()
