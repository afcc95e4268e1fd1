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

**Faults.** An engine that fails (an OpenCL error, a device out of memory, a
lost device) is dropped from the job, and every range it had taken is redone by
the engines that are left; the job fails only when none is left. Ranges are
redone only after the failed engine's call has returned, so nothing it still
writes can race with the redo, and a range written twice holds the same bytes.
A rejection of the data itself (:class:`~aescl.errors.AuthenticationError`,
which is raised before any plaintext of its range is released) stops the whole
job at once and is raised as it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ._arrays import input_array
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
from .devices import Device, get_device, host_device, opencl_devices
from .engines import BLOCK_SIZE, BlockTransform, Engine, engine_for
from .errors import AuthenticationError, DeviceNotFound, TruncatedError, first_failure

DeviceSpec = Device | str | None
DevicesSpec = DeviceSpec | Sequence[Device | str]

# A job this small runs on the leading engine alone: splitting it would cost more
# (threads, a kernel launch per engine) than it saves.
SPLIT_MIN_BYTES = 1 << 20

# Guessed rates (GB/s, host memory to host memory) until a device has measured one.
_GUESSED_GB_S = {"gpu": 40.0, "accelerator": 10.0, "cpu": 1.0}  # the host: per core, below
_GUESSED_HOST_GB_S_PER_CORE = 5.0


def resolve_devices(device: DevicesSpec) -> list[Device]:
    """The devices of a job: one device or spec (as :func:`aescl.get_device`), ``"all"``,
    or a list of devices and specs. ``all`` is every GPU and accelerator plus the host
    engine: OpenCL CPU devices run on the cores the host engine already uses (and at
    a tenth of its rate there), so they join a job only when named."""
    if isinstance(device, Device):
        return [device]
    if device is None or isinstance(device, str):
        if device is not None and device.strip().lower() == "all":
            chosen = [d for d in opencl_devices() if d.type in ("gpu", "accelerator")]
            return [*chosen, host_device()]
        return [get_device(device)]
    chosen: list[Device] = []
    for item in device:
        for found in resolve_devices(item):
            if found not in chosen:
                chosen.append(found)
    if not chosen:
        raise DeviceNotFound("no device given: name at least one")
    return chosen


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
        return int(not job.stopped and (job.cursor < job.units or bool(job.redo)))

    def __next__(self) -> tuple[int, int]:
        claimed = self._job.take(self._member)
        if claimed is None:
            raise StopIteration
        return claimed


# device id -> measured rate in bytes per second, over the jobs of this process
_measured: dict[str, float] = {}


def _initial_rate(device: Device) -> float:
    if device.id in _measured:
        return _measured[device.id]
    if device.type == "host":
        return _GUESSED_HOST_GB_S_PER_CORE * device.compute_units * 1e9
    return _GUESSED_GB_S.get(device.type, 1.0) * 1e9


