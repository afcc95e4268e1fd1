"""Encrypting and decrypting sets of files as one job: plan it, run its tasks anywhere,
publish the outputs only when every task succeeded.

A job is a list of tasks that any process can run (this one, or Dask workers on
other machines, :mod:`aescl.distributed`): a whole file, or one range of whole
chunks of a large file. The planning process (the client) checks the outputs,
prepares the keys and creates every output under a hidden part name in the
output's directory, mode 0600. Tasks only write into part files that exist (they
never create one), so that a task still running after the job was abandoned
cannot leave a file behind; a rerun task (its worker died) rewrites its part
from the start, or its range in place. When all tasks succeeded the client gives
every part its name, refusing any name that appeared meanwhile unless
``force``; on any failure it removes every part, so nothing is published.

A split file is byte-identical to the same file encrypted in one process with the
same key and payload salt: its header, salt and commitment are written by the
client, and each range seals chunks ``first .. first+count`` at their offsets
(:mod:`aescl.chunkformat`). A file set gives each file a fresh random payload
salt per attempt, so a rerun never reuses a nonce on other data.

Paths are local paths, ``file://`` URLs, or any URL fsspec knows (fsspec is
imported only for those). Splitting a file needs writes at offsets into one
file, so it is done where the output is a local (or shared POSIX) path; on
other file systems each file is one task.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from . import chunked, chunkformat
from ._streams import read_full
from .atomicfile import NewFile, publish_descriptor, publish_path
from .engines import DEFAULT_BATCH_CHUNKS
from .errors import InputChangedError, check_whole_number
from .fileformat import KeyRing, PayloadKey, decrypt_payload, encrypt_payload

SUFFIX = ".aescl"
# Ranges of a split file: big enough that the device pipeline runs at speed, small enough
# that a 16 GiB file keeps 16 workers busy with a few dozen tasks.
DEFAULT_RANGE_BYTES = 256 << 20

Devices = str | list[str] | None  # specs, resolved by each worker on its own machine
Stamp = tuple[int, int | None]  # (size, modification time in ns, local files only)

# One task at a time per process: a task already uses every chosen device (and an
# OpenCL device takes one job at a time anyway: DeviceRuntime in engines/opencl/runtime.py),
# so a Dask worker's second thread would only hold a second file open and more buffers.
_one_task_at_a_time = threading.Lock()


class Location:
    """A file named by a local path or a URL: local files are used directly (with
    ``os``), anything else through fsspec."""

    def __init__(self, url: str) -> None:
        self.url = str(url)
        self.path = self.url[len("file://"):] if self.url.startswith("file://") else self.url
        self.is_local = "://" not in self.path
        if self.is_local:  # made here, on the client: a worker's directory is another
            self.path = os.path.abspath(self.path)

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def _fs(self) -> tuple[Any, str]:
        import fsspec

        return fsspec.core.url_to_fs(self.url)

    def size(self) -> int:
        if self.is_local:
            return os.path.getsize(self.path)
        fs, path = self._fs()
        return int(fs.size(path))

    def stamp(self, handle: BinaryIO | None = None) -> Stamp:
        """What identifies this file's content as planned: its size, and for a local
        file its modification time (of ``handle``, the file as opened, if given)."""
        if not self.is_local:
            return (self.size(), None)
        status = os.fstat(handle.fileno()) if handle is not None else os.stat(self.path)
        if not stat.S_ISREG(status.st_mode):
            return (0, None)  # a FIFO or device is read as a stream: nothing to compare
        return (status.st_size, status.st_mtime_ns)

    def check_stamp(self, handle: BinaryIO, planned: Stamp) -> None:
        """Raise :class:`InputChangedError` unless the opened file is the one planned."""
        if self.stamp(handle if self.is_local else None) != planned:
            raise InputChangedError(
                f"{self.url} is not the file that was planned: it changed since, or this "
                "machine sees another file under that name; nothing was written")

    def exists(self) -> bool:
        if self.is_local:
            return os.path.lexists(self.path)
        fs, path = self._fs()
        return bool(fs.exists(path))

    def open_read(self) -> BinaryIO:
        if self.is_local:
            return open(self.path, "rb")
        fs, path = self._fs()
        return fs.open(path, "rb")

    def sibling(self, name: str) -> Location:
        """A file named ``name`` in the same directory."""
        if self.is_local:
            return Location(os.path.join(os.path.dirname(os.path.abspath(self.path)), name))
        fs, path = self._fs()
        return Location(fs.unstrip_protocol(posixpath.join(posixpath.dirname(path), name)))

    def create_empty(self, size: int = 0) -> None:
        """Create the file (it must not exist), owner-only where the file system allows."""
        if self.is_local:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            return
        fs, path = self._fs()
        fs.touch(path)

    @contextlib.contextmanager
    def open_existing(self, truncate: bool) -> Iterator[BinaryIO]:
        """Open for writing a file that must already exist; flushed and synced on success."""
        if not self.is_local:
            fs, path = self._fs()
            with fs.open(path, "wb") as handle:
                yield handle
            return
        fd = os.open(self.path, os.O_WRONLY | (os.O_TRUNC if truncate else 0))
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(fd)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.is_local:
                os.unlink(self.path)
            else:
                fs, path = self._fs()
                fs.rm(path)

    def publish_as(self, target: Location, replace: bool) -> None:
        """Give this finished file the name ``target``: never over an existing file
        unless ``replace``."""
        if self.is_local and target.is_local:
            publish_path(self.path, target.path, replace)
            return
        if not replace and target.exists():
            raise FileExistsError(f"{target.url} exists")
        fs, path = self._fs()
        fs.mv(path, target._fs()[1])


class PartReplaced(OSError):
    """A job's part file is not the file the client made: its name now points at another
    file (a link, or a file put in its place by someone who can write the directory)."""


class NamedPart(Location):
    """A local part file of a job whose tasks run in other processes (Dask workers): it
    needs a name they can open, made here with ``O_EXCL`` and mode 0600. The file is
    told by its inode, not its name: a task writes into it, and the client publishes
    it, only after opening the name without following a link and finding that inode,
    a regular file with no other name (else :class:`PartReplaced`, and nothing is
    written): a user who could write the directory swapped a part for a link to a file
    of theirs, and the worker decrypted into it."""

    inode: int | None = None

    def create_empty(self, size: int = 0) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, size)
            self.inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)

    def _open_checked(self, flags: int) -> int:
        """The part opened with ``flags``, once it is known to be the file made here."""
        try:
            fd = os.open(self.path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # (a symbolic link where the part was)
                raise PartReplaced(errno.ELOOP, "the part file was replaced by a link; "
                                   "nothing was written into it", self.path) from None
            raise
        status = os.fstat(fd)
        if not (stat.S_ISREG(status.st_mode) and status.st_ino == self.inode
                and status.st_nlink == 1):
            os.close(fd)
            raise PartReplaced(errno.EEXIST, "the part file is not the one this job made; "
                               "nothing was written into it", self.path)
        return fd

    @contextlib.contextmanager
    def open_existing(self, truncate: bool) -> Iterator[BinaryIO]:
        fd = self._open_checked(os.O_WRONLY)
        with os.fdopen(fd, "wb") as handle:
            if truncate:
                os.ftruncate(fd, 0)
            yield handle
            handle.flush()
            os.fsync(fd)

    def remove(self) -> None:
        """Remove the part's name, where it still names the file made here."""
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)

    def publish_as(self, target: Location, replace: bool) -> None:
        if not target.is_local:
            super().publish_as(target, replace)
            return
        fd = self._open_checked(os.O_RDONLY)
        try:
            publish_descriptor(fd, target.path, replace)
        finally:
            os.close(fd)
        self.remove()


