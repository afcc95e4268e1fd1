"""``python -m aescl``: the ``aescl`` command (cli/main.py)."""

from aescl.cli.main import run

if __name__ == "__main__":
    run()
