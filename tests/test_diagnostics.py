"""aescl/diagnostics.py: what ``aescl devices --verbose`` explains, for each situation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from aescl._icd import IcdFile, IcdReport
from aescl.diagnostics import diagnose
from test_devices import MACHINE

VENDORS = Path("/etc/OpenCL/vendors")
POCL_ONLY = IcdReport(VENDORS, (IcdFile(VENDORS / "pocl.icd", "libpocl.so.2"),))
NVIDIA = Path("/usr/lib/libnvidia-opencl.so.1")


def messages(findings):
    return [f"{f.level}: {f.message} | {f.fix}" for f in findings]


def test_a_healthy_setup_lists_icds_platforms_and_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    text = "\n".join(messages(diagnose(POCL_ONLY, MACHINE[1:3])))
    assert "pocl.icd -> libpocl.so.2" in text
    assert "platform pocl: 1 device(s)" in text and "platform nvidia: 1 device(s)" in text
    assert f"kernel cache: {tmp_path / 'kernels'} (on, 0 programs)" in text
    assert "problem" not in text


def test_a_driver_aescl_registered_is_explained_with_the_permanent_fix():
    report = IcdReport(VENDORS, POCL_ONLY.icd_files, {"nvidia": NVIDIA}, Path("/cache/vendors-1"))
    (note,) = [f for f in diagnose(report, MACHINE[1:3]) if f.level == "note"]
    assert str(NVIDIA) in note.message and "registered" in note.message
    assert note.fix.endswith("/etc/OpenCL/vendors/nvidia.icd")


def test_an_unregistrable_driver_is_a_problem():
    report = IcdReport(VENDORS, (), {"amd": Path("/opt/rocm/lib/libamdocl64.so")}, None)
    problems = [f for f in diagnose(report, MACHINE[1:2]) if f.level == "problem"]
    assert problems and "libamdocl64.so" in problems[0].message


def test_no_platform_says_what_to_install():
    (problem,) = [f for f in diagnose(IcdReport(VENDORS, ()), []) if f.level == "problem"]
    assert "no OpenCL platform" in problem.message and "aescl[pocl]" in problem.fix


def test_a_simulator_alone_is_a_problem():
    problems = [f for f in diagnose(POCL_ONLY, MACHINE[:1]) if f.level == "problem"]
    assert problems and "simulator" in problems[0].message


def test_two_pocl_runtimes_are_pointed_out():
    second = dataclasses.replace(MACHINE[1], id="5:0", platform_version="OpenCL 3.0 PoCL 3.0")
    notes = [f for f in diagnose(POCL_ONLY, [MACHINE[1], second]) if f.level == "note"]
    assert notes and "more than one PoCL" in notes[0].message


def test_the_cache_state_follows_aescl_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AESCL_NO_CACHE", "1")
    assert any("off (AESCL_NO_CACHE)" in m for m in messages(diagnose(POCL_ONLY, MACHINE[1:2])))