class UnnamedPart(Location):
    """A local part file of a job run in this process: a :class:`~aescl.atomicfile.NewFile`
    with no name until it is published, so that a ``kill -9`` leaves nothing of it. It
    takes a descriptor only from its first write to its publishing (:func:`run_here`
    runs a job a batch of files at a time where the descriptors for all cannot be had)."""

    def __init__(self, target: Location, replace: bool) -> None:
        self._target, self._replace = target.path, replace
        self._size = 0
        self.file: NewFile | None = None
        super().__init__(target.path)

    def _made(self) -> NewFile:
        if self.file is None:
            self.file = NewFile(self._target, self._replace)
            os.ftruncate(self.file.fd, self._size)
        return self.file

    def exists(self) -> bool:
        return self.file is not None and self.file.fd >= 0

    def create_empty(self, size: int = 0) -> None:
        self._size = size  # (made at its first write)

    @contextlib.contextmanager
    def open_existing(self, truncate: bool) -> Iterator[BinaryIO]:
        fd = os.open(self._made().path, os.O_WRONLY | (os.O_TRUNC if truncate else 0))
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(fd)

    def remove(self) -> None:
        if self.file is not None:
            self.file.discard()

    def publish_as(self, target: Location, replace: bool) -> None:
        self._made().publish()  # (under the name and rule it was made with)