class Team:
    """The engines of one or more devices, running each job together."""

    def __init__(self, devices: list[Device]) -> None:
        if not devices:
            raise DeviceNotFound("no device given: name at least one")
        self.devices = devices
        self.engines = [engine_for(d) for d in devices]
        self.shares: list[Share] = []  # of the last job

    @property
    def lead(self) -> Engine:
        """The engine that runs work too small or too sequential to split: the one with
        the highest rate."""
        return max(self.engines, key=lambda e: _initial_rate(e.device))

    def split(self, units: int, unit_bytes: int,
              work: Callable[[Engine, Iterable[tuple[int, int]]], None]) -> None:
        """Run ``work(engine, ranges)`` on every engine at once over ``units`` units; each
        engine pulls its ranges from one cursor. Returns when every unit is done."""
        members = [_Member(e, _initial_rate(e.device)) for e in self.engines]
        if units <= 0:
            self.shares = [Share(m.engine.device) for m in members]
            return
        everyone = members
        if len(members) > 1 and units * unit_bytes < SPLIT_MIN_BYTES:
            # Too little to split: the leading engine alone, with no threads to start
            # (the others stay in reserve, in case it fails).
            members = [m for m in members if m.engine is self.lead]
        job = _Job(units, unit_bytes, members)
        errors: list[BaseException] = []  # rejections of the data: raised as they are
        device_errors: list[BaseException] = []  # engine failures: redone elsewhere

        def run(member: _Member) -> None:
            share = member.share = member.share or Share(member.engine.device)
            begun = time.perf_counter()
            member.taken.clear()
            try:
                work(member.engine, _Claims(job, member))
            except AuthenticationError as exc:
                with job.lock:
                    job.stopped = True
                errors.append(exc)
                return
            except Exception as exc:  # the engine failed: the others redo its ranges
                with job.lock:
                    share.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    job.redo.extend(member.taken)
                device_errors.append(exc)
                return
            finally:
                share.seconds += time.perf_counter() - begun
            with job.lock:
                share.units += sum(hi - lo for lo, hi in member.taken)

        threads = [threading.Thread(target=run, args=(m,), name=f"aescl-{m.engine.device.id}")
                   for m in members[1:]]
        for thread in threads:
            thread.start()
        try:
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
                _measured[member.engine.device.id] = share.units * unit_bytes / share.seconds
        if errors:
            raise first_failure(errors)


    def blocks(self, transform: BlockTransform) -> TeamBlocks:
        return TeamBlocks(self, transform)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int) -> TeamChunks:
        return TeamChunks(self, key, base_nonce, batch_chunks)


class _Workers:
    """One job's worker per engine, made when the engine first takes part (an OpenCL
    worker builds its kernel then); callable from every member's thread."""

    def __init__(self, make: Callable[[Engine], Any]) -> None:
        self._make = make
        self._made: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, engine: Engine) -> Any:
        with self._lock:
            if engine.device.id not in self._made:
                self._made[engine.device.id] = self._make(engine)
            return self._made[engine.device.id]


