"""Entry point of the ``aescl`` command: the command group, and a quick exit."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import click

import aescl

from . import bench, crypt, devices, keygen
from .exits import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_TERMINATED, Terminated


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(aescl.__version__, prog_name="aescl")
def main() -> None:
    """AES on any OpenCL device (NVIDIA, AMD, Intel GPUs and CPUs through PoCL)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def run() -> None:
    """The ``aescl`` console script: :func:`main`, then a quick exit.

    By the time main returns, every output file is written, closed and renamed
    into place, so the process leaves without tearing the OpenCL runtime down:
    that teardown (contexts, pinned staging, the driver's threads) took 0.1 s
    of every run on the H200 host, for resources the kernel frees at exit anyway.

    SIGTERM ends it as Ctrl-C does: the job's files are removed, one line says so,
    and the exit code is 143.
    """
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()  # standalone mode: always ends in SystemExit
        status: object = 0
    except SystemExit as exit_request:
        status = exit_request.code
    except Terminated:  # outside a job (a prompt, planning): nothing was written
        click.echo("aescl: terminated", err=True)
        status = EXIT_TERMINATED
    if status is None:
        status = 0
    elif not isinstance(status, int):  # sys.exit("message"), as Python reports it
        click.echo(str(status), err=True)
        status = EXIT_FAILED
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: nothing more to say to it
        status = status or EXIT_BROKEN_PIPE
    except (OSError, AttributeError) as exc:  # (no stdout at all: nothing to flush)
        if isinstance(exc, OSError):
            click.echo(f"aescl: cannot write standard output: {exc.strerror or exc}",
                       err=True)
            status = status or EXIT_FAILED
    with contextlib.suppress(OSError, AttributeError):
        sys.stderr.flush()
    os._exit(status)


for _command in (devices.devices, crypt.encrypt, crypt.decrypt, keygen.keygen,
                 bench.bench_command):
    main.add_command(_command)