def default_output(url: str, decrypt: bool) -> str:
    """``INPUT.aescl`` when encrypting; ``INPUT`` without ``.aescl`` when decrypting."""
    if not decrypt:
        return url + SUFFIX
    if url.endswith(SUFFIX) and len(url) > len(SUFFIX):
        return url[: -len(SUFFIX)]
    raise ValueError(f"cannot name the output for {url} (it does not end in {SUFFIX})")


# --- tasks: what a worker runs. Each returns the input bytes it handled. --------------


@dataclass(frozen=True, repr=False)
class WholeFile:
    """Encrypt or decrypt one whole file into its (existing) part file."""

    decrypt: bool
    source: Location
    part: Location
    payload: PayloadKey
    input_bytes: int
    planned: Stamp
    device: Devices = None

    def __repr__(self) -> str:  # never the key
        return f"WholeFile({'decrypt' if self.decrypt else 'encrypt'} {self.source.url})"

    def __call__(self) -> int:
        crypt = decrypt_payload if self.decrypt else encrypt_payload
        with _one_task_at_a_time, self.source.open_read() as source, \
                self.part.open_existing(truncate=True) as sink:
            self.source.check_stamp(source, self.planned)
            if self.decrypt:
                read_full(source, len(self.payload.header))  # checked by the client
            crypt(source, sink, self.payload, device=self.device, batch_chunks=DEFAULT_BATCH_CHUNKS)
        return self.input_bytes


@dataclass(frozen=True, repr=False)
class Range:
    """Seal (or open) chunks ``first .. first+count`` of one file, and its final chunk
    when ``final``, reading at ``read_at`` and writing at ``write_at`` of the part file,
    which the client created at its full size."""

    decrypt: bool
    source: Location
    part: Location
    chunk_key: bytes
    base_nonce: bytes
    first: int
    count: int
    final: bool
    read_at: int
    write_at: int
    input_bytes: int
    planned: Stamp
    device: Devices = None

    def __repr__(self) -> str:  # never the key
        verb = "decrypt" if self.decrypt else "encrypt"
        return f"Range({verb} {self.source.url} chunks {self.first}+{self.count})"

    def __call__(self) -> int:
        from .teams import team

        cipher = team(self.device).chunks(self.chunk_key, self.base_nonce,
                                           DEFAULT_BATCH_CHUNKS)
        in_size, crypt_file = (
            (chunkformat.SEALED_CHUNK_SIZE, chunked.open_from_file) if self.decrypt
            else (chunkformat.CHUNK_SIZE, chunked.seal_from_file))
        crypt_final = cipher.open if self.decrypt else cipher.seal
        with _one_task_at_a_time, open(self.source.path, "rb") as source, \
                self.part.open_existing(truncate=False) as sink:
            self.source.check_stamp(source, self.planned)
            source.seek(self.read_at)
            sink.seek(self.write_at)
            crypt_file(cipher, source, sink, self.first, self.count)
            if self.final:
                wanted = self.input_bytes - self.count * in_size
                rest = read_full(source, wanted)
                if len(rest) < wanted:  # (a final chunk of fewer bytes than planned)
                    raise chunked.ended_early()
                sink.write(memoryview(crypt_final(rest, self.first + self.count, final=True)))
        return self.input_bytes


Task = WholeFile | Range


# --- plans: what the client prepares, publishes and cleans up --------------------------


@dataclass
class Plan:
    """The tasks of one job and the outputs they fill: each part becomes its target."""

    tasks: list[Task] = field(default_factory=list)
    outputs: list[tuple[Location, Location]] = field(default_factory=list)  # (part, target)
    replace: bool = False
    # Local parts are unnamed files of this process (UnnamedPart): the plan runs here,
    # ``batch_files`` outputs at a time (a descriptor each while written).
    unnamed_parts: bool = False
    batch_files: int = 0

    @property
    def input_bytes(self) -> int:
        return sum(task.input_bytes for task in self.tasks)

    def publish(self, outputs: list[tuple[Location, Location]] | None = None) -> list[str]:
        """Name every output (of ``outputs``, default all), or none: without ``replace``,
        a name that appeared meanwhile undoes the names given so far (they were new)."""
        published: list[Location] = []
        try:
            for part, target in self.outputs if outputs is None else outputs:
                part.publish_as(target, self.replace)
                published.append(target)
        except BaseException:
            self.unpublish(published)
            raise
        return [target.url for target in published]

    def unpublish(self, targets: list[Location]) -> None:
        """Take back outputs published by this job, where they were new names."""
        if not self.replace:
            for target in targets:
                target.remove()

    def discard(self) -> None:
        for part, _ in self.outputs:
            part.remove()


