"""pyproject.toml: the wheel ships the kernels and the CLI, and runs from a fresh venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (ROOT / "pyproject.toml").is_file(),
    reason="the source tree is not beside tests/ here (tests/ copied alone)")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a copy holding only what a clean clone has, so nothing built
    # earlier in the checkout can leak into the wheel.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("aescl", "cl", "cli"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(source)],
        check=True,
    )
    (built,) = dist.glob("aescl-*.whl")
    return built


def test_the_wheel_holds_the_kernels_and_the_cli(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for kernel in (ROOT / "cl").iterdir():
        if kernel.suffix in (".cl", ".h"):
            assert f"aescl/cl/{kernel.name}" in names
    assert "aescl/cli/main.py" in names and "aescl/py.typed" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "aescl = aescl.cli.main:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


def _dependency_paths() -> list[str]:
    # Where this interpreter finds pyopencl, numpy, click...: its site-packages
    # and PYTHONPATH, minus any source checkout of aescl.
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in dict.fromkeys(paths) if not (Path(p) / "pyproject.toml").exists()]


def test_the_wheel_runs_from_a_fresh_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # Without PYTHONPATH, so that no aescl outside the venv counts as installed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], env=env, check=True)
    # The venv's own site-packages comes first, so the wheel's aescl is the one imported.
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    (site / "outer-dependencies.pth").write_text("\n".join(_dependency_paths()) + "\n")

    listing = subprocess.run([str(env_dir / "bin" / "aescl"), "devices", "--json"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(listing.stdout)["devices"]

    round_trip = (
        "import os, aescl\n"
        "from aescl.engines.sources import kernel_dir\n"
        "key, iv, data = os.urandom(32), os.urandom(16), os.urandom(1000)\n"
        "c = aescl.new(key, aescl.MODE_CTR, nonce=b'', initial_value=iv)\n"
        "d = aescl.new(key, aescl.MODE_CTR, nonce=b'', initial_value=iv)\n"
        "assert d.decrypt(c.encrypt(data)) == data\n"
        "print(aescl.__file__); print(kernel_dir())\n"
    )
    result = subprocess.run([str(python), "-c", round_trip], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    module_file, kernels = result.stdout.split()
    assert Path(module_file).is_relative_to(env_dir)
    assert Path(kernels).is_relative_to(env_dir) and (Path(kernels) / "aes_core.cl").is_file()
