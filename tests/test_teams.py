"""aescl/teams.py and the CUDA engine's devices in aescl/devices.py: the specs ``cuda`` and
``cuda:N``, ``all`` taking a GPU that two engines see once, and the refusal where no
CUDA GPU exists. No GPU is needed here; host data and arrays on a CUDA GPU:
tests/test_engine_cuda_*.py; pyopencl arrays: tests/test_engine_opencl_arrays.py."""

from __future__ import annotations

import dataclasses

import pytest

import aescl
from aescl import devices, rates, teams

NO_CUDA_GPU = not devices.cuda_devices()


@pytest.mark.parametrize(("spec", "ordinal"), [("cuda", None), ("CUDA", None), ("cuda:0", 0),
                                               (" cuda:3 ", 3)])
def test_a_cuda_spec_names_the_cuda_engine_and_its_gpu(spec, ordinal):
    assert teams.cuda_spec(spec) == (True, ordinal)


@pytest.mark.parametrize("spec", ["cudax", "cuda:", "cuda:a", "host", None, ["cuda"]])
def test_other_specs_are_not_cuda_specs(spec):
    assert teams.cuda_spec(spec) == (False, None)


def _host_calls(device: str) -> dict[str, object]:
    key, data = bytes(16), bytes(100)
    return {
        "ecb": lambda: aescl.new(key, aescl.MODE_ECB, device=device).encrypt(bytes(32)),
        "ctr": lambda: aescl.new(key, aescl.MODE_CTR, nonce=bytes(8),
                                 device=device).encrypt(data),
        "gcm": lambda: aescl.new(key, aescl.MODE_GCM, nonce=bytes(12),
                                 device=device).encrypt_and_digest(data),
        "chunked": lambda: aescl.chunked.encrypt(bytes(32), data, device=device),
        "list": lambda: aescl.new(key, aescl.MODE_CTR, nonce=bytes(8),
                                  device=["host", device]).encrypt(data),
    }


@pytest.mark.skipif(not NO_CUDA_GPU, reason="a CUDA GPU is here: the calls run on it "
                                            "(tests/test_engine_cuda_engine.py)")
@pytest.mark.parametrize("call", list(_host_calls("cuda")))
def test_without_a_cuda_gpu_a_cuda_spec_is_refused_in_one_clear_line(call):
    for spec in ("cuda", "cuda:1"):
        with pytest.raises(aescl.DeviceNotFound, match=f"no CUDA GPU for '{spec}'") as caught:
            _host_calls(spec)[call]()
        assert "aescl[cuda]" in str(caught.value) and "\n" not in str(caught.value)


def _gpu(device_id: str, engine: str, pci: str, name: str = "NVIDIA H100 80GB HBM3"
         ) -> aescl.Device:
    return aescl.Device(id=device_id, name=name, vendor="nvidia",
                        type="gpu", platform_name="CUDA" if engine == "cuda" else "NVIDIA CUDA",
                        platform_version="", compute_units=132, clock_mhz=1980,
                        global_mem_bytes=80 << 30, local_mem_bytes=48 << 10,
                        max_alloc_bytes=20 << 30, max_work_group_size=1024,
                        opencl_c_version="", driver_version="", engine=engine,
                        pci_address=pci)


def test_a_type_or_vendor_spec_takes_a_gpus_opencl_device_before_its_cuda_one():
    opencl, cuda = _gpu("0:0", "opencl", "0000:19:00"), _gpu("cuda:0", "cuda", "0000:19:00")
    for spec in ("gpu", "nvidia", "h100", None):
        assert devices.select(spec, [cuda, opencl]) == opencl
    assert devices.select("cuda", [cuda, opencl]) == cuda
    assert devices.select("cuda:0", [opencl, cuda]) == cuda
    with pytest.raises(aescl.DeviceNotFound, match="no device matches 'cuda:1'"):
        devices.select("cuda:1", [opencl, cuda])


def test_all_takes_a_gpu_that_two_engines_see_once_by_the_faster_stored_rate(
        tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    first = (_gpu("0:0", "opencl", "0000:19:00"), _gpu("cuda:0", "cuda", "0000:19:00"))
    second = (_gpu("0:1", "opencl", "0000:3b:00", "NVIDIA H200"),
              _gpu("cuda:1", "cuda", "0000:3b:00", "NVIDIA H200"))  # (its own rates)
    unknown = dataclasses.replace(first[0], id="0:2", pci_address="")  # (no address)
    gpus = [first[0], second[0], unknown, first[1], second[1]]
    # Nothing measured: the CUDA devices, which the figures say are faster.
    assert teams.one_engine_per_gpu(gpus) == [unknown, first[1], second[1]]
    rates.store_rates(first[1], {"blocks": 9.0}, 1 << 28)  # CUDA measured faster on one
    rates.store_rates(first[0], {"blocks": 7.0}, 1 << 28)
    rates.store_rates(second[0], {"blocks": 7.0}, 1 << 28)  # and slower on the other
    rates.store_rates(second[1], {"blocks": 6.0}, 1 << 28)
    assert teams.one_engine_per_gpu(gpus) == [second[0], unknown, first[1]]
