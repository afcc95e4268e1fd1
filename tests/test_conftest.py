"""tests/conftest.py: the suite collects, and runs its host-engine tests, on a machine
with no OpenCL at all (it raised IndexError at collection, so not even the host engine's
tests ran). Here OpenCL is hidden by an empty ICD vendors folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_suite_collects_and_runs_host_tests_without_opencl(tmp_path):
    empty = tmp_path / "no-vendors"
    empty.mkdir()
    environment = {**os.environ, "OCL_ICD_VENDORS": str(empty), "AESCL_TEST_DEVICES": ""}
    tests = Path(__file__).resolve().parent
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         "-p", "no:xdist", str(tests)],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(tests / "test_gcm.py")],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=600)
    summary = ran.stdout.strip().splitlines()[-1]
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert " passed" in summary, summary  # (the host engine: run)
