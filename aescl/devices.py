"""The device layer: every OpenCL device as a :class:`Device`, and choosing one.

A spec is a short string (case-insensitive):

* ``gpu``, ``cpu``, ``accelerator``: a device type;
* ``nvidia``, ``amd``, ``intel``, ``apple``, ``pocl``, ``oclgrind``: a vendor class;
* ``P:D``: a device id (platform index, device index), as ``aescl devices`` lists;
* ``host``: the host engine, OpenSSL on every core of this machine (no OpenCL);
* anything else: a substring of the device name.

Where a job may run on several devices at once (aescl.scheduler), ``all`` means
every GPU and accelerator plus the host engine, and a list of specs names the
devices one by one.

When several devices match, the best one is chosen (GPUs first, then the
fastest). With no spec, ``$AESCL_DEVICE`` is used, else the best real device.
The Oclgrind simulator is only ever chosen by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import sys
import types
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DeviceNotFound, NoPlatformError

if TYPE_CHECKING:
    from ._icd import IcdReport

VENDOR_CLASSES = ("nvidia", "amd", "intel", "apple", "pocl", "oclgrind", "openssl", "other")
DEVICE_TYPES = ("gpu", "cpu", "accelerator", "simulator", "host", "other")
HOST_ID = "host"

# Platform vendor/name fragments, checked in order: PoCL and Oclgrind first,
# because they can drive other vendors' hardware but are their own driver stack.
_VENDOR_PATTERNS = (
    ("oclgrind", ("oclgrind",)),
    ("pocl", ("portable computing language", "pocl")),
    ("nvidia", ("nvidia",)),
    ("amd", ("advanced micro devices", "amd")),
    ("intel", ("intel",)),
    ("apple", ("apple",)),
)

NO_PLATFORM_HINT = (
    "no OpenCL platform found: install the CPU runtime with "
    "`pip install 'aescl[pocl]'`, or a vendor OpenCL driver (NVIDIA, AMD ROCm, Intel)"
)


@dataclass(frozen=True)
class Device:
    """One OpenCL device, with what aescl needs to know to choose and tune for it."""

    id: str
    name: str
    vendor: str
    type: str
    platform_name: str
    platform_version: str
    compute_units: int
    clock_mhz: int
    global_mem_bytes: int
    local_mem_bytes: int
    max_alloc_bytes: int
    max_work_group_size: int
    opencl_c_version: str
    driver_version: str
    cl_device: Any = field(default=None, repr=False, compare=False, hash=False)

    @property
    def is_simulator(self) -> bool:
        return self.type == "simulator"

    @property
    def is_opencl(self) -> bool:
        return self.type != "host"

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON-ready values (without the pyopencl handle)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cl_device"}


def vendor_class(platform_vendor: str, platform_name: str) -> str:
    """Map a platform's vendor and name strings to one of :data:`VENDOR_CLASSES`."""
    text = f"{platform_vendor} {platform_name}".lower()
    for vendor, fragments in _VENDOR_PATTERNS:
        if any(fragment in text for fragment in fragments):
            return vendor
    return "other"


def _device_type(vendor: str, cl_type: int) -> str:
    import pyopencl as cl

    if vendor == "oclgrind":
        return "simulator"
    for name, flag in (
        ("gpu", cl.device_type.GPU),
        ("cpu", cl.device_type.CPU),
        ("accelerator", cl.device_type.ACCELERATOR),
    ):
        if cl_type & flag:
            return name
    return "other"


@functools.lru_cache(maxsize=1)
def icd_report() -> IcdReport:
    """Discover ICDs and register unregistered drivers, once per process."""
    from . import _icd
    from ._cache import cache_root

    report = _icd.discover()
    try:
        return _icd.register_unregistered(report, cache_root() / "icd")
    except OSError:
        return report  # cannot write the cache: carry on with what is registered


def _platforms() -> list[Any]:
    # pyopencl is imported here, on the first look at OpenCL, not with aescl: the host
    # engine and small jobs never need it (it and numpy took 0.3 s of every CLI run).
    import pyopencl as cl

    icd_report()
    try:
        return list(cl.get_platforms())
    except cl.Error as exc:
        # -1001 (CL_PLATFORM_NOT_FOUND_KHR): the loader found no driver at all.
        if "PLATFORM_NOT_FOUND" in str(exc) or getattr(exc, "code", None) == -1001:
            return []
        raise


@functools.lru_cache(maxsize=1)
def _all_devices() -> tuple[Device, ...]:
    import pyopencl as cl

    found = []
    for p_index, platform in enumerate(_platforms()):
        vendor = vendor_class(platform.vendor, platform.name)
        try:
            cl_devices = platform.get_devices()
        except cl.Error:
            continue  # a platform with no usable device (e.g. driver without hardware)
        for d_index, dev in enumerate(cl_devices):
            found.append(
                Device(
                    id=f"{p_index}:{d_index}",
                    name=dev.name.strip(),
                    vendor=vendor,
                    type=_device_type(vendor, dev.type),
                    platform_name=platform.name.strip(),
                    platform_version=platform.version.strip(),
                    compute_units=int(dev.max_compute_units),
                    clock_mhz=int(dev.max_clock_frequency),
                    global_mem_bytes=int(dev.global_mem_size),
                    local_mem_bytes=int(dev.local_mem_size),
                    max_alloc_bytes=int(dev.max_mem_alloc_size),
                    max_work_group_size=int(dev.max_work_group_size),
                    opencl_c_version=dev.opencl_c_version.strip(),
                    driver_version=dev.driver_version.strip(),
                    cl_device=dev,
                )
            )
    return tuple(found)


