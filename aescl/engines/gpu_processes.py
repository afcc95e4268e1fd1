"""Each GPU of a team in a process of its own, for jobs on aescl's shared memory.

The GPUs of a team are fed from threads of one interpreter, and they trade its GIL
and its driver's locks: on 4 x H200 an OpenCL team did 44.6 GB/s on pinned memory
(CTR-128, 2 GiB), while four processes, one a GPU, each on memory of its own, did
78-85 together (docs/benchmarks, "Several GPUs: where it stands"). So where two GPUs
or more take part in a job whose arrays lie in shared memory (``aescl.pinned_empty``
of such a team gives it: host/shared.py), each GPU's share runs in a worker process
of its own. The worker maps the arrays, pins them for its GPU (the engine package's
``pin_host_memory``), and runs the engine's own block or chunk worker on them, pulling
the job's ranges one at a time from this process over a socket. The ranges are still
claimed here, from the scheduler's cursor, so work stealing, rates and the redo of a
failed engine's ranges are as on threads; the results land in place.

Only engines whose package can pin memory it did not allocate take part this way: both
GPU engines (OpenCL: a CL_MEM_USE_HOST_PTR buffer over it; CUDA: cuMemHostRegister).

A worker is ``python -m aescl.engines.gpu_processes FD`` (started as the host engine's
are: host/processes.py), which speaks over the socket FD (pickled messages):

* first the device id. Reply: ``"ready"`` once its engine is made, or ``("error", text)``;
* ``("map", token, size)`` followed by the region's descriptor: map it and pin it;
  ``("unmap", [tokens])`` once regions were freed;
* a task ``(head, source, target, first)``: ``head`` is ``("blocks", transform,
  first_block)`` or ``("seal" | "open", key, base_nonce, batch_chunks, first_chunk)``,
  ``source`` and ``target`` are ``(token, offset, nbytes)``, and ``first`` is the task's
  first range ``(lo, hi)``, claimed before it was sent. As the engine takes each range
  the worker asks ``("next",)`` for the one after, and is answered a range, or None
  when the job has no more for it: the answer travels while that range runs. The
  task's reply, once every range it took is done (and any answer it did not take is
  read): None, ``("auth", message, chunk)``, or ``("error", text)``.

The GPUs of one job are served together from the thread that runs the job
(:class:`Together`): it sends every worker its task, then answers whichever asks,
so that no thread is started a GPU. A thread a GPU, each started as the one before
had sent its task, began four GPUs' tasks 0.69-0.73 ms from first to last on the
4 x H200 host; served together, 0.17-0.23 ms (docs/benchmarks, "A team's GPU workers
served from the job's thread").

A worker exits when its socket closes: when this process exits or is killed.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any

from .. import _python
from ..devices import Device
from ..errors import AuthenticationError
from .host import shared
from .host.processes import WorkerFailed
from .interface import BlockTransform, Engine, Ranges
from .registry import line_of

# Worker processes only pay where at least this many GPUs share a job: one GPU alone
# is fed from one thread, as its process would feed it.
MIN_GPUS = 2
_START_SECONDS = 60  # for a worker to import aescl and start its device


def can_run_apart(device: Device) -> bool:
    """Whether ``device``'s share of a job on shared memory may run in a process of its
    own: a GPU whose engine can pin memory it did not allocate, on a system with
    shared memory, while its workers have not failed to start here."""
    if not shared.AVAILABLE or device.type != "gpu" or device.id in _cannot_start:
        return False
    return hasattr(line_of(device.engine).package(), "pin_host_memory")


def wants_shared_memory(devices: Sequence[Device]) -> bool:
    """Whether host memory for ``devices`` should be shared memory, for their jobs on it
    to run a process a GPU (``aescl.pinned_empty``)."""
    return sum(can_run_apart(d) for d in devices) >= MIN_GPUS


def apart(engines: Sequence[Engine], arrays: Sequence[Any]) -> dict[int, Engine]:
    """For a job of ``engines`` at once on ``arrays``: the engines whose share runs in a
    process of its own, keyed by ``id`` of the engine, each mapped to its stand-in
    (:class:`ApartEngine`); none unless :data:`MIN_GPUS` or more can and every array
    lies in shared memory."""
    movable = [e for e in engines if can_run_apart(e.device)]
    if len(movable) < MIN_GPUS or not arrays or \
            any(shared.locate(a) is None for a in arrays):
        return {}
    return {id(e): _stand_in(e) for e in movable}


# ---- This process's side ------------------------------------------------------------

_stand_ins: dict[str, ApartEngine] = {}
_workers: dict[str, _Worker] = {}
_cannot_start: set[str] = set()
_lock = threading.Lock()
_owner = os.getpid()  # (a forked child starts its own: the sockets are its parent's)


def _stand_in(engine: Engine) -> ApartEngine:
    with _lock:
        made = _stand_ins.get(engine.device.id)
        if made is None or made.engine is not engine:
            made = _stand_ins[engine.device.id] = ApartEngine(engine)
        return made


class _Worker:
    """One device's worker process; one task at a time."""

    def __init__(self, device: Device) -> None:
        self.process, self.connection = _python.start_helper(__name__)
        self.mapped: set[int] = set()
        self.busy = threading.Lock()
        self.broken = False
        try:
            self.connection.send(device.id)
            reply = (self.connection.recv() if self.connection.poll(_START_SECONDS)
                     else ("error", f"no answer in {_START_SECONDS} s"))
        except (OSError, EOFError) as exc:
            reply = ("error", str(exc) or "it exited")
        if reply != "ready":
            self.close()
            raise WorkerFailed(f"{device.id}'s worker process did not start: {reply[1]}")

    def send_task(self, head: tuple[Any, ...], source: Any, target: Any,
                  first: tuple[int, int]) -> None:
        """Send the task ``head`` over ``source`` and ``target`` (in shared memory) with its
        first range. The caller holds :attr:`busy` until the task's reply (:meth:`answer`)."""
        located = [shared.locate(source), shared.locate(target)]
        if None in located:
            raise ValueError("a job in a GPU's worker process needs its arrays in shared memory")
        refs = [(region.token, offset, memoryview(data).nbytes)
                for (region, offset), data in zip(located, (source, target), strict=True)]
        try:
            shared.hand_over(self.connection, self.process.pid, self.mapped,
                             [region for region, _ in located])
            self.connection.send((head, *refs, first))
        except (OSError, EOFError) as exc:
            raise self._stopped(exc) from None

    def answer(self, ranges: Ranges) -> bool:
        """One message of the running task: an ask for a range, answered from ``ranges``
        (False), or the task's reply (True; a failure it tells is raised)."""
        try:
            reply = self.connection.recv()
            if reply == ("next",):
                self.connection.send(next(ranges, None))
                return False
        except (OSError, EOFError) as exc:
            raise self._stopped(exc) from None
        if reply is None:
            return True
        if reply[0] == "auth":
            raise AuthenticationError(reply[1], chunk=reply[2])
        raise WorkerFailed(f"a GPU's worker process failed: {reply[1]}")

    def _stopped(self, exc: BaseException) -> WorkerFailed:
        self.broken = True
        return WorkerFailed(f"a GPU's worker process stopped ({exc or 'closed'})")

    def run(self, head: tuple[Any, ...], source: Any, target: Any, ranges: Ranges) -> None:
        """The task ``head`` over ``source`` and ``target`` on the ranges the worker pulls
        from ``ranges``, served from this thread until it ends."""
        first = next(ranges, None)
        if first is None:
            return  # (the job has no range left for it: no task)
        with self.busy:
            self.send_task(head, source, target, first)
            try:
                while not self.answer(ranges):
                    pass
            except (AuthenticationError, WorkerFailed):
                raise
            except BaseException:
                self.broken = True  # (interrupted mid-task: its conversation is lost)
                raise

    def close(self) -> None:
        _python.end_helper(self.process, self.connection)


