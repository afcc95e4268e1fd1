"""The engines aescl has, one line each (:data:`ENGINES`), and what is asked of them
through that line alone: every device (:func:`list_devices`, :func:`get_device`), the
engine of a device (:func:`engine_for`), whether a GPU engine has started, the kind of
a device array (:func:`array_kind_of`) and host memory for a set of devices
(:func:`host_memory`).

A line names its engine, as ``Device.engine`` says it, and where its parts are, as
``"module:name"`` strings imported on first use: nothing of an engine is imported
before one of its devices, or one of its arrays, is asked for. By convention the engine
package ``aescl.engines.<name>`` exports from its root:

* ``Engine``: the engine of one device (:class:`aescl.engines.Engine`);
* ``host_memory(nbytes, devices, shared)`` where a device of it reads host memory of
  its own (a GPU's pinned memory): an array of ``nbytes``, or None where its devices
  among ``devices`` read ordinary memory in place;
* ``ArrayBlocks``, ``ArrayGhash``, ``ArrayChunks`` where it takes device arrays
  (engines/device_arrays.py).

A new engine is its package and one line here.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ..devices import CUDA_HINT, HOST_ID, Device, host_device, select
from ..errors import DeviceNotFound

if TYPE_CHECKING:
    import numpy as np

    from .device_arrays import ArrayKind
    from .interface import Engine


@dataclass(frozen=True)
class EngineLine:
    """One engine: its name (``Device.engine``), what lists its devices and what tells
    whether it has started in this process (both ``"module:function"``, light to
    import), its device arrays' :class:`ArrayKind` (``"module:name"``, or None), and
    what its devices are called and what to say where its own spec (``<name>``,
    ``<name>:N``) finds none (``called`` None: it has no specs of its own, as OpenCL's
    ``P:D`` go through every device). ``pins_for_all``: its
    host memory is page-locked for every device at once (CUDA's portable
    ``cuMemHostAlloc``), so it is asked first where a set of devices mixes engines."""

    name: str
    find: str
    started: str
    arrays: str | None = None
    called: str | None = None
    missing_hint: str = ""
    pins_for_all: bool = False

    @property
    def gpu_engine(self) -> bool:
        """Whether its devices need the engine started (all but the host engine)."""
        return self.name != "host"

    def devices(self) -> Sequence[Device]:
        return _resolve(self.find)()  # type: ignore[no-any-return]

    def has_started(self) -> bool:
        return bool(_resolve(self.started)())

    def imported(self) -> bool:
        """Whether ``aescl.engines.<name>`` has been imported in this process."""
        return f"{__package__}.{self.name}" in sys.modules

    def package(self) -> types.ModuleType:
        """``aescl.engines.<name>``, imported on first use."""
        return importlib.import_module(f"{__package__}.{self.name}")

    def names_only_its_devices(self, spec: str) -> bool:
        """Whether ``spec`` is ``<name>`` or ``<name>:N``, which lists its devices alone."""
        return (self.called is not None
                and re.fullmatch(rf"{self.name}(:\d+)?", spec.strip().lower()) is not None)


# In the order aescl.list_devices lists their devices (and, for device arrays, asks).
ENGINES = (
    EngineLine("opencl", "aescl.devices:opencl_devices", "aescl.devices:opencl_started",
               arrays="aescl.engines.device_arrays:OPENCL_ARRAYS"),
    EngineLine("cuda", "aescl.devices:cuda_devices", "aescl.devices:cuda_started",
               arrays="aescl.engines.device_arrays:CUDA_ARRAYS", called="CUDA GPU",
               missing_hint=CUDA_HINT,
               pins_for_all=True),
    EngineLine("host", "aescl.devices:host_devices", "aescl.devices:host_started"),
)


@cache
def _resolve(where: str) -> Any:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def line_of(name: str) -> EngineLine:
    """The line of the engine ``name`` (``Device.engine``)."""
    for line in ENGINES:
        if line.name == name:
            return line
    raise LookupError(f"no engine named {name!r}")


# ---- Devices -------------------------------------------------------------------------


def list_devices() -> list[Device]:
    """Every device aescl can run on, engine by engine: the OpenCL devices, simulators
    included, the CUDA engine's GPUs (``cuda:N``), then the host engine (``host``)."""
    return [device for line in ENGINES for device in line.devices()]