def _targets(inputs: Sequence[str], outputs: Sequence[str] | None, decrypt: bool,
             replace: bool) -> list[tuple[Location, Location]]:
    if outputs is None:
        outputs = [default_output(str(url), decrypt) for url in inputs]
    if len(outputs) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    pairs = [(Location(i), Location(o)) for i, o in zip(inputs, outputs, strict=True)]
    names = [os.path.abspath(o.path) if o.is_local else o.url for _, o in pairs]
    if len(set(names)) != len(names):
        raise ValueError("two inputs would be written to the same output")
    for source, target in pairs:
        if target.exists():
            if not replace:
                raise FileExistsError(f"{target.url} exists; use force to replace it")
            if source.is_local and target.is_local and os.path.samefile(source.path,
                                                                        target.path):
                raise ValueError(f"the output {target.url} is the input file itself")
    return pairs


def _ranges(full_chunks: int, range_chunks: int) -> Iterator[tuple[int, int, bool]]:
    """(first, count, final) over ``full_chunks`` whole chunks; the last range also
    takes the final short chunk."""
    first = 0
    while True:
        count = min(range_chunks, full_chunks - first)
        final = first + count == full_chunks
        yield first, count, final
        if final:
            return
        first += count


@contextlib.contextmanager
def _planning(replace: bool, in_process: bool, files: int) -> Iterator[tuple[Plan, str]]:
    """A new plan and a token for its part names; its parts are removed if planning fails.
    In process, local parts are unnamed files where the descriptors for them can be had."""
    plan = Plan(replace=replace, unnamed_parts=in_process,
                batch_files=_files_per_batch(files) if in_process else 0)
    try:
        yield plan, secrets.token_hex(6)
    except BaseException:
        plan.discard()
        raise


# Descriptors kept free beside unnamed parts: the job's own files, OpenCL's, Python's.
_SPARE_DESCRIPTORS = 256


def _files_per_batch(files: int) -> int:
    """How many unnamed parts this process may hold at once beside its other
    descriptors: all ``files``, raising the soft limit up to the hard one where needed,
    else as many as the hard limit leaves room for (at least one). A job of more files
    runs a batch at a time (:func:`run_here`), rather than leaving named parts behind."""
    try:
        import resource
    except ImportError:  # (not POSIX: NewFile names its files there)
        return files
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = files + _SPARE_DESCRIPTORS
    if soft == resource.RLIM_INFINITY or wanted <= soft:
        return files
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    return max(1, min(files, soft - _SPARE_DESCRIPTORS))


def _new_part(plan: Plan, target: Location, token: str, size: int = 0) -> Location:
    part: Location
    if plan.unnamed_parts and target.is_local:
        part = UnnamedPart(target, plan.replace)
    else:
        name = target.path.rstrip("/").rsplit("/", 1)[-1]
        part = target.sibling(f".{name}.{token}.aescl-part")
        if part.is_local:
            part = NamedPart(part.url)
    part.create_empty(size)
    plan.outputs.append((part, target))
    return part


def plan_encrypt(
    inputs: Sequence[str], payload: PayloadKey, outputs: Sequence[str] | None = None, *,
    device: Devices = None, range_bytes: int | None = DEFAULT_RANGE_BYTES,
    replace: bool = False, salt: bytes | None = None, in_process: bool = False,
) -> Plan:
    """Tasks that encrypt ``inputs``: a local file larger than ``range_bytes`` is split
    into ranges of whole chunks (None: never split). ``salt`` fixes the payload salt of
    split files, for tests that compare with a one-process result; never reuse one.
    ``in_process``: the plan runs in this process (:func:`run_here`), and its local parts
    are files with no name until published, which a ``kill -9`` leaves nothing of."""
    _check_range_bytes(range_bytes)
    pairs = _targets(inputs, outputs, decrypt=False, replace=replace)
    with _planning(replace, in_process, len(pairs)) as (plan, token):
        for source, target in pairs:
            planned = source.stamp()
            size = planned[0]
            if not _splits(source, target, size, range_bytes):
                part = _new_part(plan, target, token)
                plan.tasks.append(WholeFile(False, source, part, payload, size, planned, device))
                continue
            file_salt = chunkformat.random_salt(salt)
            chunk_key, base_nonce, commitment = chunkformat.derive(payload.key, file_salt,
                                                                   payload.header)
            head = payload.header + file_salt + commitment
            total = len(payload.header) + chunkformat.sealed_size(size)
            part = _new_part(plan, target, token, total)
            with part.open_existing(truncate=False) as sink:
                sink.write(head)
            full = size // chunkformat.CHUNK_SIZE
            chunkformat.check_chunk_range(0, full + 1)
            for first, count, final in _ranges(full, _range_chunks(range_bytes)):
                nbytes = (size if final else (first + count) * chunkformat.CHUNK_SIZE) \
                    - first * chunkformat.CHUNK_SIZE
                plan.tasks.append(Range(
                    False, source, part, chunk_key, base_nonce, first, count, final,
                    read_at=first * chunkformat.CHUNK_SIZE,
                    write_at=len(payload.header) + chunkformat.chunk_offset(first),
                    input_bytes=nbytes, planned=planned, device=device))
        return plan