@functools.lru_cache(maxsize=1)
def host_device() -> Device:
    """The host engine as a device: OpenSSL (through ``cryptography``) on every core."""
    import platform as _platform

    # Not platform.processor(): on Linux it runs `uname -p` in a subprocess.
    model = _platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    try:
        import cryptography

        version = cryptography.__version__
    except ImportError:
        version = "not installed"
    memory = 0
    with contextlib.suppress(ValueError, OSError, AttributeError):
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cores = os.cpu_count() or 1
    return Device(
        id=HOST_ID, name=f"{model} ({cores} threads, OpenSSL)", vendor="openssl", type="host",
        platform_name="aescl host engine", platform_version="",
        compute_units=cores, clock_mhz=0, global_mem_bytes=memory, local_mem_bytes=0,
        max_alloc_bytes=memory, max_work_group_size=1, opencl_c_version="",
        driver_version=f"cryptography {version}",
    )


def sub_devices(device: Device, count: int) -> list[Device]:
    """Split an OpenCL device that supports fission (PoCL's CPU device does) into
    ``count`` devices of equal compute units, with ids ``P:D.k``: several devices made
    from one, for running a split job where there is only one device."""
    import pyopencl as cl

    parent = device.cl_device
    if parent is None or cl.device_partition_property.EQUALLY not in (
            parent.partition_properties or []):
        raise DeviceNotFound(f"{device.id} {device.name} cannot be split into sub-devices")
    units = max(1, device.compute_units // count)
    parts = parent.create_sub_devices([cl.device_partition_property.EQUALLY, units])[:count]
    return [dataclasses.replace(device, id=f"{device.id}.{k}", compute_units=units,
                                cl_device=part) for k, part in enumerate(parts)]


def opencl_devices() -> list[Device]:
    """Every OpenCL device on every platform, simulators included."""
    return list(_all_devices())


def opencl_started() -> bool:
    """Whether this process has looked for OpenCL devices yet (and so paid for it)."""
    return _all_devices.cache_info().currsize > 0


def list_devices() -> list[Device]:
    """Every device aescl can run on: the OpenCL devices, simulators included, then
    the host engine (``host``)."""
    return [*_all_devices(), host_device()]


def _rank(device: Device) -> tuple[int, int, int]:
    # Without a measured rate, the host engine comes after GPUs and before CPU OpenCL
    # devices: on the same cores OpenSSL ran 10x PoCL's rate (docs/benchmarks).
    type_order = {"gpu": 0, "accelerator": 1, "host": 2, "cpu": 3, "other": 4, "simulator": 5}
    # A vendor's own driver before PoCL driving the same kind of hardware.
    portable = 1 if device.vendor == "pocl" else 0
    return (type_order[device.type], portable, -device.compute_units * max(device.clock_mhz, 1))


def matches(device: Device, spec: str) -> bool:
    """Whether a device fits a spec (see the module docstring)."""
    spec = spec.strip().lower()
    if spec == HOST_ID:
        return device.type == "host"
    if spec in DEVICE_TYPES:
        return device.type == spec
    if spec in VENDOR_CLASSES:
        return device.vendor == spec
    if re.fullmatch(r"\d+:\d+", spec):
        return device.id == spec
    return spec in device.name.lower()


def _describe(available: list[Device]) -> str:
    return "; ".join(f"{d.id} {d.name} ({d.vendor} {d.type})" for d in available)


def select(spec: str | None, available: list[Device]) -> Device:
    """Choose from ``available``; the pure part of :func:`get_device`, for testing."""
    if not available:
        raise NoPlatformError(NO_PLATFORM_HINT)
    if spec is None or not spec.strip():
        candidates = [d for d in available if not d.is_simulator]
        if not candidates:
            raise DeviceNotFound(
                "only simulators found (choose one explicitly with 'oclgrind'): "
                + _describe(available)
            )
    else:
        candidates = [d for d in available if matches(d, spec)]
        if not candidates:
            raise DeviceNotFound(
                f"no OpenCL device matches {spec!r}; available: {_describe(available)}"
            )
    return min(candidates, key=_rank)


def get_device(spec: str | None = None) -> Device:
    """The device for ``spec``, else ``$AESCL_DEVICE``, else the best real device.

    Raises :class:`DeviceNotFound` (listing the devices that exist) when nothing
    matches, and :class:`NoPlatformError` when OpenCL has no platform at all.
    """
    if spec is None:
        spec = os.environ.get("AESCL_DEVICE") or None
    if spec is not None and spec.strip().lower() == HOST_ID:
        return host_device()  # without looking for OpenCL at all
    return select(spec, list_devices())


def resolve(device: Device | str | None) -> Device:
    """Accept a :class:`Device`, a spec string or ``None`` wherever a device is asked for."""
    return device if isinstance(device, Device) else get_device(device)


class _CallableModule(types.ModuleType):
    """``aescl.devices`` is this module; calling it, ``aescl.devices()``, still lists the
    devices (:func:`list_devices`), as it did when a function of that name shadowed the
    module."""

    def __call__(self) -> list[Device]:
        return list_devices()


sys.modules[__name__].__class__ = _CallableModule
