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
from aescl import scheduler
from aescl.devices import host_device, matches


def selected_devices() -> list[aescl.Device]:
    """The OpenCL devices the device tests run on (the host engine has tests of its own)."""
    spec = os.environ.get("AESCL_TEST_DEVICES", "").strip()
    available = [d for d in aescl.devices() if d.is_opencl]
    if not spec:
        return [d for d in available if not d.is_simulator]
    if spec == "all":
        return available
    wanted = [s for s in spec.split(",") if s.strip()]
    chosen = [d for d in available if any(matches(d, s) for s in wanted)]
    if not chosen:
        raise pytest.UsageError(f"AESCL_TEST_DEVICES={spec!r} matches no device")
    return chosen


def an_opencl_device() -> aescl.Device:
    """The first selected OpenCL device; the test skips, visibly, where there is none."""
    chosen = selected_devices()
    if not chosen:
        pytest.skip("no OpenCL device on this machine")
    return chosen[0]


def engine_targets() -> list[aescl.Device | list[str]]:
    """What the public-API tests run on: each selected OpenCL device, the host engine,
    the first CUDA GPU where there is one (``cuda:0``, the CUDA engine on host data), and
    one job split between the host engine and an OpenCL device (aescl.scheduler)."""
    opencl = selected_devices()
    cuda = [d for d in aescl.devices() if d.is_cuda][:1]
    split = [["host", opencl[0].id]] if opencl else []  # (none: no OpenCL device here)
    return [*opencl, host_device(), *cuda, *split]


def _target_id(target: aescl.Device | list[str]) -> str:
    if isinstance(target, list):
        return "split-" + "+".join(target)
    return target.id if target.type == "host" or target.is_cuda \
        else f"{target.vendor}-{target.id}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        # A module that tests only the public API sets RUNS_ON_ENGINES: its tests then
        # run on the host engine and on a split job too.
        if getattr(metafunc.module, "RUNS_ON_ENGINES", False):
            chosen: list = engine_targets()
        else:
            chosen = selected_devices()
        metafunc.parametrize("device", chosen, ids=[_target_id(d) for d in chosen])


@pytest.fixture(autouse=True)
def _split_small_jobs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    # Test inputs are small; a split job must still split them, not hand them to one engine.
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get("device"), list):
        monkeypatch.setattr(scheduler, "SPLIT_MIN_BYTES", 0)


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


@pytest.fixture
def jax_gpu():
    """JAX on a CUDA GPU, with CuPy beside it (skipped, visibly, without them). JAX is
    told not to take most of the GPU's memory up front, as it does by default."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    pytest.importorskip("cupy", reason="CuPy is not installed (results for JAX go through it)")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU here")
    return jax, gpu
