"""Which devices a job runs on: device specs resolved into teams, and the team of each
job when no device is named (:class:`DefaultTeam`). A team itself, and how it splits a
job over its engines, is :mod:`aescl.scheduler`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from . import scheduler
from .devices import Device, host_device, select
from .engines import Engine, engine_for
from .engines.registry import get_device, gpu_engine_started, line_of, list_devices, started
from .errors import DeviceNotFound
from .rates import (
    MIN_MEASURED_BYTES,
    PINNED,
    expected_rate,
    expected_seconds,
    fastest_seconds,
    least_start_seconds,
    only_guessed,
    pinned_guess,
    rate_kind,
    stored_rate,
)
from .scheduler import Team

DeviceSpec = Device | str | None
DevicesSpec = DeviceSpec | Sequence[Device | str]

_CUDA_SPEC = re.compile(r"\s*cuda(?::(\d+))?\s*", re.IGNORECASE)


def cuda_spec(device: DevicesSpec) -> tuple[bool, int | None]:
    """Whether ``device`` is the spec ``cuda`` or ``cuda:N`` (the CUDA engine), and the GPU
    it names (None: ``cuda``, which takes each CUDA array on its own GPU and host data on
    the first)."""
    found = _CUDA_SPEC.fullmatch(device) if isinstance(device, str) else None
    if found is None:
        return False, None
    return True, None if found.group(1) is None else int(found.group(1))


def _names_all(device: DevicesSpec) -> bool:
    """Whether ``device`` is the spec ``all``, or a list that names it."""
    items = [device] if isinstance(device, str | Device) or device is None else device
    return any(isinstance(item, str) and item.strip().lower() == "all" for item in items)


def one_engine_per_gpu(gpus: Sequence[Device]) -> list[Device]:
    """Of GPUs that two engines see (an OpenCL device and a CUDA one at the same PCI
    address), the one whose block rate ``aescl bench`` stored higher (a measured one
    before one never measured); the CUDA one where neither was measured. In the order
    given.

    The rule where nothing was measured goes by the figures in docs/benchmarks (H100 and
    H200): the CUDA engine's kernels ran 1.3x the OpenCL engine's on the same GPU
    (CTR-128 757-770 GB/s against 575), and a team of four H200s reached 77.8 GB/s on
    pinned memory through CUDA against 41.4 through NVIDIA's OpenCL, below one GPU. On
    host data one H200 moves as much through either engine pinned (CTR, sealing and
    opening 47.5-48.9 GB/s through CUDA, 47.6-49.4 through OpenCL), and more through CUDA
    on ordinary memory (16.9-18.7 against 10.1-15.3; 2026-12-01)."""
    chosen: dict[str, Device] = {}
    for device in gpus:
        key = device.pci_address or device.id
        held = chosen.get(key)
        if held is None or _engine_score(device) > _engine_score(held):
            chosen[key] = device
    return [d for d in gpus if chosen.get(d.pci_address or d.id) is d]


def _engine_score(device: Device) -> tuple[int, float, int]:
    rate = stored_rate(device, "blocks")
    return (int(rate is not None), rate or 0.0, int(device.is_cuda))


def resolve_devices(device: DevicesSpec) -> list[Device]:
    """The devices of a job: one device or spec (as :func:`aescl.get_device`), ``"all"``,
    or a list of devices and specs. ``all`` is every GPU and accelerator (a GPU that
    both OpenCL and CUDA see, once: :func:`one_engine_per_gpu`), the host engine and the
    OpenCL CPU devices (simulators left out); a job on it gives the host's cores to one
    of the last two (:meth:`Team.taking_part`)."""
    if isinstance(device, Device):
        return [device]
    if device is None:  # ($AESCL_DEVICE may name any spec, ``all`` too)
        device = os.environ.get("AESCL_DEVICE") or None
    if device is None or isinstance(device, str):
        if _names_all(device):
            found = [d for d in list_devices() if not d.is_simulator]
            gpus = [d for d in found if d.type in ("gpu", "accelerator")]
            return [*one_engine_per_gpu(gpus), host_device(),
                    *(d for d in found if d.type == "cpu")]
        return [get_device(device)]
    chosen: list[Device] = []
    for item in device:
        for found in resolve_devices(item):
            if found not in chosen:
                chosen.append(found)
    if not chosen:
        raise DeviceNotFound("no device given: name at least one")
    return chosen


class DefaultTeam(Team):
    """The team when no device is named (and ``$AESCL_DEVICE`` is unset): each job runs on
    the one device expected to finish it soonest (:meth:`best_device`).

    * A job below :data:`scheduler.SPLIT_MIN_BYTES` runs on the host engine: a device
      call's fixed costs outweigh it.
    * A larger job's expected time on a device is its start-up in this process (none
      on the host engine or once the device's engine, OpenCL or CUDA, runs here; else
      as ``aescl bench`` timed it in a fresh process, or guessed) and its bytes at the
      device's rate for the kind of work (:func:`aescl.rates.expected_seconds`: stored
      by ``aescl bench``, else guessed), the rate capped at the files' own for a job
      between files.
    * While neither OpenCL nor CUDA has started, the host engine takes jobs without
      looking for devices at all, as long as the time it spends on them, beyond what
      any device could take (none, or the files' rate for a file job), adds up to no
      more than the least start-up timed. The first job past that looks, and counts
      the start-up as paid: the devices start then, and that job and those after it
      go by rate alone. One large job thus starts no device a host engine beats,
      and a process of many such jobs pays a start-up once, after at most as long
      on the host engine (renting before buying).
    * A CPU device (an OpenCL CPU, PoCL) is guessed at a tenth of the host engine's
      rate, so that, unmeasured, it is not started for a job the host engine would do
      (its rate a core differs 3.5x between the kinds of machine measured: no guess
      fits both). Once its engine has started that reason is gone: while its rate for
      a kind of work is still a guess, it takes the large jobs in memory (from
      :data:`aescl.rates.MIN_MEASURED_BYTES`) of that kind until one has measured it
      (two or three: a device's first job of each kind of launch sets no rate), and
      then goes by its measured rate like every other.
      On the 2-core CI kind PoCL seals 256 MiB at 2.5-2.8 GB/s against the host
      engine's 2.1-2.2; on the 16-core H200 host at 5.7 against 12.4
      (docs/benchmarks): there, the two jobs cost once what the measurement is worth.

    Small pieces of a job (CTR's partial blocks, the format's final chunk) run on the
    host engine. A GCM stream, whose length is unknown when it starts, runs on the
    device expected fastest at a GCM stream (``gcm`` in aescl.rates: guessed from
    measured plain calls, as no bench figure measures one); until a GPU engine has
    started, on the host engine: starting one costs more than the host engine's
    stream takes for anything but gigabytes.
    """

    def __init__(self) -> None:
        self._host = Team([host_device()])
        super().__init__(self._host.devices)
        # Seconds the host engine was expected to spend on jobs beyond what a device
        # could have taken, while no GPU engine had started (what renting has cost).
        self._rented_seconds = 0.0

    def best_device(self, kind: str, nbytes: int | None = None,
                    file_job: bool = False, arrays: Sequence[Any] = ()) -> Device:
        """The real device expected to finish ``nbytes`` of ``kind`` of work soonest
        (``nbytes=None``: the fastest at it, start-up aside), on host ``arrays`` where
        given: each device at its rate on them (a GPU's pinned rate on memory pinned for
        it, as ``aescl bench`` stored it or a job measured it; aescl.rates.rate_kind)."""
        host = host_device()
        if nbytes is not None and nbytes < scheduler.SPLIT_MIN_BYTES:
            return host
        # (Whether each engine had started before this look: looking starts it.)
        was_started = started()
        cold = not gpu_engine_started()
        if nbytes is not None and cold:
            beyond = (expected_seconds(host, kind, nbytes, True, file_job)
                      - fastest_seconds(nbytes, file_job))
            if self._rented_seconds + beyond <= least_start_seconds():
                self._rented_seconds += beyond
                return host
            was_started = dict.fromkeys(was_started, True)  # (looking starts them: paid now)
        candidates = [d for d in list_devices() if not d.is_simulator]
        if nbytes is not None and nbytes >= MIN_MEASURED_BYTES and not file_job:
            trying = [d for d in candidates if d.type == "cpu" and was_started[d.engine]
                      and only_guessed(d, kind)]
            if trying:
                return select(None, trying)
        if nbytes is None:
            scores = {d.id: -expected_rate(d, kind, stored_first=True) for d in candidates}
        else:
            scores = {d.id: expected_seconds(d, _kind_on(d, kind, arrays), nbytes,
                                             was_started[d.engine], file_job)
                      for d in candidates}
        least = min(scores.values())
        # Ties go as get_device ranks devices.
        return select(None, [d for d in candidates if scores[d.id] == least])

    def for_job(self, nbytes: int, kind: str, file_job: bool = False,
                arrays: Sequence[Any] = ()) -> Team:
        return team(self.best_device(kind, nbytes, file_job, arrays))

    def stream_engine(self) -> Engine:
        if not gpu_engine_started():
            return self._host.lead
        return team(self.best_device("gcm")).lead


def _kind_on(device: Device, kind: str, arrays: Sequence[Any]) -> str:
    """The kind of rate ``device`` does ``kind`` of work at on host ``arrays``
    (aescl.rates.rate_kind). No engine is made, and no engine package imported, for a
    device no job has run on where the answer cannot matter: where its pinned rate is
    neither known nor guessed from its link, a pinned kind falls back to the plain
    one; and memory is pinned for a device only by its engine's package, so where that
    was never imported, none is."""
    if not arrays:
        return kind
    if only_guessed(device, kind + PINNED) and (
            pinned_guess(device) is None or not line_of(device.engine).imported()):
        return kind
    return rate_kind(engine_for(device), kind, arrays)


class WholeMachineTeam(Team):
    """What ``device="all"`` names: every device (:func:`resolve_devices`), listed when a
    job first needs more than the host engine. Two kinds of job run on the host engine
    without listing any, as with no device named:

    * a job below :data:`scheduler.SPLIT_MIN_BYTES` (the default team's rule: a device
      call's fixed costs outweigh it);
    * a job between files that the host engine is expected to keep up with alone
      (:meth:`Team.for_job`: no team goes faster than the files, and the host engine
      comes first among the devices that keep up).

    Listing the devices starts OpenCL and CUDA (0.4 s on the 2-core CI kind, most of
    ``aescl encrypt --device all`` of a small file there), which such a job never needs.
    """

    def __init__(self) -> None:
        self.whole_machine = True
        self.shares: list[scheduler.Share] = []
        self._alone: dict[str, Team] = {}
        self._listed: list[Device] | None = None
        self._engines: list[Engine] | None = None

    @property
    def devices(self) -> list[Device]:
        if self._listed is None:
            self._listed = resolve_devices("all")
        return self._listed

    @property
    def engines(self) -> list[Engine]:
        if self._engines is None:
            self._engines = [engine_for(d) for d in self.devices]
        return self._engines

    def for_job(self, nbytes: int, kind: str, file_job: bool = False,
                arrays: Sequence[Any] = ()) -> Team:
        host = host_device()
        if nbytes < scheduler.SPLIT_MIN_BYTES or (
                file_job and scheduler.keeps_up_with_files(host, kind, nbytes)):
            if host.id not in self._alone:
                self._alone[host.id] = Team([host])
            return self._alone[host.id]
        return super().for_job(nbytes, kind, file_job)


class CudaTeam(Team):
    """What ``device="cuda"`` or ``"cuda:N"`` names: the CUDA engine (aescl[cuda]). Host
    data runs on GPU ``ordinal`` (``cuda``: the first); CUDA arrays on that GPU, or
    for ``cuda``, each on its own (docs/gpu-arrays.md)."""

    def __init__(self, ordinal: int | None) -> None:
        self.ordinal = ordinal
        super().__init__(resolve_devices(self.spec))

    @property
    def spec(self) -> str:
        return "cuda" if self.ordinal is None else f"cuda:{self.ordinal}"


def array_device_rule(kind: str, team: Team) -> Any:
    """Where a cipher made for ``team`` runs device arrays of ``kind``: for pyopencl
    arrays the OpenCL devices named (None: the array's own), for CUDA arrays the GPU
    that ``cuda:N`` names (None: ``cuda``, or no device named: the array's own).
    Raises ValueError where the device named cannot take that kind of array."""
    if isinstance(team, DefaultTeam):
        return None
    if kind == "opencl":
        if isinstance(team, CudaTeam):
            raise ValueError(f"a pyopencl array runs on its OpenCL device; this cipher was "
                             f"made for {team.spec!r} (CUDA arrays only)")
        return [d for d in team.devices if d.is_opencl]
    if isinstance(team, CudaTeam):
        return team.ordinal
    gpus = [d for d in team.devices if d.is_cuda]
    if gpus:  # (a list of devices that names one)
        return int(gpus[0].id.partition(":")[2])
    raise ValueError("a CUDA array runs on the CUDA engine: make the cipher with "
                     "device='cuda' or 'cuda:N', or with no device; this one was made for "
                     + ", ".join(d.id for d in team.devices))


_teams: dict[tuple[str, ...], Team] = {}


def _only_all(device: DevicesSpec) -> bool:
    """Whether ``device`` is the spec ``all`` alone (or a list of it alone, as the CLI
    passes ``--device all``)."""
    if isinstance(device, list | tuple) and len(device) == 1:
        device = device[0]
    return isinstance(device, str) and device.strip().lower() == "all"


_default_team: list[DefaultTeam] = []


def team(device: DevicesSpec) -> Team:
    """The team for a device spec (see :func:`resolve_devices`), reused across calls;
    with no device named and ``$AESCL_DEVICE`` unset, the :class:`DefaultTeam`."""
    if device is None:
        device = os.environ.get("AESCL_DEVICE") or None
    if device is None:
        if not _default_team:
            _default_team.append(DefaultTeam())
        return _default_team[0]
    if _only_all(device):
        if ("all",) not in _teams:
            _teams[("all",)] = WholeMachineTeam()
        return _teams[("all",)]
    is_cuda, ordinal = cuda_spec(device)
    if is_cuda:
        key = ("cuda", str(ordinal))
        if key not in _teams:
            _teams[key] = CudaTeam(ordinal)
        return _teams[key]
    devices = resolve_devices(device)
    whole_machine = _names_all(device)
    key = (*(d.id for d in devices), str(whole_machine))
    existing = _teams.get(key)
    if existing is None or existing.devices != devices:
        existing = _teams[key] = Team(devices, whole_machine)
    return existing


__all__ = ["CudaTeam", "DefaultTeam", "DeviceSpec", "DevicesSpec", "WholeMachineTeam",
           "array_device_rule", "cuda_spec", "resolve_devices", "team"]
