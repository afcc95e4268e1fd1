"""Choosing and writing the output file safely.

Output is written to a file with no name in the output's own directory
(``O_TMPFILE`` on Linux; elsewhere a hidden temporary name), fsynced, and given
its name only when the whole job succeeded. Without ``--force`` the name is
taken with link(2), which fails if the name exists: a file that appeared
meanwhile (another run writing the same name) is never replaced. On any
failure, Ctrl-C included, the file is removed; after ``kill -9`` an unnamed file
leaves nothing at all. Room may be reserved ahead (:func:`reserving`); the file
is cut back to what was written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import click

from aescl import _space, filejobs

STDIO = "-"


class Refusal(click.UsageError):
    """A request refused before any work starts (exit code 2), reported in one line."""

    def show(self, file: object = None) -> None:
        click.echo(f"aescl: {self.format_message()}", err=True)


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


class OutputAppeared(FileExistsError):
    """The output's name was taken while this run wrote it (by another run, say)."""


LinkFile = Callable[[int, Path], None]  # gives an open unnamed file a name, or raises


def _link_by_descriptor(fd: int, name: Path) -> None:
    """linkat(2) of the descriptor itself (AT_EMPTY_PATH)."""
    import ctypes

    library = _space.libc()
    if library is None or library.linkat(fd, b"", _AT_FDCWD, os.fsencode(name),
                                         _AT_EMPTY_PATH) != 0:
        code = ctypes.get_errno() if library is not None else errno.ENOSYS
        raise OSError(code, os.strerror(code), str(name))


def _link_by_proc(fd: int, name: Path) -> None:
    """link(2) of /proc/self/fd/N, followed: the way open(2) documents."""
    os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)


_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_link_methods: dict[int, LinkFile | None] = {}  # by file system (st_dev)


def _hidden_name(directory: Path) -> Path:
    return directory / f".aescl.{secrets.token_hex(8)}.part"


def _tmpfile_link(directory: Path) -> LinkFile | None:
    """How an unnamed file in ``directory`` can be given a name, tried once per file
    system on a throwaway file: kernels, file systems and privileges differ (linkat
    of a descriptor needs CAP_DAC_READ_SEARCH on older kernels; some kernels refuse
    the /proc route across their mounts). None: no unnamed files there."""
    if not hasattr(os, "O_TMPFILE"):
        return None
    device = os.stat(directory).st_dev
    if device not in _link_methods:
        _link_methods[device] = None
        with contextlib.suppress(OSError):
            probe = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
            try:
                for method in (_link_by_proc, _link_by_descriptor):
                    name = _hidden_name(directory)
                    with contextlib.suppress(OSError):
                        method(probe, name)
                        os.unlink(name)
                        _link_methods[device] = method
                        break
            finally:
                os.close(probe)
    return _link_methods[device]


def _unnamed_file(directory: Path) -> tuple[int, str | None, LinkFile | None]:
    """A new file open for reading and writing in ``directory``, mode 0600: with no
    name (and how to name it) where the system allows, else a hidden temporary name."""
    link = _tmpfile_link(directory)
    if link is not None:
        return os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600), None, link
    fd, temp_name = tempfile.mkstemp(prefix=".aescl.", suffix=".part", dir=directory)
    return fd, temp_name, None


def _publish(fd: int, temp_name: str | None, link: LinkFile | None, target: Path,
             replace: bool) -> None:
    """Give the finished file its name: a link where the name must not exist yet, else
    a hidden name first and then rename(2) over the old file."""
    def name_it(name: Path) -> None:
        if link is not None:
            link(fd, name)
        else:
            os.link(temp_name, name)  # type: ignore[arg-type]

    if not replace:
        try:
            name_it(target)
        except FileExistsError:
            raise OutputAppeared(errno.EEXIST, "appeared while this run was writing it; "
                                 "nothing was replaced (use --force to replace it)",
                                 str(target)) from None
        if temp_name is not None:
            os.unlink(temp_name)
        return
    while temp_name is None:  # a hidden name that nothing else has taken
        with contextlib.suppress(FileExistsError):
            candidate = _hidden_name(target.parent)
            name_it(candidate)
            temp_name = str(candidate)
    try:
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


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
    target = Path(path).resolve()
    try:
        fd, temp_name, link = _unnamed_file(target.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target.parent)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            written = handle.tell()
            if os.fstat(fd).st_size > written:  # room reserved beyond the output
                os.ftruncate(fd, written)
            os.fsync(fd)
            _publish(fd, temp_name, link, target, replace)
    except BaseException:
        if temp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
        raise
    filejobs.sync_directory(str(target.parent))  # the new name itself survives a crash


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
