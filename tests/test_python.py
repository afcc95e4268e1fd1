"""aescl/_python.py: aescl's helper processes import aescl from where it is installed,
never from an ``aescl/`` folder in the working directory. Each helper is started for
real, from a directory holding a planted ``aescl`` package that leaves a mark when
imported (before, all three imported it: the worker captured a message's chunk key)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import _python
from aescl.devices import host_device
from aescl.engines import start_up
from aescl.engines.host import processes, shared
from conftest import selected_devices


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The working directory, with an ``aescl/`` package in it; the path of its mark."""
    mark = tmp_path / "planted-aescl-ran"
    package = tmp_path / "aescl"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    for name in ("engines", "engines/host", "engines/opencl"):
        (package / name).mkdir(exist_ok=True)
        (package / name / "__init__.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    return mark


def test_a_helper_imports_the_installed_aescl(planted):
    done = subprocess.run(
        [*_python.command(code="import aescl; print(aescl.__file__)")],
        capture_output=True, text=True, check=True)
    assert done.stdout.strip() == aescl.__file__
    assert not planted.exists()


def test_bench_start_up_timing_runs_the_installed_aescl(planted):
    assert start_up.start_seconds(host_device(), runs=1) is not None
    assert not planted.exists()


@pytest.mark.skipif(not shared.AVAILABLE, reason="no memfd on this system")
def test_the_host_engines_workers_run_the_installed_aescl(planted):
    processes.shutdown()  # (workers started here, in the planted directory)
    key, iv, data = os.urandom(16), os.urandom(16), os.urandom(24 << 20)
    source, target = aescl.pinned_empty(len(data), "host"), aescl.pinned_empty(len(data), "host")
    source[:] = np.frombuffer(data, np.uint8)
    aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device="host").encrypt(
        source, output=target)
    assert processes._workers is not None, "the job did not go to the worker processes"
    assert not planted.exists()
    assert target.tobytes() == AES.new(key, AES.MODE_CTR, nonce=b"",
                                       initial_value=iv).encrypt(data)


def test_the_rounds_check_runs_the_installed_aescl(planted, monkeypatch, tmp_path):
    cpus = [d for d in selected_devices() if d.type == "cpu"]
    if not cpus:
        pytest.skip("no OpenCL CPU device on this machine")
    from aescl.engines.opencl import tuning

    monkeypatch.setattr(tuning, "_rounds_checked", {})
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    tuning.hardware_rounds_work(cpus[0], tuning.launch_config(cpus[0]))
    assert not planted.exists()


@pytest.mark.skipif(not shared.AVAILABLE, reason="no memfd on this system")
def test_helpers_carry_no_passphrase_from_the_environment(monkeypatch):
    """``AESCL_PASSPHRASE`` in the caller's environment went to every helper process."""
    monkeypatch.setenv("AESCL_PASSPHRASE", "correct horse battery staple")
    done = subprocess.run(
        [*_python.command(code="import os; print(os.environ.get('AESCL_PASSPHRASE'))")],
        capture_output=True, text=True, check=True, env=_python.environment())
    assert done.stdout.strip() == "None"
    processes.shutdown()
    source = aescl.pinned_empty(24 << 20, "host")
    target = aescl.pinned_empty(24 << 20, "host")
    aescl.new(bytes(16), aescl.MODE_CTR, nonce=bytes(8), device="host").encrypt(
        source, output=target)
    assert processes._workers is not None and processes._workers._all
    for worker in processes._workers._all:
        with open(f"/proc/{worker.process.pid}/environ", "rb") as environ:
            assert b"AESCL_PASSPHRASE" not in environ.read()
    processes.shutdown()
