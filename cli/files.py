"""Choosing and writing the output file safely.

Output is an :class:`aescl.atomicfile.NewFile`, named only when the whole job
succeeded (without ``--force`` never over a name that appeared meanwhile). On any
failure, Ctrl-C and SIGTERM included, the file is removed; after ``kill -9`` an
unnamed file leaves nothing at all. Room may be reserved ahead (:func:`reserving`);
the file is cut back to what was written.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from aescl import _space, filejobs
from aescl.atomicfile import NewFile

from .exits import STDIO, Refusal


def default_output(input_path: str, decrypt: bool) -> str:
    """``INPUT.aescl`` when encrypting; ``INPUT`` without ``.aescl`` when decrypting."""
    if input_path == STDIO:
        return STDIO
    try:
        return filejobs.default_output(input_path, decrypt)
    except ValueError as exc:
        raise Refusal(f"{exc}; use -o") from None


def check_output(input_path: str, output_path: str, force: bool) -> None:
    """Refuse a terminal, the input itself (also through standard input or output, as
    ``cat`` refuses it), an existing file without ``--force``, and anything but a file,
    a FIFO or a character device. A FIFO or character device is written as a stream
    (:func:`is_stream`): never replaced, so it needs no ``--force``."""
    if output_path == STDIO:
        if not _is_open(sys.stdout):
            raise Refusal("standard output is closed; use -o FILE")
        if sys.stdout.isatty():
            raise Refusal("refusing to write binary output to a terminal; use -o FILE or "
                          "redirect standard output")
        _refuse_same_file(input_path, output_path, _status(sys.stdout))
        return
    output = Path(output_path)
    try:
        status: os.stat_result | None = output.stat()
    except FileNotFoundError:
        status = None
    except OSError as exc:  # a loop of symbolic links, a name too long, ...
        raise Refusal(f"cannot use {output_path} as the output: "
                      f"{exc.strerror or exc}") from None
    _refuse_same_file(input_path, output_path, status)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise Refusal(f"{output_path} is a directory")
    if status is not None and is_stream(output_path):
        return
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise Refusal(f"{output_path} is not a regular file, a FIFO or a character device")
    if status is not None and not force:
        raise Refusal(f"{output_path} exists; use --force to replace it")
    if not output.resolve().parent.is_dir():
        raise Refusal(f"the directory of {output_path} does not exist")


def is_stream(path: str) -> bool:
    """Whether an output path is written as a stream, in place, as ``cat`` writes it:
    standard output, or an existing FIFO or character device (/dev/null, a tape)."""
    if path == STDIO:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _status(stream: object) -> os.stat_result | None:
    try:
        return os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def _refuse_same_file(input_path: str, output_path: str,
                      output: os.stat_result | None) -> None:
    """Refuse an output that is the input's own file: it would read what it writes."""
    if output is None or not stat.S_ISREG(output.st_mode):
        return
    try:
        source = _status(sys.stdin) if input_path == STDIO else os.stat(input_path)
    except OSError:
        return  # (the input is checked, and reported, where it is opened)
    if source is not None and (source.st_dev, source.st_ino) == (output.st_dev, output.st_ino):
        where = "standard output" if output_path == STDIO else output_path
        raise Refusal(f"the output ({where}) is the input file itself")


def _is_open(stream: object) -> bool:
    """Whether a standard stream is there: Python sets it to None when its descriptor
    was closed before the start."""
    try:
        os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def open_input(path: str) -> Iterator[BinaryIO]:
    if path == STDIO:
        if not _is_open(sys.stdin):
            raise Refusal("standard input is closed; name an INPUT file")
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as handle:
            yield handle


@contextlib.contextmanager
def atomic_output(path: str, replace: bool = False) -> Iterator[BinaryIO]:
    """Yield a file that becomes ``path`` only if the block finishes without an
    exception. An existing ``path`` is replaced only with ``replace``; one that
    appears meanwhile without it raises :class:`OutputAppeared`. Standard output, a
    FIFO and a character device are written in place (:func:`is_stream`)."""
    if path == STDIO:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if is_stream(path):  # a FIFO or a device: written in place, never replaced
        with open(os.open(path, os.O_WRONLY), "wb") as stream:
            yield stream
        return
    new = NewFile(path, replace)
    try:
        with os.fdopen(new.fd, "wb", closefd=False) as handle:
            yield handle
            handle.flush()
            written = handle.tell()
            if os.fstat(new.fd).st_size > written:  # room reserved beyond the output
                os.ftruncate(new.fd, written)
        new.publish()
    finally:
        new.discard()


# Below this an output is written in a few milliseconds: reserving its room first saves
# nothing and costs the thread and the C library lookup.
RESERVE_MIN_BYTES = 16 << 20


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
    there and its size only grows (aescl._space says why it is not posix_fallocate).
    """
    fd = output.fileno()
    worth_it = nbytes is not None and nbytes >= RESERVE_MIN_BYTES
    if not (worth_it and _space.can_reserve() and _room_for(fd, nbytes)):
        yield
        return
    # One call, although a write that comes meanwhile waits for all of it (the file
    # system holds the file's lock): in steps, each step would wait for the GIL,
    # which device discovery holds (measured: slower overall).
    thread = threading.Thread(target=_space.reserve, args=(fd, 0, nbytes),
                              name="aescl-reserve", daemon=True)
    thread.start()  # ctypes calls run without the GIL
    try:
        yield
    finally:
        thread.join()
