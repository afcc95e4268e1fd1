"""The house's layers (pyproject.toml, [tool.importlinter]): data flows one way, the
engines are peers over an interface that imports none of them, and only the OpenCL
engine and the device layer import pyopencl. Checked with import-linter on the aescl
that the tests import."""

from __future__ import annotations

from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_import_contracts_hold(capsys):
    cli = pytest.importorskip("importlinter.cli", reason="import-linter is in the test extra")
    status = cli.lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert status == 0, report
    assert "broken" in report and "0 broken" in report  # every contract was checked
