"""aescl/devices.py: enumeration, vendor classes and device specs."""

from __future__ import annotations

import dataclasses

import pytest

import aescl
from aescl.devices import VENDOR_CLASSES, Device, host_device, matches, select, vendor_class


def fake(id: str, name: str, vendor: str, type: str, units: int = 8, clock: int = 1000) -> Device:
    return Device(
        id=id, name=name, vendor=vendor, type=type, platform_name=vendor,
        platform_version="OpenCL 3.0", compute_units=units, clock_mhz=clock,
        global_mem_bytes=2**34, local_mem_bytes=65536, max_alloc_bytes=2**32,
        max_work_group_size=1024, opencl_c_version="OpenCL C 1.2", driver_version="1",
    )


MACHINE = [
    fake("0:0", "Oclgrind Simulator", "oclgrind", "simulator"),
    fake("1:0", "pthread-skylake-avx512", "pocl", "cpu", units=16, clock=3000),
    fake("2:0", "NVIDIA H200", "nvidia", "gpu", units=132, clock=1980),
    fake("2:1", "NVIDIA T4", "nvidia", "gpu", units=40, clock=1590),
    fake("3:0", "gfx90a", "amd", "gpu", units=104, clock=1700),
    fake("4:0", "Intel(R) Xeon", "intel", "cpu", units=32, clock=2000),
]


@pytest.mark.parametrize(
    "spec, expected",
    [
        (None, "2:0"),          # the best real device: the biggest GPU
        ("", "2:0"),
        ("gpu", "2:0"),
        ("GPU", "2:0"),
        ("cpu", "4:0"),         # a vendor's own CPU driver before PoCL
        ("nvidia", "2:0"),
        ("amd", "3:0"),
        ("intel", "4:0"),
        ("pocl", "1:0"),
        ("oclgrind", "0:0"),    # the simulator, but only when asked for
        ("2:1", "2:1"),
        ("t4", "2:1"),          # case-insensitive name substring
        ("skylake", "1:0"),
    ],
)
def test_specs_choose_the_expected_device(spec, expected):
    assert select(spec, MACHINE).id == expected


def test_a_simulator_is_never_chosen_implicitly():
    only_simulator = [MACHINE[0]]
    with pytest.raises(aescl.DeviceNotFound, match="oclgrind"):
        select(None, only_simulator)
    cpu_and_simulator = [MACHINE[0], MACHINE[1]]
    assert select(None, cpu_and_simulator).id == "1:0"


def test_an_unmatched_spec_lists_what_exists():
    with pytest.raises(aescl.DeviceNotFound) as caught:
        select("apple", MACHINE)
    message = str(caught.value)
    assert "'apple'" in message and "NVIDIA H200" in message and "2:1" in message


def test_no_platform_names_what_to_install():
    with pytest.raises(aescl.NoPlatformError) as caught:
        select(None, [])
    assert "aescl[pocl]" in str(caught.value) and "-1001" not in str(caught.value)


@pytest.mark.parametrize(
    "platform_vendor, platform_name, expected",
    [
        ("NVIDIA Corporation", "NVIDIA CUDA", "nvidia"),
        ("Advanced Micro Devices, Inc.", "AMD Accelerated Parallel Processing", "amd"),
        ("Intel(R) Corporation", "Intel(R) OpenCL Graphics", "intel"),
        ("Apple", "Apple", "apple"),
        ("The pocl project", "Portable Computing Language", "pocl"),
        ("Oclgrind", "Oclgrind", "oclgrind"),
        ("Mesa", "rusticl", "other"),
    ],
)
def test_vendor_classes(platform_vendor, platform_name, expected):
    assert vendor_class(platform_vendor, platform_name) == expected


def test_aescl_device_environment_variable_is_the_default(monkeypatch):
    real = aescl.devices()
    target = real[-1]
    monkeypatch.setenv("AESCL_DEVICE", target.id)
    assert aescl.get_device() == target
    monkeypatch.setenv("AESCL_DEVICE", "no-such-device-anywhere")
    with pytest.raises(aescl.DeviceNotFound):
        aescl.get_device()


def test_enumeration_fills_every_field():
    found = aescl.devices()
    assert found, "the test machine has at least PoCL"
    ids = [d.id for d in found]
    assert len(ids) == len(set(ids))
    assert found[-1] == host_device() and found[-1].id == "host"
    for device in found:
        assert device.vendor in VENDOR_CLASSES
        assert device.type in ("gpu", "cpu", "accelerator", "simulator", "host", "other")
        assert device.compute_units > 0 and device.max_work_group_size > 0
        assert device.global_mem_bytes >= device.max_alloc_bytes > 0
        if device.is_opencl:
            assert device.local_mem_bytes > 0
            assert device.opencl_c_version.startswith("OpenCL C")
        record = device.to_dict()
        assert "cl_device" not in record
        assert set(record) == {f.name for f in dataclasses.fields(Device)} - {"cl_device"}
        assert matches(device, device.id) and matches(device, device.vendor)


