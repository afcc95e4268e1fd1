"""``aescl keygen``: a new random key file."""

from __future__ import annotations

import os
import stat

import click

from aescl import fileformat
from aescl.atomicfile import OutputAppeared

from .exits import EXIT_FAILED, JobFailed, Refusal


@click.command()
@click.option("-o", "--output", "output_path", metavar="FILE", required=True,
              help="Where to write the new key file (mode 0600).")
@click.option("-f", "--force", is_flag=True, help="Replace an existing key file.")
def keygen(output_path: str, force: bool) -> None:
    """Write a new random 256-bit key file (64 hex digits) for --key-file.

    The file gets its name only when it is whole: a full disk leaves nothing. --force
    replaces a regular file only, never a device or a FIFO."""
    try:
        status: os.stat_result | None = os.stat(output_path)
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise Refusal(f"cannot use {output_path}: {exc.strerror}") from None
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise Refusal(f"{output_path} is a directory")
        if not stat.S_ISREG(status.st_mode):
            raise Refusal(f"{output_path} is not a regular file; keygen writes only files")
        if not force:
            raise Refusal(f"{output_path} exists; use --force to replace it")
    try:
        fileformat.write_new_key_file(output_path, replace=force)
    except OutputAppeared as exc:
        raise JobFailed(f"{output_path} {exc.strerror}", EXIT_FAILED) from None
    except OSError as exc:
        raise JobFailed(f"cannot write {output_path}: {exc.strerror}", EXIT_FAILED) from None