class TeamBlocks:
    """A block job (ECB, CTR) on every engine of a team; one worker per engine, made
    when the engine first takes part (an OpenCL worker builds its kernel then)."""

    def __init__(self, team: Team, transform: BlockTransform) -> None:
        self._team = team
        self.worker = _Workers(lambda engine: engine.blocks(transform))

    def run(self, source: Any, target: Any, first_block: int = 0) -> None:
        """Every whole block of ``source`` into ``target`` (the same length; may be the
        same memory), their block 0 being the transform's block ``first_block``."""
        self._team.split(len(memoryview(source).cast("B")) // BLOCK_SIZE, BLOCK_SIZE,
                         lambda engine, ranges: self.worker(engine).run(
                             source, target, ranges, first_block))

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

    def seal_full(self, plaintext: Any, sealed: Any, first: int) -> None:
        """Seal every whole chunk of ``plaintext`` (message chunks ``first, ...``) into
        ``sealed``, 16400 bytes each."""
        count = len(memoryview(plaintext).cast("B")) // CHUNK_SIZE
        check_chunk_range(first, count)
        self._team.split(count, CHUNK_SIZE, lambda engine, ranges: self.worker(
            engine).seal_ranges(plaintext, sealed, first, ranges))

    def open_full(self, sealed: Any, plaintext: Any, first: int) -> None:
        """Open every whole sealed chunk of ``sealed``; a range's plaintext is written
        only after its chunks authenticated, and a failure raises AuthenticationError."""
        count = len(memoryview(sealed).cast("B")) // SEALED_CHUNK_SIZE
        check_chunk_range(first, count)
        self._team.split(count, CHUNK_SIZE, lambda engine, ranges: self.worker(
            engine).open_ranges(sealed, plaintext, first, ranges))

    def seal(self, plaintext: Any, first: int, final: bool) -> np.ndarray:
        """Seal chunks ``first, ...``; with ``final`` the last one is the short final one."""
        source = input_array(plaintext)
        full, rest = plaintext_run(source.nbytes, final)
        out = np.empty(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0), np.uint8)
        self.seal_full(source[: full * CHUNK_SIZE], out[: full * SEALED_CHUNK_SIZE], first)
        if final:
            out[full * SEALED_CHUNK_SIZE :] = input_array(self.worker(self._team.lead).seal(
                source[full * CHUNK_SIZE :], first + full, final=True))
        return out

    def open(self, ciphertext: Any, first: int, final: bool) -> np.ndarray:
        """Authenticate and decrypt sealed chunks from chunk ``first``; no plaintext of the
        run is returned unless all of it passed."""
        source = input_array(ciphertext)
        full, rest = sealed_run(source.nbytes, first, final)
        out = np.empty(full * CHUNK_SIZE + (rest - TAG_SIZE if final else 0), np.uint8)
        try:
            self.open_full(source[: full * SEALED_CHUNK_SIZE], out[: full * CHUNK_SIZE], first)
            if final:
                out[full * CHUNK_SIZE :] = input_array(self.worker(self._team.lead).open(
                    source[full * SEALED_CHUNK_SIZE :], first + full, final=True))
        except BaseException:
            out[:] = 0
            raise
        return out

    def _single_opencl(self) -> Any:
        """The worker of a team of one OpenCL engine, which streams files itself."""
        engines = self._team.engines
        return self.worker(engines[0]) if len(engines) == 1 and engines[0].device.is_opencl \
            else None

    def seal_file(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                  progress: Callable[[int], None] | None = None) -> None:
        """Seal ``count`` full chunks read from ``source`` into ``sink``."""
        own = self._single_opencl()
        if own is not None:
            own.seal_file(source, sink, first, count, self._batch_chunks, progress)
            return
        self._windows(source, sink, first, count, CHUNK_SIZE, SEALED_CHUNK_SIZE,
                      self.seal_full, progress)

    def open_file(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                  progress: Callable[[int], None] | None = None) -> None:
        """Open ``count`` full sealed chunks from ``source`` into ``sink``, writing each
        window only after all of its chunks authenticated."""
        own = self._single_opencl()
        if own is not None:
            own.open_file(source, sink, first, count, self._batch_chunks, progress)
            return
        self._windows(source, sink, first, count, SEALED_CHUNK_SIZE, CHUNK_SIZE,
                      self.open_full, progress)

    def _windows(self, source: BinaryIO, sink: BinaryIO, first: int, count: int,
                 in_size: int, out_size: int, crypt: Callable[[Any, Any, int], None],
                 progress: Callable[[int], None] | None) -> None:
        """Read, split over the team and write a window of ``batch_chunks`` chunks at a
        time, as the OpenCL pipeline's runs are: memory stays bounded, and an opened
        window is written only after every chunk in it authenticated. Reading, sealing
        and writing follow each other here; they do not overlap."""
        if count <= 0:
            return
        window = min(count, self._batch_chunks)
        data = np.empty(window * in_size, np.uint8)
        out = np.empty(window * out_size, np.uint8)
        for start in range(0, count, window):
            chunks = min(window, count - start)
            view = memoryview(data)[: chunks * in_size]
            got = 0
            while got < len(view):
                read = source.readinto(view[got:])  # type: ignore[attr-defined]
                if not read:
                    raise TruncatedError("truncated: the input ended early (did it change "
                                         "while being read?)")
                got += read
            crypt(data[: chunks * in_size], out[: chunks * out_size], first + start)
            sink.write(memoryview(out)[: chunks * out_size])
            if progress:
                progress(chunks * in_size)


_teams: dict[tuple[str, ...], Team] = {}


def team(device: DevicesSpec) -> Team:
    """The team for a device spec (see :func:`resolve_devices`), reused across calls."""
    devices = resolve_devices(device)
    key = tuple(d.id for d in devices)
    existing = _teams.get(key)
    if existing is None or existing.devices != devices:
        existing = _teams[key] = Team(devices)
    return existing


__all__ = ["Share", "Team", "resolve_devices", "team"]
