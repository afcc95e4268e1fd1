"""How a command ends: exit codes (docs/cli.md), refusals before any work, and
every failure of a job as one line with its code."""

from __future__ import annotations

import contextlib
import errno
import sys

import click

import aescl
from aescl.atomicfile import OutputAppeared

STDIO = "-"  # standard input or output, as an INPUT or -o

EXIT_FAILED = 1       # the job failed: I/O, OpenCL or input that is not what was promised
EXIT_USAGE = 2        # refused before any work: bad arguments or an unsafe output
EXIT_REJECTED = 3     # the data was rejected: wrong key, bad padding, tampering, truncation
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
EXIT_BROKEN_PIPE = 141  # the reader of standard output went away: stop quietly, as `cat` does


class Refusal(click.UsageError):
    """A request refused before any work starts (exit code 2), reported in one line."""

    def show(self, file: object = None) -> None:
        click.echo(f"aescl: {self.format_message()}", err=True)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every clean-up runs, as Ctrl-C's does."""


class JobFailed(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:  # one line: "aescl: <what went wrong>"
        click.echo(f"aescl: {self.format_message()}", err=True)



@contextlib.contextmanager
def job_errors(decrypt: bool, output_label: str):
    """Every failure of a job as one line and its exit code (docs/cli.md)."""
    try:
        yield
    except aescl.WrongKeyError:
        raise JobFailed("wrong key or passphrase", EXIT_REJECTED) from None
    except aescl.KeySourceError as exc:
        raise JobFailed(str(exc), EXIT_USAGE) from None
    except aescl.TruncatedError as exc:  # encrypting: the input changed, not bad data
        raise JobFailed(str(exc), EXIT_REJECTED if decrypt else EXIT_FAILED) from None
    except (aescl.AuthenticationError, aescl.FormatError, aescl.PaddingError) as exc:
        raise JobFailed(str(exc), EXIT_REJECTED) from None
    except KeyboardInterrupt:
        click.echo("aescl: interrupted; no output written", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        click.echo("aescl: terminated; no output written", err=True)
        sys.exit(EXIT_TERMINATED)
    except BrokenPipeError:
        if output_label != STDIO:
            raise JobFailed(f"broken pipe writing {output_label}", EXIT_FAILED) from None
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as exc:
        raise JobFailed(describe_os_error(exc, output_label), EXIT_FAILED) from None
    except (ValueError, aescl.AesclError) as exc:
        raise JobFailed(str(exc).splitlines()[0], EXIT_FAILED) from None


def describe_os_error(exc: OSError, output_path: str) -> str:
    """One line for people about a failed read or write."""
    where = exc.filename or output_path
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device for {output_path}; nothing was written"
    if exc.errno == errno.EDQUOT:
        return f"disk quota exceeded writing {output_path}; nothing was written"
    if exc.errno == errno.EFBIG:
        return (f"{output_path} would exceed the file size limit (ulimit -f) or the file "
                "system's largest file; nothing was written")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied: {where}"
    if exc.errno == errno.EROFS:
        return f"read-only file system: {where}"
    if isinstance(exc, OutputAppeared):
        return f"{exc.filename} {exc.strerror}"
    detail = exc.strerror or str(exc)
    return f"{detail}: {exc.filename}" if exc.filename else detail