def get_device(spec: str | None = None) -> Device:
    """The device for ``spec``, else ``$AESCL_DEVICE``, else the best real device.

    ``host`` and an engine's own specs (``cuda``, ``cuda:N``) look at that engine's
    devices alone, starting no other. Raises :class:`DeviceNotFound` (listing the
    devices that exist) when nothing matches, and :class:`NoPlatformError` when OpenCL
    has no platform at all.
    """
    import os

    if spec is None:
        spec = os.environ.get("AESCL_DEVICE") or None
    if spec is not None and spec.strip().lower() == HOST_ID:
        return host_device()  # without looking for OpenCL at all
    for line in ENGINES:
        if spec is not None and line.names_only_its_devices(spec):
            found = list(line.devices())
            if not found:
                raise DeviceNotFound(f"no {line.called} for {spec.strip()!r}: "
                                     f"{line.missing_hint}")
            return select(spec, found)
    return select(spec, list_devices())


def resolve(device: Device | str | None) -> Device:
    """Accept a :class:`Device`, a spec string or ``None`` wherever a device is asked for."""
    return device if isinstance(device, Device) else get_device(device)


def started() -> dict[str, bool]:
    """Per engine, whether this process has started it (looked for its devices)."""
    return {line.name: line.has_started() for line in ENGINES}


def gpu_engine_started() -> bool:
    """Whether any engine but the host engine has started in this process."""
    return any(line.has_started() for line in ENGINES if line.gpu_engine)


# ---- Engines -------------------------------------------------------------------------

_engines: dict[str, Engine] = {}


def engine_for(device: Device) -> Engine:
    """The engine of a device, made once per process."""
    existing = _engines.get(device.id)
    if existing is None or existing.device != device:
        existing = _engines[device.id] = line_of(device.engine).package().Engine(device)
    return existing


# ---- Device arrays -------------------------------------------------------------------


@cache
def array_kinds() -> tuple[ArrayKind, ...]:
    """The kinds of device array the engines take, in the order asked."""
    return tuple(_resolve(line.arrays) for line in ENGINES if line.arrays)


def array_kind_of(data: Any) -> ArrayKind | None:
    """The kind of device array ``data`` is; None for host memory."""
    for kind in array_kinds():
        if kind.holds(data):
            return kind
    return None


# ---- Host memory ---------------------------------------------------------------------


def host_memory(nbytes: int, chosen: Sequence[Device], shared: Callable[[], Any] | None
                ) -> np.ndarray | None:
    """Host memory of ``nbytes`` from the first engine of a device among ``chosen`` that
    has memory of its own (``pins_for_all`` first, then in :data:`ENGINES`' order);
    ``shared``, where the host engine takes part, makes memory shared with its worker
    processes, for the engine to pin. None where every device chosen reads ordinary
    memory in place."""
    for line in sorted(ENGINES, key=lambda line: not line.pins_for_all):
        mine = [d for d in chosen if d.engine == line.name]
        if mine and line.gpu_engine:
            made = getattr(line.package(), "host_memory", None)
            memory = made(nbytes, chosen, shared) if made is not None else None
            if memory is not None:
                return memory  # type: ignore[no-any-return]
    return None


class _CallableModule(types.ModuleType):
    """``aescl.devices`` is a module; calling it, ``aescl.devices()``, still lists the
    devices (:func:`list_devices`), as it did when a function of that name shadowed the
    module. Set from here, where every engine's devices are known."""

    def __call__(self) -> list[Device]:
        return list_devices()


sys.modules[Device.__module__].__class__ = _CallableModule