def _worker(device: Device) -> _Worker:
    """``device``'s running worker, started on first use (and again after one failed)."""
    global _owner
    with _lock:
        if _owner != os.getpid():
            _workers.clear()
            _owner = os.getpid()
        worker = _workers.get(device.id)
        if worker is None or worker.broken:
            if worker is not None:
                worker.close()
            _workers.pop(device.id, None)
            worker = _workers[device.id] = _Worker(device)
        return worker


def _drop_freed(token: int) -> None:
    """A region was freed: idle workers unmap it now, which also unpins it (pinned memory
    is scarce); a worker at work drops it before its next task."""
    for worker in list(_workers.values()):
        if token in worker.mapped and worker.busy.acquire(blocking=False):
            try:
                worker.mapped.discard(token)
                worker.connection.send(("unmap", [token]))
            except OSError:
                pass  # (a worker that is gone holds nothing; the next job notices)
            finally:
                worker.busy.release()


shared.when_freed(_drop_freed)


@atexit.register
def shutdown() -> None:
    """End the running workers (at exit; a later job starts new ones)."""
    with _lock:
        for worker in _workers.values():
            worker.close()
        _workers.clear()


Ended = Callable[[BaseException | None], None]
_begun_here = threading.local()  # .entry: [Together, ended, whether a task took it]


