"""cli/main.py: the ``aescl`` command, run as a user runs it, in a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import aescl

# An absolute path: the pty tests exec it directly, without a PATH search.
AESCL = shutil.which("aescl", path=str(Path(sys.executable).parent)) or shutil.which("aescl")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AESCL, *args], capture_output=True, text=True, timeout=120)


def test_devices_lists_every_device_as_a_table():
    result = run("devices")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "TYPE", "VENDOR", "NAME"]
    for device in aescl.devices():
        row = next(line for line in lines[1:] if line.startswith(device.id + " "))
        assert device.name in row and device.vendor in row and device.driver_version in row
        # (each way over its PCIe link, where Linux describes it: the H200's 63.0 GB/s)
        link = device.pcie_gb_s
        assert ("GB/s" in row) == (link is not None)
        assert link is None or f"{link:.1f} GB/s" in row


def test_devices_json_has_every_field():
    result = run("devices", "--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert [d["id"] for d in listing["devices"]] == [d.id for d in aescl.devices()]
    first = listing["devices"][0]
    for name in ("name", "vendor", "type", "compute_units", "clock_mhz", "global_mem_bytes",
                 "local_mem_bytes", "max_alloc_bytes", "opencl_c_version", "driver_version"):
        assert name in first
    assert "registered_by_aescl" in listing["icd"]
    # The CUDA engine's GPUs (none here without a driver: tests/test_engine_cuda_engine.py
    # checks them against torch on a GPU).
    gpus = [d for d in listing["devices"] if d["engine"] == "cuda"]
    assert all(g["id"] == f"cuda:{n}" for n, g in enumerate(gpus))


def test_version_and_help():
    assert run("--version").stdout.strip().endswith(aescl.__version__)
    assert "devices" in run("--help").stdout


def test_devices_verbose_explains_the_setup():
    result = run("devices", "--verbose")
    assert result.returncode == 0, result.stderr
    assert "ICD vendors directory:" in result.stdout and "kernel cache:" in result.stdout
    listing = json.loads(run("devices", "--verbose", "--json").stdout)
    assert any(f["message"].startswith("kernel cache:") for f in listing["diagnostics"])


def test_python_dash_m_aescl_is_the_cli(tmp_path):
    def module(*args: str) -> subprocess.CompletedProcess:
        # Started outside the repository, whose aescl/ would shadow the installed package.
        return subprocess.run([sys.executable, "-m", "aescl", *args], capture_output=True,
                              cwd=tmp_path, timeout=120)

    assert module("--version").stdout.decode().strip().endswith(aescl.__version__)
    (tmp_path / "note.txt").write_bytes(b"round trip\n" * 100)
    for args in (["keygen", "-o", "k.key"], ["encrypt", "--key-file", "k.key", "note.txt"],
                 ["decrypt", "--key-file", "k.key", "-o", "back.txt", "note.txt.aescl"]):
        result = module(*args)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "back.txt").read_bytes() == b"round trip\n" * 100
    refused = module("encrypt", "--no-such-option")
    assert refused.returncode == 2 and b"python -m aescl encrypt" in refused.stderr
