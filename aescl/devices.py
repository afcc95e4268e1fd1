"""The device layer: every OpenCL device and every CUDA GPU as a :class:`Device`, and
choosing one.

A spec is a short string (case-insensitive):

* ``gpu``, ``cpu``, ``accelerator``: a device type;
* ``nvidia``, ``amd``, ``intel``, ``apple``, ``pocl``, ``oclgrind``: a vendor class;
* ``P:D``: an OpenCL device id (platform index, device index), as ``aescl devices`` lists;
* ``cuda``, ``cuda:N``: the CUDA engine (``pip install 'aescl[cuda]'``) on a CUDA GPU
  (the first, or GPU ``N`` as CUDA numbers them);
* ``host``: the host engine, OpenSSL on every core of this machine (no OpenCL);
* anything else: a substring of the device name.

A GPU that both NVIDIA's OpenCL driver and CUDA see is two devices here, one per engine
(``P:D`` and ``cuda:N``, with the same :attr:`Device.pci_address`). A type or vendor
spec (``gpu``, ``nvidia``) matches both, and takes the OpenCL one first; ``cuda``
names the CUDA engine's.

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
    engine: str = "opencl"  # the engine that runs on it: "opencl", "cuda" or "host"
    # PCI domain:bus:device where the driver tells it (NVIDIA's): the same GPU under
    # two engines has the same address.
    pci_address: str = ""
    # GB/s each way over its PCIe link, where Linux describes the link (pcie_link_gb_s).
    pcie_gb_s: float | None = None

    @property
    def is_simulator(self) -> bool:
        return self.type == "simulator"

    @property
    def is_opencl(self) -> bool:
        return self.engine == "opencl"

    @property
    def is_cuda(self) -> bool:
        return self.engine == "cuda"

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
            address = _nvidia_pci_address(dev) if vendor == "nvidia" else ""
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
                    pci_address=address,
                    pcie_gb_s=pcie_link_gb_s(address),
                )
            )
    return tuple(found)


def _nvidia_pci_address(dev: Any) -> str:
    """domain:bus:device of an NVIDIA OpenCL device (cl_nv_device_attribute_query), or
    "" where the driver does not say."""
    try:
        domain = int(getattr(dev, "pci_domain_id_nv", 0))
        return f"{domain:04x}:{int(dev.pci_bus_id_nv):02x}:{int(dev.pci_slot_id_nv):02x}"
    except Exception:  # noqa: BLE001 - an older driver or pyopencl: no address
        return ""


@functools.lru_cache(maxsize=1)
def cuda_devices() -> tuple[Device, ...]:
    """The CUDA engine's GPUs (``cuda:N``), read from the driver without making a context
    on any; none without aescl[cuda] (cuda-bindings) or the NVIDIA driver."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return ()

    def check(result: Any) -> Any:
        error, *values = result
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(error)
        return values[0] if values else None

    attribute = driver.CUdevice_attribute
    try:
        check(driver.cuInit(0))
        count = check(driver.cuDeviceGetCount())
        version = check(driver.cuDriverGetVersion())
    except RuntimeError:  # (the driver library is absent, or no GPU answers)
        return ()
    found = []
    for ordinal in range(count):
        handle = check(driver.cuDeviceGet(ordinal))

        def value(name: str, handle: Any = handle) -> int:
            return int(check(driver.cuDeviceGetAttribute(getattr(attribute, f"CU_DEVICE_"
                                                                            f"ATTRIBUTE_{name}"),
                                                         handle)))

        memory = int(check(driver.cuDeviceTotalMem(handle)))
        address = (f"{value('PCI_DOMAIN_ID'):04x}:{value('PCI_BUS_ID'):02x}:"
                   f"{value('PCI_DEVICE_ID'):02x}")
        found.append(Device(
            id=f"cuda:{ordinal}",
            name=check(driver.cuDeviceGetName(256, handle)).split(b"\0")[0].decode().strip(),
            vendor="nvidia", type="gpu", platform_name="CUDA",
            platform_version=f"sm_{value('COMPUTE_CAPABILITY_MAJOR')}"
                             f"{value('COMPUTE_CAPABILITY_MINOR')}",
            compute_units=value("MULTIPROCESSOR_COUNT"),
            clock_mhz=value("CLOCK_RATE") // 1000,
            global_mem_bytes=memory,
            local_mem_bytes=value("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            max_alloc_bytes=memory,
            max_work_group_size=value("MAX_THREADS_PER_BLOCK"),
            opencl_c_version="",
            driver_version=f"CUDA {version // 1000}.{version % 1000 // 10}",
            engine="cuda",
            pci_address=address,
            pcie_gb_s=pcie_link_gb_s(address),
        ))
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
        driver_version=f"cryptography {version}", engine="host",
    )


