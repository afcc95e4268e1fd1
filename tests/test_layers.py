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
    if not PYPROJECT.is_file():
        pytest.skip("the source tree is not beside tests/ here (tests/ copied alone)")
    status = cli.lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert status == 0, report
    assert "broken" in report and "0 broken" in report  # every contract was checked


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: a sibling that needs it
    gets a public name instead (the CUDA engine's driver-call check was imported as
    ``_check`` by four of its modules). Private modules (``aescl._cache``) are named so
    for users, and the house imports them freely."""
    import ast

    import aescl

    package = Path(aescl.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        here = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = here.rsplit(".", node.level - (path.name == "__init__.py"))[0] \
                if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                where = package.parent.joinpath(*module.split("."), name)
                if not (where.is_dir() or where.with_suffix(".py").is_file()):  # (a module)
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} "
                                 f"imports {name} from {module}")
    assert not found, "\n".join(found)
