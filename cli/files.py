"""Choosing and writing the output file safely.

Output goes to a temporary file in the output's own directory, is fsynced, and
is renamed into place only when the whole job succeeded. Room for it may be
reserved ahead (:func:`reserving`); the file is cut back to what was written. On any failure, Ctrl-C
included, the temporary file is removed, so a failed run leaves the directory
exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import click

SUFFIX = ".aescl"
STDIO = "-"


class Refusal(click.UsageError):
    """A request refused before any work starts (exit code 2), reported in one line."""

    def show(self, file: object = None) -> None:
        click.echo(f"aescl: {self.format_message()}", err=True)


def default_output(input_path: str, decrypt: bool) -> str:
    """``INPUT.aescl`` when encrypting; ``INPUT`` without ``.aescl`` when decrypting."""
    if input_path == STDIO:
        return STDIO
    if not decrypt:
        return input_path + SUFFIX
    if input_path.endswith(SUFFIX) and len(input_path) > len(SUFFIX):
        return input_path[: -len(SUFFIX)]
    raise Refusal(f"cannot name the output for {input_path} (it does not end in {SUFFIX}); "
                  "use -o")


def check_output(input_path: str, output_path: str, force: bool) -> None:
    """Refuse a terminal, the input itself, or an existing file without ``--force``."""
    if output_path == STDIO:
        if sys.stdout.isatty():
            raise Refusal("refusing to write binary output to a terminal; use -o FILE or "
                          "redirect standard output")
        return
    output = Path(output_path)
    if input_path != STDIO and output.exists() and os.path.samefile(input_path, output):
        raise Refusal(f"the output {output_path} is the input file itself")
    if output.exists() and not force:
        raise Refusal(f"{output_path} exists; use --force to replace it")
    if output.is_dir():
        raise Refusal(f"{output_path} is a directory")
    if not output.resolve().parent.is_dir():
        raise Refusal(f"the directory of {output_path} does not exist")


@contextlib.contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    if path == STDIO:
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as handle:
            yield handle


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[BinaryIO]:
    """Yield a file that becomes ``path`` only if the block finishes without an exception."""
    if path == STDIO:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path).resolve()
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part",
                                     dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            written = handle.tell()
            if os.fstat(fd).st_size > written:  # room reserved beyond the output
                os.ftruncate(fd, written)
            os.fsync(fd)
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


# Below this an output is written in a few milliseconds: reserving its room first saves
# nothing and costs the thread and the C library lookup.
RESERVE_MIN_BYTES = 16 << 20


def _linux_fallocate() -> object | None:
    """fallocate(2) from the C library, where there is one."""
    import ctypes  # here, not at the top: 3 ms of every run, for large outputs only

    try:
        library = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    function = getattr(library, "fallocate64", None) or getattr(library, "fallocate", None)
    if function is None:  # not Linux
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


def _room_for(fd: int, nbytes: int) -> bool:
    """Whether the file system has ``nbytes`` free: a reservation that cannot
    succeed would only fill it up, step by step."""
    try:
        status = os.fstatvfs(fd)
    except OSError:
        return False
    return nbytes <= status.f_bavail * status.f_frsize


@contextlib.contextmanager
def reserving(output: BinaryIO, nbytes: int | None) -> Iterator[None]:
    """Allocate ``nbytes`` for a new, empty :func:`atomic_output` file on a thread
    while the block runs, and wait for it when the block ends.

    The block is the job: it starts by finding and setting up the device, which
    leaves the CPU idle for a few tenths of a second. Writing into allocated room
    is faster, because a page-cache file system (tmpfs) allocates and zeroes each
    page on first write; on the H200 host, 4 GiB went into /dev/shm in 0.70 s
    from empty and in 0.43 s after a 0.28 s reservation. The reservation is only
    a hint: without the room free it is not tried, a failure is ignored, and the
    writes report any real problem. atomic_output cuts the file back to what was written.

    The block may write meanwhile, because fallocate(2) never changes data that is
    there and its size only grows. That is why it is called directly rather than
    through os.posix_fallocate: where a file system lacks fallocate, the C library
    emulates it by writing to every block, which would race with the job's writes
    (and be slower than the writes it would speed up).
    """
    fd = output.fileno()
    worth_it = nbytes is not None and nbytes >= RESERVE_MIN_BYTES
    fallocate = _linux_fallocate() if worth_it and _room_for(fd, nbytes) else None
    if fallocate is None:
        yield
        return
    # One call, although a write that comes meanwhile waits for all of it (the file
    # system holds the file's lock): in steps, each step would wait for the GIL,
    # which device discovery holds (measured: slower overall).
    thread = threading.Thread(target=fallocate, args=(fd, 0, 0, nbytes),
                              name="aescl-reserve", daemon=True)
    thread.start()  # ctypes calls run without the GIL
    try:
        yield
    finally:
        thread.join()