# Where Linux lists PCI devices by address (domain:bus:device.function).
PCI_DEVICES = Path("/sys/bus/pci/devices")


def pcie_link_gb_s(address: str) -> float | None:
    """GB/s each way over the PCIe link between the device at ``address``
    (domain:bus:device, as :attr:`Device.pci_address`) and the host, as Linux's sysfs
    describes the link: the least of the top speeds and widths of the device and of
    every bridge port above it, and the width it trained at. Not its current speed: an
    idle GPU may drop its link to a lower one until work comes, to save power. None
    where nothing says: no address, no sysfs, or a link it calls unknown."""
    return _link_gb_s(address, str(PCI_DEVICES)) if address else None


@functools.lru_cache(maxsize=16)
def _link_gb_s(address: str, listing: str) -> float | None:
    functions = sorted(Path(listing).glob(f"{address}.*"))
    if not functions:
        return None
    with contextlib.suppress(OSError):
        node = functions[0].resolve()
        trained = node / "current_link_width"
        widths = [_lanes(trained.read_text()) if trained.is_file() else 0]
        widths = [lanes for lanes in widths if lanes]  # (unknown: the top widths say)
        lane_rates: list[float] = []
        while (node / "max_link_speed").is_file():  # (the device, then each port above)
            lane_rates.append(_lane_gb_s((node / "max_link_speed").read_text()))
            widths.append(_lanes((node / "max_link_width").read_text()))
            if not lane_rates[-1] or not widths[-1]:
                return None
            node = node.parent
        return min(lane_rates) * min(widths) if lane_rates else None
    return None


def _lane_gb_s(speed: str) -> float:
    """GB/s one lane carries at a sysfs link speed ("32.0 GT/s PCIe"; 0 where unknown):
    8b/10b coding up to 5 GT/s (PCIe 1 and 2), 128b/130b from 8 (PCIe 3 to 5), and
    PCIe 6's FLITs, 242 bytes of data in 256, from 64."""
    found = re.match(r"\s*([0-9.]+)\s*GT/s", speed)
    if found is None:
        return 0.0
    transfers = float(found.group(1))
    coding = 8 / 10 if transfers <= 5 else 128 / 130 if transfers < 64 else 242 / 256
    return transfers * coding / 8


def _lanes(width: str) -> int:
    """The lanes of a sysfs link width ("16"; 0 where unknown: some read 255)."""
    with contextlib.suppress(ValueError):
        lanes = int(width.strip())
        return lanes if 0 < lanes <= 32 else 0
    return 0


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


def cuda_started() -> bool:
    """Whether this process has looked for CUDA GPUs yet (the CUDA engine's start-up, but
    for its context and kernels, which follow on the first job)."""
    return cuda_devices.cache_info().currsize > 0


def host_devices() -> list[Device]:
    """The host engine's one device, as a list (its line in aescl.engines.registry)."""
    return [host_device()]


def host_started() -> bool:
    """The host engine needs no start-up: always started."""
    return True


def _rank(device: Device) -> tuple[int, int, int, int]:
    # Without a measured rate, the host engine comes after GPUs and before CPU OpenCL
    # devices: on the same cores OpenSSL ran 10x PoCL's rate (docs/benchmarks).
    type_order = {"gpu": 0, "accelerator": 1, "host": 2, "cpu": 3, "other": 4, "simulator": 5}
    # A vendor's own driver before PoCL driving the same kind of hardware.
    portable = 1 if device.vendor == "pocl" else 0
    # The same GPU's OpenCL device before its CUDA one: only `cuda` asks for the CUDA
    # engine by name (teams.DefaultTeam goes by measured rates instead).
    return (type_order[device.type], portable, -device.compute_units * max(device.clock_mhz, 1),
            int(device.is_cuda))


def matches(device: Device, spec: str) -> bool:
    """Whether a device fits a spec (see the module docstring)."""
    spec = spec.strip().lower()
    if spec == HOST_ID:
        return device.type == "host"
    engine, colon, _ = spec.partition(":")
    if engine == device.engine != "opencl":  # an engine's own spec: cuda, cuda:N
        return not colon or device.id == spec
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
                f"no device matches {spec!r}; available: {_describe(available)}"
            )
    return min(candidates, key=_rank)


CUDA_HINT = ("the CUDA engine needs `pip install 'aescl[cuda]'` and NVIDIA's driver with a "
             "GPU")