def test_aescl_devices_is_the_module_and_still_lists_when_called():
    """The function that shadowed the module is list_devices; calling the module lists."""
    import types

    import aescl.devices as module

    assert isinstance(module, types.ModuleType) and module is aescl.devices
    assert not hasattr(module, "get_device")  # (the registry's: every engine's devices)
    assert [d.id for d in aescl.devices()] == [d.id for d in aescl.list_devices()]


def pci_listing(root, ports: list[tuple[str, str, str]], trained_width: str = "16"):
    """A sysfs PCI listing laid out as Linux's: each device in the folder of the port
    above it under ``devices/``, and ``bus/`` naming each by address (a link to it).
    ``ports``: (address, max_link_speed, max_link_width), the root port first and the
    GPU last, which trained at ``trained_width`` lanes."""
    node = root / "devices" / "pci0000:00"
    (root / "bus").mkdir(parents=True)
    for address, speed, width in ports:
        node = node / address
        node.mkdir(parents=True)
        (node / "max_link_speed").write_text(f"{speed}\n")
        (node / "max_link_width").write_text(f"{width}\n")
        (node / "current_link_speed").write_text("2.5 GT/s PCIe\n")  # (idle: not read)
        (node / "current_link_width").write_text(f"{width}\n")
        (root / "bus" / address).symlink_to(node)
    (node / "current_link_width").write_text(f"{trained_width}\n")
    return root / "bus"


GEN5, GEN4, GEN3 = "32.0 GT/s PCIe", "16.0 GT/s PCIe", "8.0 GT/s PCIe"


@pytest.mark.parametrize("ports, trained, expected", [
    ([("0000:00:06.0", GEN5, "16")], "16", 32 * 16 * 128 / 130 / 8),  # the H200 VM's
    ([("0000:00:01.0", GEN4, "16"), ("0000:01:00.0", GEN5, "16")], "16", 16 * 16 * 128 / 130 / 8),
    ([("0000:00:01.0", GEN5, "16"), ("0000:01:00.0", GEN5, "16")], "8", 32 * 8 * 128 / 130 / 8),
    ([("0000:00:01.0", GEN3, "8"), ("0000:01:00.0", GEN4, "16")], "16", 8 * 8 * 128 / 130 / 8),
    ([("0000:00:01.0", "5.0 GT/s PCIe", "16"), ("0000:01:00.0", GEN4, "16")], "16",
     5 * 16 * 0.8 / 8),
    ([("0000:00:01.0", "Unknown", "16"), ("0000:01:00.0", GEN5, "16")], "16", None),
    ([("0000:00:01.0", GEN5, "255"), ("0000:01:00.0", GEN5, "16")], "16", None),
])
def test_a_gpus_pcie_link_is_its_slowest_part_at_its_top_speed(
        tmp_path, monkeypatch, ports, trained, expected):
    """The link is what its slowest part allows (the GPU, or a port above it, or the
    lanes it trained at), at the top speed rather than the current one, which an idle
    GPU may lower; a part that does not know its speed or width leaves it unknown."""
    monkeypatch.setattr(aescl.devices, "PCI_DEVICES", pci_listing(tmp_path, ports, trained))
    address = ports[-1][0].rpartition(".")[0]  # (as Device.pci_address: no function)
    found = aescl.devices.pcie_link_gb_s(address)
    assert found == (None if expected is None else pytest.approx(expected))


def test_no_pcie_link_is_known_without_an_address_or_a_listing(tmp_path, monkeypatch):
    monkeypatch.setattr(aescl.devices, "PCI_DEVICES",
                        pci_listing(tmp_path, [("0000:00:06.0", GEN5, "16")]))
    assert aescl.devices.pcie_link_gb_s("") is None  # (no address: not NVIDIA's driver)
    assert aescl.devices.pcie_link_gb_s("0000:00:07") is None
    monkeypatch.setattr(aescl.devices, "PCI_DEVICES", tmp_path / "no such folder")
    assert aescl.devices.pcie_link_gb_s("0000:00:06") is None


def test_every_gpu_of_a_known_address_has_its_link_read_at_enumeration():
    """Where Linux describes a GPU's link (the H200 machine: PCIe 5 x16), both engines'
    records of it carry the same figure."""
    gpus = [d for d in aescl.devices() if d.pci_address]
    if not gpus:
        pytest.skip("no device here whose driver tells its PCI address")
    for gpu in gpus:
        assert gpu.pcie_gb_s == aescl.devices.pcie_link_gb_s(gpu.pci_address)
    if not any(gpu.pcie_gb_s for gpu in gpus):
        pytest.skip("no GPU here whose PCIe link Linux describes")
    assert all(gpu.pcie_gb_s and gpu.pcie_gb_s >= 0.25 for gpu in gpus)  # (PCIe 1 x1 at least)
