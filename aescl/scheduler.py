"""One job on several devices: ranges handed to engines by measured rate (work stealing).

The modes and the chunked format describe a job as ``units`` position-addressed
units (16-byte blocks, 16 KiB chunks) and the engine work to do on a range of
them; :class:`Team` runs it on its devices' engines at once. Every engine pulls
its next range from one shared cursor only when it is ready for more, so a fast
engine takes more and a slow or busy one never holds the job back. A range's
size follows the engine's share of the team's rate (its measured rate, or until
there is one, its kind's guess) and shrinks as the job nears its end, so that
all engines finish close together.

Output is byte-identical whatever the split: every unit is computed from its
position alone.

**Who takes part** (:meth:`Team.taking_part`), measured on the H100 host
(docs/benchmarks, 2026-11-23):

* A job below :data:`SPLIT_MIN_BYTES` runs on the leading engine alone.
* A device apart from host memory (a GPU) sits out a job whose arrays it would
  stage, when an engine that computes on the host's cores takes part: its staging
  copies run on those cores and cost them more than the GPU adds (1 GiB of CTR-128
  from numpy arrays: host engine 37.4 GB/s alone, 27.1 beside the H100; the chunked
  format on PoCL 21.1 alone, 16.2 beside it). From pinned memory it takes part.
* In a whole-machine team (``all``) the host's cores go to one engine per job: the
  host engine and the OpenCL CPU devices compute on the same cores. Beside a GPU
  it is one whose work does not run on this interpreter's threads
  (``in_interpreter``): an OpenCL CPU device, or the host engine when the arrays
  lie in shared memory its worker processes map (pinned CTR-128, 1 GiB: H100 alone
  42.7, with the host engine's threads 42.7, with PoCL 52.0; H200 with a fixed split,
  alone 44, with 15 OpenSSL threads 35-45, with 15 worker processes 54-57), the one
  measured fastest for the kind of work among them; alone, the fastest of all.
* In ``all``, beside two GPUs or more that take part (CORES_SIT_OUT_BESIDE), the
  host's cores sit out: computing beside them, they starve the GPUs' feeding.
* An engine that holds the GIL through a kind of work (the host engine's AEAD
  calls, for chunks, on its threads) sits out a split of that kind beside engines
  that do not: it would starve their feeding threads.
* In ``all``, a job between files runs on one device where one is expected to keep
  up with the files alone, the host engine first (:meth:`Team.for_job`): no team is
  faster than the files, and a team's transfers cost (4 GiB, 4 x H200: ``all``
  3.1-3.4 s, the host engine 1.8-2.2 s).

**Where each works.** Two GPUs or more taking part in a job on shared memory (a team's
``aescl.pinned_empty``) work their shares in a worker process each, pulling their
ranges from this job's cursor (engines/gpu_processes.py): fed from threads of one
interpreter, an OpenCL team of four H100s reached 0.46 of what four processes do, and
0.87 this way; a CUDA team of four H200s 0.80, and 0.92 this way (docs/benchmarks).
The caller's thread sends each worker its task and first range, then answers all of
their asks (:meth:`Team._together`); the other engines of such a job run on threads.

Engines left out stay in reserve for faults. A list of devices runs on the devices
named, under the first, second and last rule. The one exception is a run's final chunk
of the chunked format (under 16 KiB), which every team seals and opens on the host
engine (:func:`_final_engine`): on a GPU it was a launch and a wait after the split.

**Faults.** An engine that fails (an OpenCL error, a device out of memory, a
lost device) is dropped from the job, and every range it had taken is redone by
the engines that are left; the job fails only when none is left. Ranges are
redone only after the failed engine's call has returned, so nothing it still
writes can race with the redo, and a range written twice holds the same bytes.
A rejection of the data itself (:class:`~aescl.errors.AuthenticationError`,
which is raised before any plaintext of its range is released) stops the whole
job at once and is raised as it is.

Which devices a job runs on (device specs, ``all``, the default) is
:mod:`aescl.teams`; the rates ranges are sized by, and their policy, :mod:`aescl.rates`.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import rates
from ._arrays import byte_view, new_buffer, wipe
from .chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    check_base_nonce,
    check_chunk_range,
    check_key,
    plaintext_run,
    sealed_run,
)
from .devices import Device, host_device
from .engines import BLOCK_SIZE, BlockTransform, Engine, Ranges, engine_for
from .errors import AuthenticationError, DeviceNotFound, first_failure
from .rates import expected_rate, rate_kind

# (device id, kind of work, kind of launch) of the jobs done in this process. A device's
# first job of a kind of launch sets no measured rate: it carries the engine's start-up
# (a context, kernel builds, tuning), which a later job does not. Counted, a GPU started
# by the default team measured 0.19-0.25 GB/s for a 1 GiB chunked job that it then did
# at 6.3 (H200 host), and was never chosen again; and PoCL's first opening, after its
# first sealing had built only the sealing kernel, measured 0.39 GB/s for what it then
# did at 1.7 (the 2-core CI kind). The launch names the kernels a job builds: ``seal``,
# ``open``, or a block kernel and key size (``aes_ctr_xor/128``).
_worked_before: set[tuple[str, str, str]] = set()

# A job this small runs on the leading engine alone: splitting it would cost more
# (threads, a kernel launch per engine) than it saves.
SPLIT_MIN_BYTES = 1 << 20

# In ``all``, beside this many devices apart from host memory (GPUs) that take part, the
# host's cores sit out: they compute for the team beside one GPU (pinned CTR-128, 1 GiB,
# H100 host: 42.7 GB/s alone, 52.0 with PoCL), but beside two they starve the GPUs'
# feeding (2 GiB pinned, 2 x H200: the CUDA team 67.8 GB/s CTR and 61.3 chunked, with
# PoCL beside it 54.5 and 38.0; issue 57's 4 x H200: 77.8 CTR, 57.0 for ``all``).
CORES_SIT_OUT_BESIDE = 2


@dataclass
class Share:
    """What one engine did in the last job: its part of the work and its rate."""

    device: Device
    units: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class _Member:
    engine: Engine
    rate: float  # bytes per second, the current estimate
    taken: list[tuple[int, int]] = field(default_factory=list)
    share: Share | None = None
    first: tuple[int, int] | None = None  # claimed before any engine started


class _Job:
    """The shared cursor of one job: hands out ranges, takes back a failed engine's."""

    def __init__(self, units: int, unit_bytes: int, members: list[_Member]) -> None:
        self.units = units
        self.unit_bytes = unit_bytes
        self.members = members
        self.cursor = 0
        self.redo: list[tuple[int, int]] = []
        self.stopped = False
        self.lock = threading.Lock()
        self.start = time.perf_counter()

    def _size(self, member: _Member) -> int:
        """Units for the member's next range: alone, all that is left (one hand-over);
        otherwise half its share of what is left, so that the engines end together,
        between an eighth of its piece (less would only add hand-overs) and eight."""
        left = self.units - self.cursor
        alive = [m for m in self.members if not (m.share and m.share.failed)]
        if len(alive) == 1:
            return left
        piece = max(1, member.engine.piece_bytes // self.unit_bytes)
        share = member.rate / sum(m.rate for m in alive)
        return max(max(1, piece // 8), min(8 * piece, int(left * share / 2)))

    def take(self, member: _Member) -> tuple[int, int] | None:
        with self.lock:
            if self.stopped:
                return None
            if self.redo:
                claimed = self.redo.pop()
            elif self.cursor < self.units:
                size = self._size(member)
                claimed = (self.cursor, min(self.units, self.cursor + size))
                self.cursor = claimed[1]
            else:
                return None
            member.taken.append(claimed)
            return claimed


class _Claims:
    """One engine's ranges of a job, as the iterator the engine interface pulls."""

    def __init__(self, job: _Job, member: _Member) -> None:
        self._job = job
        self._member = member

    def __iter__(self) -> _Claims:
        return self

    def __length_hint__(self) -> int:
        """1 while the job may still hand out a range (the host engine's threads ask)."""
        job = self._job
        return int(self._member.first is not None
                   or not job.stopped and (job.cursor < job.units or bool(job.redo)))

    def __next__(self) -> tuple[int, int]:
        claimed, self._member.first = self._member.first, None
        if claimed is None:
            claimed = self._job.take(self._member)
        if claimed is None:
            raise StopIteration
        return claimed


def keeps_up_with_files(device: Device, kind: str, nbytes: int) -> bool:
    """Whether ``device`` alone is expected to do a job of ``nbytes`` between files as
    fast as the files are read and written (rates.fastest_seconds), start-up aside."""
    return (rates.expected_seconds(device, kind, nbytes, True, True)
            <= rates.fastest_seconds(nbytes, file_job=True))


class Team:
    """The engines of one or more devices, running each job together."""

    def __init__(self, devices: list[Device], whole_machine: bool = False) -> None:
        if not devices:
            raise DeviceNotFound("no device given: name at least one")
        self.devices = devices
        self.engines = [engine_for(d) for d in devices]
        self.whole_machine = whole_machine  # ``all``: the host's cores go to one engine
        self.shares: list[Share] = []  # of the last job
        self._alone: dict[str, Team] = {}  # (``all``'s one-device teams for file jobs)

    @property
    def lead(self) -> Engine:
        """The engine that runs work too small or too sequential to split: the one with
        the highest rate."""
        if len(self.engines) == 1:
            return self.engines[0]
        return max(self.engines, key=lambda e: expected_rate(e.device, "blocks"))

    def stream_engine(self) -> Engine:
        """The engine of a stream that cannot be split (a GCM message)."""
        return self.lead

    def for_job(self, nbytes: int, kind: str, file_job: bool = False,
                arrays: Sequence[Any] = ()) -> Team:
        """The team that runs a job of ``nbytes`` of ``kind`` of work on host ``arrays``
        (between files, for a ``file_job``): this one; but in ``all``, a job between files
        runs on one device where one is expected to keep up with the files alone
        (:meth:`_files_alone`). (The team of no device named weighs the arrays too.)"""
        if not (self.whole_machine and file_job and len(self.devices) > 1):
            return self
        alone = self._files_alone(nbytes, kind)
        if alone is None:
            return self
        if alone.id not in self._alone:
            self._alone[alone.id] = Team([alone])
        return self._alone[alone.id]

    def _files_alone(self, nbytes: int, kind: str) -> Device | None:
        """The device of ``all`` that runs a job between files alone: one expected to go
        as fast as the files are read and written (rates.fastest_seconds), the host
        engine first (it moves nothing to a device), else the fastest such; None where
        none is. No team goes faster than the files, and splitting a file's windows
        over a team costs transfers and hand-overs (4 GiB in /dev/shm, 4 x H200, 64
        cores: ``all`` of the four GPUs 3.1-3.4 s, the host engine alone 1.8-2.2, one
        GPU 2.3-2.7, cp 1.7-1.9; docs/benchmarks)."""
        keeping_up = [d for d in self.devices if keeps_up_with_files(d, kind, nbytes)]
        if not keeping_up:
            return None
        return max(keeping_up, key=lambda d: (d.type == "host", expected_rate(d, kind)))

    def taking_part(self, nbytes: int, kind: str, arrays: Sequence[Any] = ()) -> list[Engine]:
        """The engines that run a job of ``nbytes`` of ``kind`` of work on host
        ``arrays``, by the rules in this module's docstring; the rest stay in reserve."""
        engines = self.engines
        if len(engines) > 1 and nbytes < SPLIT_MIN_BYTES:
            # Too little to split: the leading engine alone, with no threads to start.
            return [self.lead]
        if arrays and any(e.on_host_cores for e in engines):
            engines = [e for e in engines if not e.stages(*arrays)]
        apart = [e for e in engines if not e.on_host_cores]
        if self.whole_machine and len(apart) >= CORES_SIT_OUT_BESIDE:
            engines = apart
        cores = [e for e in engines if e.on_host_cores]
        if self.whole_machine and len(cores) > 1:
            beside_devices = len(cores) < len(engines)
            candidates = ([e for e in cores if not e.in_interpreter(*arrays)]
                          if beside_devices else [])
            kept = max(candidates or cores, key=lambda e: expected_rate(
                e.device, rate_kind(e, kind, arrays), stored_first=True))
            engines = [e for e in engines if not e.on_host_cores or e is kept]
        free = [e for e in engines
                if kind not in e.holds_gil_for or not e.in_interpreter(*arrays)]
        if free and len(free) < len(engines):
            engines = free
        return engines

    def split(self, units: int, unit_bytes: int,
              work: Callable[[Engine, Iterable[tuple[int, int]]], None],
              kind: str = "blocks", arrays: Sequence[Any] = (), launch: str = "") -> None:
        """Run ``work(engine, ranges)`` on the engines taking part (:meth:`taking_part`)
        at once over ``units`` units; each engine pulls its ranges from one cursor.
        ``launch`` names the kernels the work runs (:data:`_worked_before`). Returns
        when every unit is done."""
        if units <= 0:
            return  # (the shares stay those of the last job that had work)
        kinds = {e: rate_kind(e, kind, arrays) for e in self.engines}
        everyone = [_Member(e, expected_rate(e.device, kinds[e])) for e in self.engines]
        chosen = self.taking_part(units * unit_bytes, kind, arrays)
        members = [m for m in everyone if m.engine in chosen]
        job = _Job(units, unit_bytes, members)
        # Two GPUs or more on shared memory: each GPU's share in a process of its own.
        stand_ins: dict[int, Engine] = {}
        if len(chosen) > 1 and arrays:
            from .engines import gpu_processes  # (not on a small job's start-up)

            stand_ins = gpu_processes.apart(chosen, arrays)
        errors: list[BaseException] = []  # rejections of the data: raised as they are
        device_errors: list[BaseException] = []  # engine failures: redone elsewhere

        def ended(member: _Member, begun: float, failure: BaseException | None) -> None:
            """An engine's work on the job ended, at ``failure`` where it raised."""
            share = member.share
            assert share is not None
            share.seconds += time.perf_counter() - begun
            with job.lock:
                if failure is None:
                    share.units += sum(hi - lo for lo, hi in member.taken)
                elif isinstance(failure, AuthenticationError):
                    job.stopped = True
                    errors.append(failure)
                else:  # the engine failed: the others redo its ranges
                    share.error = f"{type(failure).__name__}: {failure}".splitlines()[0]
                    job.redo.extend(member.taken)
                    device_errors.append(failure)

        def run(member: _Member) -> None:
            member.share = member.share or Share(member.engine.device)
            begun = time.perf_counter()
            try:
                work(stand_ins.get(id(member.engine), member.engine), _Claims(job, member))
            except Exception as exc:
                ended(member, begun, exc)
                return
            except BaseException:
                member.share.seconds += time.perf_counter() - begun
                raise
            ended(member, begun, None)

        # Every engine's first range is claimed before any starts: otherwise the engine
        # on the caller's thread, which starts last, could find a small job gone to an
        # engine whose pipeline claims several pieces ahead at once.
        for member in members:
            member.first = job.take(member)
        # GPUs in worker processes are all served from the caller's thread; the others
        # (or, where no GPU works apart, all but the first) each run on a thread.
        apart = [m for m in members if id(m.engine) in stand_ins]
        on_threads = [m for m in members if id(m.engine) not in stand_ins]
        threads = [threading.Thread(target=run, args=(m,), name=f"aescl-{m.engine.device.id}")
                   for m in (on_threads if apart else members[1:])]
        for thread in threads:
            thread.start()
        try:
            if apart:
                self._together(apart, stand_ins, job, work, ended)
            else:
                run(members[0])  # the caller's thread works too
        finally:
            for thread in threads:
                thread.join()
        # Ranges a failed engine took, once every engine has stopped: the fastest engine
        # left redoes them (the others finished theirs already).
        while job.redo and not errors:
            alive = [m for m in everyone if not (m.share and m.share.failed)]
            if not alive:
                errors.append(device_errors[0])
                break
            run(max(alive, key=lambda m: m.rate))
        self.shares = [m.share or Share(m.engine.device) for m in everyone]
        for member in everyone:
            share = member.share
            if share and not share.failed and share.units and share.seconds > 0:
                timed = member.engine.device.id, kinds[member.engine]
                if (*timed, launch) in _worked_before:
                    rates.measured[timed] = share.units * unit_bytes / share.seconds
                _worked_before.add((*timed, launch))
        if errors:
            raise first_failure(errors)


    @staticmethod
    def _together(apart: list[_Member], stand_ins: dict[int, Engine], job: _Job,
                  work: Callable[[Engine, Iterable[tuple[int, int]]], None],
                  ended: Callable[[_Member, float, BaseException | None], None]) -> None:
        """The members whose GPUs work in processes of their own: each one's task sent,
        then all of them served, on this thread (gpu_processes.Together)."""
        from .engines import gpu_processes

        together = gpu_processes.Together()
        for member in apart:
            member.share = member.share or Share(member.engine.device)
            begun = time.perf_counter()
            try:
                with together.begin(lambda failure, m=member, b=begun: ended(m, b, failure)):
                    work(stand_ins[id(member.engine)], _Claims(job, member))
            except Exception as exc:
                ended(member, begun, exc)
        together.serve()

    def blocks(self, transform: BlockTransform) -> TeamBlocks:
        return TeamBlocks(self, transform)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int) -> TeamChunks:
        return TeamChunks(self, key, base_nonce, batch_chunks)


def _final_engine() -> Engine:
    """The engine of a run's final chunk, on every team: the host engine. The chunk is
    under 16 KiB of host memory, which OpenSSL seals in about 0.05 ms on one core; a
    GPU took 1.0-1.25 ms for it, a launch and a wait once the split had ended, a
    fixed cost of every team call (2 x H200, 2 GiB, docs/benchmarks: "What a team's
    call costs apart from its bytes"), and a device need not start for it."""
    return engine_for(host_device())


class _Workers:
    """One job's worker per engine, made when the engine first takes part (an OpenCL
    worker builds its kernel then); callable from every member's thread."""

    def __init__(self, make: Callable[[Engine], Any]) -> None:
        self._make = make
        self._made: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, engine: Engine) -> Any:
        # (by device and kind of engine: a GPU's stand-in in its process has one too)
        key = engine.device.id, type(engine).__name__
        with self._lock:
            if key not in self._made:
                self._made[key] = self._make(engine)
            return self._made[key]


class TeamBlocks:
    """A block job (ECB, CTR) on every engine of a team; one worker per engine, made
    when the engine first takes part (an OpenCL worker builds its kernel then)."""

    def __init__(self, team: Team, transform: BlockTransform) -> None:
        self._team = team
        self.worker = _Workers(lambda engine: engine.blocks(transform))
        # (the kernel and its build: one a key size)
        self._launch = f"{transform.kernel[1]}/{8 * len(transform.key)}"

    def run(self, source: Any, target: Any, first_block: int = 0) -> None:
        """Every whole block of ``source`` into ``target`` (the same length; may be the
        same memory), their block 0 being the transform's block ``first_block``."""
        blocks = len(byte_view(source)) // BLOCK_SIZE
        self._team.for_job(blocks * BLOCK_SIZE, "blocks", arrays=(source, target)).split(
            blocks, BLOCK_SIZE,
            lambda engine, ranges: self.worker(engine).run(source, target, ranges, first_block),
            arrays=(source, target), launch=self._launch)

    def keystream(self, index: int) -> bytes:
        return bytes(self.worker(self._team.lead).keystream(index))


class TeamChunks:
    """The chunked format's chunks under one (key, base nonce) on every engine of a team."""

    def __init__(self, team: Team, key: bytes, base_nonce: bytes, batch_chunks: int) -> None:
        check_key(key)
        check_base_nonce(base_nonce)
        self._batch_chunks = batch_chunks
        self._team = team
        key, base_nonce = bytes(key), bytes(base_nonce)
        self.worker = _Workers(lambda engine: engine.chunks(key, base_nonce, batch_chunks))

    def _split(self, count: int, first: int, call: Callable[[Any, Ranges], None],
               arrays: tuple[Any, Any], launch: str) -> None:
        """``count`` whole chunks from message chunk ``first`` of ``arrays``, split over
        the team that runs a job of their size; ``call(worker, ranges)`` does an
        engine's part, ``launch`` (``seal``, ``open``) names it."""
        check_chunk_range(first, count)
        self._team.for_job(count * CHUNK_SIZE, "chunks", arrays=arrays).split(
            count, CHUNK_SIZE, lambda engine, ranges: call(self.worker(engine), ranges),
            "chunks", arrays, launch)

    def seal_full(self, plaintext: Any, sealed: Any, first: int) -> None:
        """Seal every whole chunk of ``plaintext`` (message chunks ``first, ...``) into
        ``sealed``, 16400 bytes each."""
        self._split(len(byte_view(plaintext)) // CHUNK_SIZE, first,
                    lambda worker, ranges: worker.seal_ranges(plaintext, sealed, first, ranges),
                    (plaintext, sealed), "seal")

    def open_full(self, sealed: Any, plaintext: Any, first: int) -> None:
        """Open every whole sealed chunk of ``sealed``; a range's plaintext is written
        only after its chunks authenticated, and a failure raises AuthenticationError."""
        self._split(len(byte_view(sealed)) // SEALED_CHUNK_SIZE, first,
                    lambda worker, ranges: worker.open_ranges(sealed, plaintext, first, ranges),
                    (sealed, plaintext), "open")

    def seal(self, plaintext: Any, first: int, final: bool) -> memoryview:
        """Seal chunks ``first, ...``; with ``final`` the last one is the short final one."""
        source = byte_view(plaintext)
        full, rest = plaintext_run(len(source), final)
        out = new_buffer(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0))
        self.seal_full(source[: full * CHUNK_SIZE], out[: full * SEALED_CHUNK_SIZE], first)
        if final:
            out[full * SEALED_CHUNK_SIZE :] = byte_view(self.worker(_final_engine()).seal(
                source[full * CHUNK_SIZE :], first + full, final=True))
        return out

    def open(self, ciphertext: Any, first: int, final: bool) -> memoryview:
        """Authenticate and decrypt sealed chunks from chunk ``first``; no plaintext of the
        run is returned unless all of it passed."""
        source = byte_view(ciphertext)
        full, rest = sealed_run(len(source), first, final)
        out = new_buffer(full * CHUNK_SIZE + (rest - TAG_SIZE if final else 0))
        try:
            self.open_full(source[: full * SEALED_CHUNK_SIZE], out[: full * CHUNK_SIZE], first)
            if final:
                out[full * CHUNK_SIZE :] = byte_view(self.worker(_final_engine()).open(
                    source[full * SEALED_CHUNK_SIZE :], first + full, final=True))
        except BaseException:
            wipe(out)
            raise
        return out

    @property
    def batch_chunks(self) -> int:
        """Chunks per window or device launch."""
        return self._batch_chunks

    def for_files(self, count: int) -> TeamChunks:
        """These chunks on the team that runs a job of ``count`` chunks between files,
        chosen once for the whole job: its windows are smaller jobs, and each choosing
        again (as the default team would, by its size) could move them elsewhere."""
        chosen = self._team.for_job(count * CHUNK_SIZE, "chunks", file_job=True)
        if chosen is self._team:
            return self
        bound = copy.copy(self)  # (the same workers, on the team chosen)
        bound._team = chosen
        return bound

    @property
    def engines(self) -> list[Engine]:
        return self._team.engines


__all__ = ["SPLIT_MIN_BYTES", "Share", "Team", "TeamBlocks", "TeamChunks"]