def plan_decrypt(
    inputs: Sequence[str], keys: KeyRing, outputs: Sequence[str] | None = None, *,
    device: Devices = None, range_bytes: int | None = DEFAULT_RANGE_BYTES,
    replace: bool = False, in_process: bool = False,
) -> Plan:
    """Tasks that decrypt ``inputs``. Every header and key commitment is checked here,
    before any task runs: a wrong key fails the job at once. ``in_process`` as for
    :func:`plan_encrypt`."""
    _check_range_bytes(range_bytes)
    pairs = _targets(inputs, outputs, decrypt=True, replace=replace)
    with _planning(replace, in_process, len(pairs)) as (plan, token):
        for source, target in pairs:
            with source.open_read() as stream:
                planned = source.stamp(stream if source.is_local else None)
                size = planned[0]
                payload = keys.read(stream)
                chunk_key, base_nonce = chunkformat.open_header(
                    payload.key, read_full(stream, chunkformat.HEADER_SIZE), payload.header)
            body = size - len(payload.header) - chunkformat.HEADER_SIZE
            message_bytes = chunkformat.opened_size(body)
            if not _splits(source, target, body, range_bytes):
                part = _new_part(plan, target, token)
                plan.tasks.append(WholeFile(True, source, part, payload, size, planned, device))
                continue
            part = _new_part(plan, target, token, message_bytes)
            full = body // chunkformat.SEALED_CHUNK_SIZE
            for first, count, final in _ranges(full, _range_chunks(range_bytes)):
                start = len(payload.header) + chunkformat.chunk_offset(first)
                end = size if final else len(payload.header) + chunkformat.chunk_offset(
                    first + count)
                plan.tasks.append(Range(
                    True, source, part, chunk_key, base_nonce, first, count, final,
                    read_at=start, write_at=first * chunkformat.CHUNK_SIZE,
                    input_bytes=end - start, planned=planned, device=device))
        return plan


def _splits(source: Location, target: Location, size: int, range_bytes: int | None) -> bool:
    return (range_bytes is not None and size > range_bytes and source.is_local
            and target.is_local)


def _check_range_bytes(range_bytes: int | None) -> None:
    if range_bytes is not None:
        check_whole_number("range_bytes", range_bytes, chunkformat.CHUNK_SIZE)


def _range_chunks(range_bytes: int | None) -> int:
    return max(1, (range_bytes or 0) // chunkformat.CHUNK_SIZE)


def run_here(plan: Plan, progress: Callable[[int], None] | None = None) -> list[str]:
    """Run every task in this process, one after another (each uses all of this
    machine's chosen devices), then publish; on any failure publish nothing. Unnamed
    parts run ``plan.batch_files`` outputs at a time, each batch published when done:
    a failure then takes back the new names of the batches before, and a ``kill -9``
    leaves those batches' complete outputs and nothing else."""
    size = plan.batch_files or len(plan.outputs) or 1
    published: list[str] = []
    try:
        for start in range(0, max(1, len(plan.outputs)), size):
            batch = plan.outputs[start : start + size]
            parts = {id(part) for part, _ in batch}
            for task in plan.tasks:
                if id(task.part) in parts or not plan.outputs:
                    done = task()
                    if progress:
                        progress(done)
            published += plan.publish(batch)
        return published
    except BaseException:
        plan.discard()
        plan.unpublish([target for _, target in plan.outputs if target.url in published])
        raise

