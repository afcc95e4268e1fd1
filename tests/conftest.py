"""Device selection for the whole suite.

``AESCL_TEST_DEVICES`` chooses which OpenCL devices the device tests run on: a
comma-separated list of device specs (``pocl``, ``nvidia``, ``0:1``, ...), or
``all`` for every device including simulators. By default every non-simulator
device runs every device test, the way pyopencl's ``PYOPENCL_TEST`` works.
"""

from __future__ import annotations

import os

import pytest

import aescl
from aescl.devices import matches


def selected_devices() -> list[aescl.Device]:
    spec = os.environ.get("AESCL_TEST_DEVICES", "").strip()
    available = aescl.devices()
    if not spec:
        return [d for d in available if not d.is_simulator]
    if spec == "all":
        return available
    wanted = [s for s in spec.split(",") if s.strip()]
    chosen = [d for d in available if any(matches(d, s) for s in wanted)]
    if not chosen:
        raise pytest.UsageError(f"AESCL_TEST_DEVICES={spec!r} matches no device")
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        chosen = selected_devices()
        metafunc.parametrize("device", chosen, ids=[f"{d.vendor}-{d.id}" for d in chosen])


@pytest.fixture(params=["host", "device"])
def key_schedule(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def gpu_device() -> aescl.Device:
    gpus = [d for d in aescl.devices() if d.type == "gpu"]
    if not gpus:
        pytest.skip("no GPU OpenCL device on this machine")
    return max(gpus, key=lambda d: d.compute_units)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # One kernel cache for the whole session, away from the user's own.
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "aescl-cache"))