class Together:
    """The GPU workers' tasks of one job, begun from one thread and then served there
    (:meth:`serve`), each worker's asks answered as they come: one thread for every
    GPU of the job, where each had a thread of its own (see the module's docstring)."""

    def __init__(self) -> None:
        self._running: dict[Connection, tuple[_Worker, Ranges, Ended]] = {}
        self._threads: list[threading.Thread] = []

    @contextmanager
    def begin(self, ended: Ended) -> Iterator[None]:
        """Within it, a stand-in's task (:class:`ApartEngine`) is only sent, with its first
        range, and served by :meth:`serve`, which calls ``ended(failure)`` (None where it
        succeeded) once it ended. A task that cannot go to its worker now (one that
        does not start, or is busy with another thread's job) runs on a thread of its
        own; work that went to no worker ended with the block (``ended(None)``)."""
        entry = _begun_here.entry = [self, ended, False]
        try:
            yield
        finally:
            del _begun_here.entry
        if not entry[2]:
            ended(None)

    def _on_thread(self, run: Callable[[], None], ended: Ended) -> None:
        def share() -> None:
            try:
                run()
            except BaseException as exc:  # (told to the job, as a thread's own would be)
                ended(exc)
            else:
                ended(None)

        thread = threading.Thread(target=share, name="aescl-gpu-share")
        thread.start()
        self._threads.append(thread)

    def serve(self) -> None:
        """Answer the begun tasks' asks until each has ended, then wait for the shares run
        on threads."""
        try:
            while self._running:
                for connection in wait(list(self._running)):
                    worker, ranges, ended = self._running[connection]
                    try:
                        if not worker.answer(ranges):
                            continue
                        failure = None
                    except (AuthenticationError, WorkerFailed) as exc:
                        failure = exc
                    del self._running[connection]
                    worker.busy.release()
                    ended(failure)
        except BaseException:
            for worker, _, _ in self._running.values():
                worker.broken = True  # (interrupted mid-task: its conversation is lost)
                worker.busy.release()
            self._running.clear()
            raise
        finally:
            for thread in self._threads:
                thread.join()


def _in_worker(engine: Engine, head: tuple[Any, ...], source: Any, target: Any,
               ranges: Ranges, here: Callable[[], None]) -> None:
    """Run the task in ``engine``'s device's worker, or ``here()`` in this process where
    that worker cannot start (it never will here: the engine's jobs stay in this
    process from then on). Within :meth:`Together.begin`, the task is only begun."""
    try:
        worker: _Worker | None = _worker(engine.device)
    except WorkerFailed:
        _cannot_start.add(engine.device.id)
        worker = None
    entry = getattr(_begun_here, "entry", None)
    if entry is None:
        if worker is None:
            here()
        else:
            worker.run(head, source, target, ranges)
        return
    together, ended, _ = entry
    entry[2] = True
    if worker is None or not worker.busy.acquire(blocking=False):
        together._on_thread(here if worker is None else
                            lambda: worker.run(head, source, target, ranges), ended)
        return
    try:
        first = next(ranges, None)
        if first is not None:
            worker.send_task(head, source, target, first)
            together._running[worker.connection] = (worker, ranges, ended)
            return
    except BaseException:
        worker.busy.release()
        entry[2] = False
        raise
    worker.busy.release()
    ended(None)  # (the job had no range left for it)


