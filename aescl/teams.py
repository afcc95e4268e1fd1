"""Which devices a job runs on: device specs resolved into teams, and the team of each
job when no device is named (:class:`DefaultTeam`). A team itself, and how it splits a
job over its engines, is :mod:`aescl.scheduler`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from . import scheduler
from .devices import (
    Device,
    get_device,
    host_device,
    opencl_devices,
    opencl_started,
    select,
)
from .engines import Engine
from .errors import DeviceNotFound
from .rates import expected_rate
from .scheduler import Team

DeviceSpec = Device | str | None
DevicesSpec = DeviceSpec | Sequence[Device | str]

# With no device named, a job smaller than this runs on the host engine while this
# process has not started OpenCL. In a fresh process OpenCL's start-up (platforms,
# context, kernel binaries) costs 0.8-0.9 s on the H100 host: there, whole `aescl
# encrypt` runs took on the host engine 0.27 s for 128 MiB and 1.17-1.20 s for 1 GiB,
# on the GPU 1.07-1.19 s and 1.31-1.35 s (docs/benchmarks): break-even near 1.2 GiB.
COLD_HOST_BYTES = 1 << 30


_CUDA_SPEC = re.compile(r"\s*cuda(?::(\d+))?\s*", re.IGNORECASE)


def cuda_spec(device: DevicesSpec) -> tuple[bool, int | None]:
    """Whether ``device`` is the spec ``cuda`` or ``cuda:N`` (the CUDA engine, on device
    arrays), and the GPU it names (None: each array's own)."""
    found = _CUDA_SPEC.fullmatch(device) if isinstance(device, str) else None
    if found is None:
        return False, None
    return True, None if found.group(1) is None else int(found.group(1))


def _names_all(device: DevicesSpec) -> bool:
    """Whether ``device`` is the spec ``all``, or a list that names it."""
    items = [device] if isinstance(device, str | Device) or device is None else device
    return any(isinstance(item, str) and item.strip().lower() == "all" for item in items)


def resolve_devices(device: DevicesSpec) -> list[Device]:
    """The devices of a job: one device or spec (as :func:`aescl.get_device`), ``"all"``,
    or a list of devices and specs. ``all`` is every GPU and accelerator, the host
    engine and the OpenCL CPU devices (simulators left out); a job on it gives the
    host's cores to one of the last two (:meth:`Team.taking_part`)."""
    if isinstance(device, Device):
        return [device]
    if device is None or isinstance(device, str):
        if _names_all(device):
            found = [d for d in opencl_devices() if not d.is_simulator]
            return [*(d for d in found if d.type in ("gpu", "accelerator")), host_device(),
                    *(d for d in found if d.type == "cpu")]
        return [get_device(device)]
    chosen: list[Device] = []
    for item in device:
        if cuda_spec(item)[0]:
            raise DeviceNotFound(
                f"{item!r} is the CUDA engine, which takes CUDA device arrays, alone: not "
                "files or host data, nor a place in a list of devices (yet)")
        for found in resolve_devices(item):
            if found not in chosen:
                chosen.append(found)
    if not chosen:
        raise DeviceNotFound("no device given: name at least one")
    return chosen


class DefaultTeam(Team):
    """The team when no device is named (and ``$AESCL_DEVICE`` is unset): each job runs on
    one device chosen for it.

    * A job below the crossover runs on the host engine and never starts OpenCL: below
      :data:`COLD_HOST_BYTES` while this process has not started OpenCL, below
      :data:`scheduler.SPLIT_MIN_BYTES` once it has (a device call's fixed costs are then paid).
    * A larger job runs on the device with the highest expected rate for its kind of
      work (:func:`expected_rate`: measured, stored by ``aescl bench``, else guessed),
      among the real OpenCL devices and the host engine.

    Small pieces of a job (CTR's partial blocks, the format's final chunk) run on the
    host engine. A GCM stream, whose length is unknown when it starts, runs on the
    device expected fastest for chunks (the same GCM work).
    """

    def __init__(self) -> None:
        self._host = Team([host_device()])
        super().__init__(self._host.devices)

    def crossover_bytes(self) -> int:
        return scheduler.SPLIT_MIN_BYTES if opencl_started() else COLD_HOST_BYTES

    def best_device(self, kind: str) -> Device:
        """The real device expected to be fastest at ``kind`` of work."""
        candidates = [d for d in opencl_devices() if not d.is_simulator] + [host_device()]
        rated = {d.id: expected_rate(d, kind, stored_first=True) for d in candidates}
        best = max(rated.values())
        # Ties (as between unmeasured devices of one kind) go as get_device ranks them.
        return select(None, [d for d in candidates if rated[d.id] == best])

    def for_job(self, nbytes: int, kind: str) -> Team:
        if nbytes < self.crossover_bytes():
            return self._host
        return team(self.best_device(kind))

    def stream_engine(self) -> Engine:
        return team(self.best_device("chunks")).lead


class CudaTeam(Team):
    """What ``device="cuda"`` or ``"cuda:N"`` names: the CUDA engine (aescl[cuda]), on the
    GPU ``ordinal`` (None: each array's own). It takes CUDA device arrays (torch, CuPy;
    docs/gpu-arrays.md). Host data it refuses with :class:`DeviceNotFound`: the CUDA
    engine does not run host jobs yet, and running them elsewhere would ignore the
    device named."""

    def __init__(self, ordinal: int | None) -> None:  # (no engines: not a Team of devices)
        self.ordinal = ordinal
        self.devices, self.engines, self.whole_machine, self.shares = [], [], False, []

    @property
    def spec(self) -> str:
        return "cuda" if self.ordinal is None else f"cuda:{self.ordinal}"

    def _refuse(self, *_: Any) -> NoReturn:
        raise DeviceNotFound(
            f"device {self.spec!r} is the CUDA engine, which takes CUDA device arrays "
            "(torch, CuPy) only; host data runs on an OpenCL device or 'host' (or leave "
            "device= out)")

    @property
    def lead(self) -> Engine:
        self._refuse()

    stream_engine = for_job = taking_part = split = _refuse


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
        return list(team.devices)
    if isinstance(team, CudaTeam):
        return team.ordinal
    raise ValueError("a CUDA array runs on the CUDA engine: make the cipher with "
                     "device='cuda' or 'cuda:N', or with no device; this one was made for "
                     + ", ".join(d.id for d in team.devices))


_teams: dict[tuple[str, ...], Team] = {}


_default_team: list[DefaultTeam] = []


def team(device: DevicesSpec) -> Team:
    """The team for a device spec (see :func:`resolve_devices`), reused across calls;
    with no device named and ``$AESCL_DEVICE`` unset, the :class:`DefaultTeam`."""
    if device is None and not os.environ.get("AESCL_DEVICE"):
        if not _default_team:
            _default_team.append(DefaultTeam())
        return _default_team[0]
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


__all__ = ["COLD_HOST_BYTES", "CudaTeam", "DefaultTeam", "DeviceSpec", "DevicesSpec",
           "array_device_rule", "cuda_spec", "resolve_devices", "team"]
