"""New files that get their name only when complete: the CLI's outputs and the parts of
file jobs (aescl.filejobs) in this process.

A :class:`NewFile` is written with no name in its target's own directory (Linux
``O_TMPFILE``; elsewhere a hidden ``.aescl.HOST.PID.*.part`` name, mode 0600, which a
``kill -9`` leaves and the next NewFile in that directory removes), fsynced, and named by
:meth:`NewFile.publish`. Without ``replace`` the name is taken with link(2), which
fails if the name exists: a file that appeared meanwhile (another run writing the same
name) is never replaced. :meth:`NewFile.discard` removes it; after ``kill -9`` an
unnamed file leaves nothing at all, because the kernel frees it with the last
descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import _space


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


def _part_prefix() -> str:
    """The start of this process's hidden names: ``.aescl.HOST.PID.``, so that a later
    run can tell the parts a killed process left (:func:`_remove_stale_parts`)."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
    return f".aescl.{host}.{os.getpid()}."


_PART_NAME = re.compile(r"\.aescl\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.\w+\.part")


def _hidden_name(directory: Path) -> Path:
    return directory / f"{_part_prefix()}{secrets.token_hex(8)}.part"


_cleaned: set[str] = set()  # directories whose stale parts this process removed


def _remove_stale_parts(directory: Path) -> None:
    """Remove the hidden names in ``directory`` that a process of this host left when it
    was killed (``kill -9``: no clean-up ran): parts where files cannot be unnamed, and
    the name a finished file has for a moment before it replaces an output
    (:meth:`NewFile.publish` with ``replace``). Each is the user's own regular file,
    named by a process of this host that no longer runs. Once per directory and process."""
    if str(directory) in _cleaned:
        return
    _cleaned.add(str(directory))
    host = _part_prefix().split(".")[2]
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            found = _PART_NAME.fullmatch(entry.name)
            if found is None or found["host"] != host or _running(int(found["pid"])):
                continue
            with contextlib.suppress(OSError):
                status = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid():
                    os.unlink(entry.path)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's: running)
        return True
    return True


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


class NewFile:
    """A new file, open for reading and writing (mode 0600), that becomes ``target``
    only through :meth:`publish`. ``fd`` is its descriptor; :attr:`path` opens it again
    (from this process only, for an unnamed file)."""

    def __init__(self, target: str | os.PathLike[str], replace: bool = False) -> None:
        self.target = Path(target).resolve()
        self.replace = replace
        directory = self.target.parent
        try:
            self._link = _tmpfile_link(directory)
            if self._link is not None:
                self.fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600)
                self._temp_name: str | None = None
            else:  # (a hidden name, 0600: what a kill -9 leaves, until the next run here)
                _remove_stale_parts(directory)
                self.fd, self._temp_name = tempfile.mkstemp(prefix=_part_prefix(),
                                                            suffix=".part", dir=directory)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(directory)) from None

    @property
    def path(self) -> str:
        """A name that opens this file: its descriptor's, or its hidden temporary name."""
        return f"/proc/self/fd/{self.fd}" if self._temp_name is None else self._temp_name

    def _name_it(self, name: Path) -> None:
        if self._link is not None:
            self._link(self.fd, name)
        else:
            os.link(self._temp_name, name)  # type: ignore[arg-type]

    def publish(self) -> None:
        """fsync the file and give it its name (:func:`publish_path`'s rules). Closes
        the descriptor."""
        os.fsync(self.fd)
        try:
            if self._temp_name is None and not self.replace:
                try:
                    self._name_it(self.target)  # a link of the descriptor itself
                except FileExistsError:
                    raise _appeared(self.target) from None
                sync_directory(str(self.target.parent))
                return
            _remove_stale_parts(self.target.parent)
            while self._temp_name is None:  # a hidden name that nothing else has taken
                with contextlib.suppress(FileExistsError):
                    candidate = _hidden_name(self.target.parent)
                    self._name_it(candidate)
                    self._temp_name = str(candidate)
            publish_path(self._temp_name, self.target, self.replace)
            self._temp_name = None
        finally:
            self.discard()

    def _drop_temp_name(self) -> None:
        if self._temp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temp_name)
            self._temp_name = None

    def discard(self) -> None:
        """Close the file and remove it, unless it was published."""
        self._drop_temp_name()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def link_descriptor(fd: int, name: str | os.PathLike[str]) -> None:
    """Give the file open as ``fd`` the name ``name`` (which must not exist): the file
    itself, whatever its other names now point at (/proc's link, else linkat)."""
    failure: OSError | None = None
    for method in (_link_by_proc, _link_by_descriptor):
        try:
            method(fd, Path(name))
            return
        except FileExistsError:
            raise
        except OSError as exc:
            failure = exc
    assert failure is not None
    raise failure


def publish_descriptor(fd: int, target: str | os.PathLike[str], replace: bool) -> None:
    """:func:`publish_path` for a file known by its descriptor, never by a name that
    someone who can write the directory could have pointed elsewhere meanwhile."""
    target = Path(target)
    if not replace:
        try:
            link_descriptor(fd, target)
        except FileExistsError:
            raise _appeared(target) from None
    else:
        _remove_stale_parts(target.parent)
        while True:  # a hidden name that nothing else has taken, renamed over the target
            hidden = _hidden_name(target.parent)
            with contextlib.suppress(FileExistsError):
                link_descriptor(fd, hidden)
                break
        os.replace(hidden, target)
    if not os.path.samestat(os.lstat(target), os.fstat(fd)):
        raise OSError(errno.EEXIST, "was replaced as it was published", str(target))
    sync_directory(str(target.parent))


def _appeared(target: Path) -> OutputAppeared:
    return OutputAppeared(errno.EEXIST, "appeared while this run was writing it; nothing "
                          "was replaced (use --force to replace it)", str(target))


def publish_path(finished: str, target: str | os.PathLike[str], replace: bool) -> None:
    """Give the finished file named ``finished`` the name ``target`` (``finished`` is
    gone then): a link where the name must not exist yet (:class:`OutputAppeared` if it
    does), else rename(2) over the old file; then make the name survive a crash."""
    target = Path(target)
    if replace:
        os.replace(finished, target)
    else:
        try:
            os.link(finished, target)
        except FileExistsError:
            raise _appeared(target) from None
        os.unlink(finished)
    sync_directory(str(target.parent))


def sync_directory(directory: str) -> None:
    """fsync a directory, so that a name just given in it survives a crash (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