class ApartEngine:
    """``engine`` with its block and chunk ranges run in its device's worker process;
    all else (its figures, a chunk run's final piece, a keystream) as ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def blocks(self, transform: BlockTransform) -> _ApartBlocks:
        return _ApartBlocks(self.engine, transform)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int) -> _ApartChunks:
        return _ApartChunks(self.engine, key, base_nonce, batch_chunks)


class _ApartBlocks:
    def __init__(self, engine: Engine, transform: BlockTransform) -> None:
        self._engine, self._transform = engine, transform

    def run(self, source: Any, target: Any, ranges: Ranges, first_block: int = 0) -> None:
        _in_worker(self._engine, ("blocks", self._transform, first_block), source, target,
                   ranges, lambda: self._engine.blocks(self._transform).run(
                       source, target, ranges, first_block))

    def keystream(self, index: int) -> bytes:
        return self._engine.blocks(self._transform).keystream(index)


class _ApartChunks:
    def __init__(self, engine: Engine, key: bytes, base_nonce: bytes,
                 batch_chunks: int) -> None:
        self._engine = engine
        self._job = (bytes(key), bytes(base_nonce), batch_chunks)
        self._here: Any = None

    def _local(self) -> Any:
        if self._here is None:
            self._here = self._engine.chunks(*self._job)
        return self._here

    def seal_ranges(self, plaintext: Any, sealed: Any, first: int, ranges: Ranges) -> None:
        _in_worker(self._engine, ("seal", *self._job, first), plaintext, sealed, ranges,
                   lambda: self._local().seal_ranges(plaintext, sealed, first, ranges))

    def open_ranges(self, sealed: Any, plaintext: Any, first: int, ranges: Ranges) -> None:
        _in_worker(self._engine, ("open", *self._job, first), sealed, plaintext, ranges,
                   lambda: self._local().open_ranges(sealed, plaintext, first, ranges))

    def seal(self, plaintext: Any, first: int, final: bool) -> Any:
        return self._local().seal(plaintext, first, final)

    def open(self, ciphertext: Any, first: int, final: bool) -> Any:
        return self._local().open(ciphertext, first, final)


# ---- The worker's side --------------------------------------------------------------


def _serve(connection: Connection) -> None:
    spec = connection.recv()
    try:
        from .registry import engine_for, resolve

        device = resolve(spec)
        engine = engine_for(device)
        pin = line_of(device.engine).package().pin_host_memory
    except Exception as exc:  # (told to the parent, which runs the share itself)
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    connection.send("ready")
    mappings: dict[int, Any] = {}
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message[0] == "map":
            mappings[message[1]] = pin(shared.mapping_handed(connection, message[2]), [device])
            continue
        if message[0] == "unmap":
            for token in message[1]:
                mappings.pop(token, None)
            continue
        connection.send(_run(engine, mappings, message, connection))


class _Pulled:
    """The job's ranges for this worker, as the engine takes them: the first came with
    the task, and each next one is asked for as the engine takes the one before, so
    that the answer travels while that range runs (the engines take their ranges one
    at a time: the pipelines' feeding threads under a lock)."""

    def __init__(self, connection: Connection, first: tuple[int, int]) -> None:
        self._connection = connection
        self._waiting: tuple[int, int] | None = first  # the next range to take
        self._asked = False  # whether the next one is still on its way

    def __iter__(self) -> _Pulled:
        return self

    def __next__(self) -> tuple[int, int]:
        if self._asked:
            self._waiting, self._asked = self._connection.recv(), False
        claimed, self._waiting = self._waiting, None
        if claimed is None:
            raise StopIteration
        self._connection.send(("next",))
        self._asked = True
        return claimed

    def untaken(self) -> tuple[int, int] | None:
        """A range the parent handed out for this task that the engine never took (it
        stopped early), once an answer still on its way is read; None where none is."""
        if self._asked:
            self._waiting, self._asked = self._connection.recv(), False
        return self._waiting


def _run(engine: Any, mappings: dict[int, Any], task: tuple[Any, ...],
         connection: Connection) -> Any:
    head, source, target, first = task

    def view(ref: tuple[int, int, int]) -> Any:
        token, offset, nbytes = ref
        return mappings[token][offset : offset + nbytes]

    ranges = _Pulled(connection, first)
    reply: Any = None
    try:
        if head[0] == "blocks":
            engine.blocks(head[1]).run(view(source), view(target), ranges, head[2])
        else:
            kind, key, base_nonce, batch_chunks, first_chunk = head
            chunks = engine.chunks(key, base_nonce, batch_chunks)
            crypt = chunks.seal_ranges if kind == "seal" else chunks.open_ranges
            crypt(view(source), view(target), first_chunk, ranges)
    except AuthenticationError as exc:
        reply = ("auth", str(exc), exc.chunk)
    except Exception as exc:
        reply = ("error", f"{type(exc).__name__}: {exc}")
    # Every range the parent handed this task is done, or the task fails (and the job
    # redoes its ranges elsewhere): a success never leaves a range unwritten.
    if ranges.untaken() is not None and reply is None:
        reply = ("error", "the engine stopped before its last range")
    return reply


if __name__ == "__main__":
    _python.serve_helper(_serve)
