"""``aescl keygen``: a new random key file."""

from __future__ import annotations

from pathlib import Path

import click

from aescl import fileformat

from .exits import EXIT_FAILED, JobFailed, Refusal


@click.command()
@click.option("-o", "--output", "output_path", metavar="FILE", required=True,
              help="Where to write the new key file (mode 0600).")
@click.option("-f", "--force", is_flag=True, help="Replace an existing file.")
def keygen(output_path: str, force: bool) -> None:
    """Write a new random 256-bit key file (64 hex digits) for --key-file."""
    path = Path(output_path)
    if path.is_dir():
        raise Refusal(f"{output_path} is a directory")
    if path.exists() and not force:
        raise Refusal(f"{output_path} exists; use --force to replace it")
    try:
        if force and path.exists():
            path.unlink()
        fileformat.write_new_key_file(path)
    except OSError as exc:
        raise JobFailed(f"cannot write {output_path}: {exc.strerror}", EXIT_FAILED) from None
