"""aescl/_icd.py: finding unregistered OpenCL drivers in a real directory layout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aescl import _icd


@pytest.fixture(autouse=True)
def _icd_variable_restored():
    """``register_unregistered`` sets ``$OCL_ICD_VENDORS`` for the process, and
    ``monkeypatch.delenv`` of a variable that was not set records nothing to undo: the
    test's vendors folder (fake drivers, PoCL) then stayed in this test worker's
    environment, and every later subprocess of the worker (``aescl bench``, a cache
    test's run) saw those drivers, not the machine's: with 8 workers on the 4-GPU host,
    ``--device 0:1`` matched no device there and bench stored PoCL's figures."""
    before = os.environ.get("OCL_ICD_VENDORS")
    yield
    if before is None:
        os.environ.pop("OCL_ICD_VENDORS", None)
    else:
        os.environ["OCL_ICD_VENDORS"] = before


def make_root(tmp_path: Path, icds: dict[str, str], libraries: list[str]) -> Path:
    root = tmp_path / "root"
    vendors = root / _icd.SYSTEM_VENDORS_DIR
    vendors.mkdir(parents=True)
    for name, library in icds.items():
        (vendors / name).write_text(library + "\n")
    for library in libraries:
        path = root / library
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF")
    return root


def test_an_unregistered_nvidia_driver_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    root = make_root(tmp_path, {"pocl.icd": "libpocl.so.2"},
                     ["usr/local/nvidia/lib64/libnvidia-opencl.so.1"])
    report = _icd.discover(root)
    assert report.vendors_dir == root / _icd.SYSTEM_VENDORS_DIR
    assert [f.library for f in report.icd_files] == ["libpocl.so.2"]
    assert report.unregistered == {"nvidia": root / "usr/local/nvidia/lib64/libnvidia-opencl.so.1"}
    assert report.registered_by_aescl == {}  # found, not yet registered


def test_registration_keeps_the_system_entries_and_sets_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    icds = {"pocl.icd": "libpocl.so.2", "intel.icd": "/opt/intel/libigdrcl.so"}
    drivers = ["usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1", "opt/rocm/lib/libamdocl64.so"]
    root = make_root(tmp_path, icds, drivers)
    report = _icd.register_unregistered(_icd.discover(root), tmp_path / "cache")
    private = report.private_dir
    assert private is not None and os.environ["OCL_ICD_VENDORS"] == str(private)
    written = {p.name: p.read_text().strip() for p in private.glob("*.icd")}
    assert written == {
        "pocl.icd": "libpocl.so.2",
        "intel.icd": "/opt/intel/libigdrcl.so",
        "aescl-nvidia.icd": str(root / "usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1"),
        "aescl-amd.icd": str(root / "opt/rocm/lib/libamdocl64.so"),
    }
    assert set(report.registered_by_aescl) == {"nvidia", "amd"}
    # The same drivers give the same directory, so nothing piles up.
    rediscovered = _icd.discover(root, report.vendors_dir)
    again = _icd.write_private_vendors_dir(rediscovered, tmp_path / "cache")
    assert again == private and len(list((tmp_path / "cache").iterdir())) == 1


def test_a_registered_driver_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    root = make_root(tmp_path, {"nvidia.icd": "libnvidia-opencl.so.1"},
                     ["usr/lib64/libnvidia-opencl.so.1"])
    report = _icd.discover(root)
    assert report.unregistered == {}
    assert _icd.register_unregistered(report, tmp_path / "cache") is report
    assert "OCL_ICD_VENDORS" not in os.environ


def test_nothing_installed_means_nothing_to_register(tmp_path, monkeypatch):
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    root = make_root(tmp_path, {}, [])
    report = _icd.discover(root)
    assert report.icd_files == () and report.unregistered == {}


def test_a_user_vendors_directory_is_respected(tmp_path, monkeypatch):
    own = tmp_path / "my-vendors"
    own.mkdir()
    (own / "custom.icd").write_text("/opt/custom/libOpenCL-custom.so\n")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(own))
    root = make_root(tmp_path, {"pocl.icd": "libpocl.so.2"}, [])
    report = _icd.discover(root)
    assert report.vendors_dir == own
    assert [f.library for f in report.icd_files] == ["/opt/custom/libOpenCL-custom.so"]
