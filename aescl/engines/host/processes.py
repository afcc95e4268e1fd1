"""The host engine's worker processes: its OpenSSL work in shared memory, apart from
this interpreter.

Beside a GPU's feeding thread, the host engine's threads lose most of their speed,
and the chunked format's AEAD calls hold the GIL outright (engine.py). A
job whose arrays all lie in aescl's shared memory (shared.py) is therefore cut
into the same pieces as on threads, but each piece goes to a worker process, which
runs the same host engine code, single-threaded, on its own mapping of the arrays.
The pieces' results land in place; only a short message crosses per piece.

A worker is ``python -m aescl.engines.host.worker FD`` (worker.py), not a multiprocessing child:
spawn would re-import the caller's main module, fork would copy OpenCL runtimes.
Protocol over a socketpair (pickled messages), one exchange at a time:

* first the host device (its engine's description);
* ``("map", token, size)`` followed by the region's descriptor, before the first
  task that uses a region; ``("unmap", [tokens])`` once regions were freed (when
  freed, if no job is under way, else before the next task);
* ``("reach", address, nbytes)``: whether the worker may read this process's ordinary
  memory (reach.py). Reply: the bytes it read there, or ``("denied", text)``;
* a task ``(kind, args..., source, target, lo, hi)``, where ``source`` and ``target``
  are ``(token, offset, nbytes)`` (a negative token: minus the id of the process whose
  ordinary memory it is, the offset its address) and ``(lo, hi)`` the piece. Reply: ``None``, or
  ``("auth", message, chunk)`` for a chunk that failed authentication, or
  ``("error", text)``.

A worker exits when its socket closes: when this process exits or is killed.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pickle
import socket
import struct
import threading
from collections.abc import Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any

from ... import _python
from ...devices import Device
from ...errors import AuthenticationError, first_failure
from . import reach
from . import shared as _shared

Reference = tuple[int, int, int]  # (region token, offset, nbytes)


class WorkerFailed(RuntimeError):
    """A worker process died or could not start: the scheduler redoes the engine's ranges
    on the other engines of the team."""


def reference(data: Any) -> tuple[_shared.Region, Reference] | None:
    located = _shared.locate(data)
    if located is None:
        return None
    region, offset = located
    return region, (region.token, offset, memoryview(data).nbytes)


def reference_here(data: memoryview) -> Reference:
    """Ordinary memory of this process, which a worker reads and writes through reach.py:
    the token is minus this process's id (region tokens are positive), the offset its
    address."""
    return (-os.getpid(), reach.address_of(data), data.nbytes)


# Tasks and replies are a few hundred bytes, and the socket has room or the reply is
# there when they are sent or read. Through Python's own calls each send and read
# releases the GIL and then waits to take it back from a GPU's feeding thread: about
# a millisecond each on the H200 host, so the one feeding thread handed out 4 MiB
# pieces at one per millisecond while the workers sat idle (docs/benchmarks). The
# same calls through ctypes.PyDLL keep the GIL for their microseconds, and fall back
# to the Connection's (same framing: a 4-byte big-endian length, then the pickle)
# when they cannot finish at once.
_libc = ctypes.PyDLL(None, use_errno=True)
_libc.send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
_libc.send.restype = ctypes.c_ssize_t
_libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.recv.restype = ctypes.c_ssize_t
_QUICK = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL
_HEADER = struct.Struct("!i")


def _send_holding_gil(fd: int, payload: bytes) -> bool:
    """Send one framed message if the socket takes all of it now; whether it did (a
    message is never sent in part: the socket is empty between tasks)."""
    frame = _HEADER.pack(len(payload)) + payload
    return _libc.send(fd, frame, len(frame), _QUICK) == len(frame)


def _receive_holding_gil(fd: int) -> bytes | None:
    """The next framed message if all of it is there now (a reply arrives in one
    write), else None and nothing read."""
    room = 4096
    buffer = ctypes.create_string_buffer(room)
    got = _libc.recv(fd, buffer, room, _QUICK | socket.MSG_PEEK)
    if got < _HEADER.size:
        return None
    (length,) = _HEADER.unpack_from(buffer.raw, 0)
    if got < _HEADER.size + length:
        return None
    _libc.recv(fd, buffer, _HEADER.size + length, _QUICK)  # take what was peeked
    return buffer.raw[_HEADER.size : _HEADER.size + length]


class _Worker:
    def __init__(self, device: Device) -> None:
        self.process, self.connection = _python.start_helper(f"{__package__}.worker")
        self.mapped: set[int] = set()
        self.connection.send(device)

    def send(self, task: tuple[Any, ...], regions: Iterable[_shared.Region]) -> None:
        """Start ``task``; :meth:`finish` takes its reply."""
        try:
            _shared.hand_over(self.connection, self.process.pid, self.mapped, regions)
            payload = pickle.dumps(task, pickle.HIGHEST_PROTOCOL)
            if not _send_holding_gil(self.connection.fileno(), payload):
                self.connection.send_bytes(payload)
        except OSError as exc:
            raise WorkerFailed(f"a host engine worker process stopped ({exc})") from None

    def finish(self) -> None:
        """Take the reply of the task in flight (the caller knows it is there)."""
        try:
            payload = _receive_holding_gil(self.connection.fileno())
            reply = pickle.loads(payload if payload is not None
                                 else self.connection.recv_bytes())
        except (OSError, EOFError) as exc:
            raise WorkerFailed(f"a host engine worker process stopped ({exc or 'closed'})"
                               ) from None
        if reply is None:
            return
        if reply[0] == "auth":
            raise AuthenticationError(reply[1], chunk=reply[2])
        raise WorkerFailed(f"a host engine worker process failed: {reply[1]}")

    def close(self) -> None:
        """End the worker: it exits when its socket closes."""
        _python.end_helper(self.process, self.connection)


class Workers:
    """Worker processes, fed from one thread per job (one job at a time)."""

    def __init__(self, device: Device, count: int) -> None:
        self.count = count
        self._all: list[_Worker] = []
        self._job = threading.Lock()
        self._reaches: bool | None = None
        self.broken = False
        self.owner = os.getpid()  # (a forked child starts its own: the sockets are ours)
        try:
            for _ in range(count):
                self._all.append(_Worker(device))
            for worker in self._all:  # each says so once it has imported its engine
                if not worker.connection.poll(_START_SECONDS) or \
                        worker.connection.recv() != "ready":
                    raise WorkerFailed("a host engine worker process did not start")
        except (OSError, EOFError, WorkerFailed) as exc:
            self.close()
            raise WorkerFailed(f"the host engine's worker processes could not start ({exc})"
                               ) from None

    def run(self, head: tuple[Any, ...], source: Reference, target: Reference,
            regions: Iterable[_shared.Region], pieces: Iterator[tuple[int, int]],
            count: int | None = None) -> None:
        """The task ``head`` on every piece of ``pieces``, each in the next idle worker
        of the first ``count`` (default: all).

        One thread hands out the pieces and waits for any worker's reply: beside a
        GPU's feeding thread, a thread per worker waking for the GIL after every
        piece held both back (docs/benchmarks). Raises the failure to report once
        every worker has answered."""
        regions = tuple(regions)
        errors: list[BaseException] = []
        with self._job:
            idle, busy = self._all[: count or self.count], {}
            while True:
                while idle and not errors:
                    try:
                        piece = next(pieces, None)
                    except Exception as exc:  # (a range out of the format's): drain, raise
                        errors.append(exc)
                        break
                    if piece is None:
                        break
                    worker = idle.pop()
                    try:
                        worker.send((*head, source, target, *piece), regions)
                    except WorkerFailed as exc:
                        errors.append(exc)
                        continue
                    busy[worker.connection] = worker
                if not busy:
                    break
                for ready in wait(list(busy)):
                    worker = busy.pop(ready)
                    try:
                        worker.finish()
                    except (WorkerFailed, AuthenticationError) as exc:
                        errors.append(exc)
                    idle.append(worker)
        if errors:
            self.broken = self.broken or any(isinstance(e, WorkerFailed) for e in errors)
            raise first_failure(errors)

    def can_reach(self) -> bool:
        """Whether the workers may read and write this process's ordinary memory
        (reach.py): asked of one worker, with bytes it must read back, once."""
        if self._reaches is None:
            probe = memoryview(os.urandom(64))
            worker = self._all[0]
            with self._job:
                try:
                    worker.connection.send(("reach", reach.address_of(probe), len(probe)))
                    reply = worker.connection.recv()
                except (OSError, EOFError):
                    reply = None
            self._reaches = reply == bytes(probe)
        return self._reaches

    def close(self) -> None:
        for worker in self._all:
            worker.close()


_workers: Workers | None = None
_lock = threading.Lock()


def _drop_freed(token: int) -> None:
    """A region was freed: idle workers unmap it now, so that its memory goes back to
    the system (a job under way leaves it to their next task)."""
    pool = _workers
    if pool is None or not pool._job.acquire(blocking=False):
        return
    try:
        for worker in pool._all:
            if token in worker.mapped:
                worker.mapped.discard(token)
                try:
                    worker.connection.send(("unmap", [token]))
                except OSError:
                    pass  # (a worker that is gone holds nothing; the next job notices)
    finally:
        pool._job.release()


_shared.when_freed(_drop_freed)
_START_SECONDS = 60  # for a worker to import its engine, on a slow or busy machine


@atexit.register
def shutdown() -> None:
    """End the running workers (at exit; a later job starts new ones)."""
    global _workers
    with _lock:
        if _workers is not None:
            _workers.close()
        _workers = None


def workers(device: Device, count: int) -> Workers:
    """The running workers, started on first use (and again after one failed)."""
    global _workers
    with _lock:
        if _workers is not None and _workers.owner != os.getpid():
            _workers = None  # (a forked child's: its parent's workers stay its parent's)
        if _workers is None or _workers.broken or _workers.count < count:
            if _workers is not None:
                _workers.close()
                _workers = None
            _workers = Workers(device, count)
        return _workers


def running(count: int) -> bool:
    """Whether ``count`` workers or more of this process are up, starting none."""
    pool = _workers
    return (pool is not None and pool.owner == os.getpid() and not pool.broken
            and pool.count >= count)


_starting: set[int] = set()  # processes whose workers a thread is starting
_start_failed: set[int] = set()  # processes where a start on a thread failed


def start_soon(device: Device, count: int) -> None:
    """Start ``count`` workers on a thread of their own, while the caller's jobs go on
    (at most once a process: not where one is starting, or such a start failed)."""
    here = os.getpid()
    with _lock:
        if here in _starting or here in _start_failed or running(count):
            return
        _starting.add(here)

    def start() -> None:
        try:
            workers(device, count)
        except WorkerFailed:
            _start_failed.add(here)
        finally:
            _starting.discard(here)

    threading.Thread(target=start, name="aescl-host-workers-start", daemon=True).start()
