"""aescl/rates.py: measured rates kept between runs, and ``aescl bench`` storing them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from aescl import rates
from aescl.devices import host_device
from test_cli import run


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "cache"))


def test_rates_are_kept_per_device_and_kind():
    host = host_device()
    assert rates.stored_rate(host, "blocks") is None
    assert rates.store_rates(host, {"blocks": 12.5}, 64 << 20)
    assert rates.store_rates(host, {"chunks": 2.5}, 64 << 20)
    assert (rates.stored_rate(host, "blocks"), rates.stored_rate(host, "chunks")) == (12.5, 2.5)
    record = json.loads(rates.rates_path().read_text())[rates.device_key(host)]
    assert record["bytes"] == 64 << 20 and record["date"]


def test_rates_another_process_stores_are_seen_by_a_process_that_read_them_before():
    """``aescl bench`` in a terminal beside a long-lived process (a notebook, a worker)
    that already chose devices: that process goes by the new figures from then on.
    (test_bench_stores_an_opencl_devices_start_up once read None where its bench had
    just stored a figure, with 8 test workers on an H200: as a read of the store made
    before would give.)"""
    host = host_device()
    assert rates.stored_rate(host, "blocks") is None  # (read before there is a store)
    for rate in (7.5, 9.25):  # (a store made, then replaced)
        subprocess.run([sys.executable, "-c",
                        "from aescl import rates; from aescl.devices import host_device; "
                        f"rates.store_rates(host_device(), {{'blocks': {rate}}}, 64 << 20)"],
                       check=True)
        assert rates.stored_rate(host, "blocks") == rate


def test_figures_from_small_inputs_or_without_a_cache_are_not_kept(monkeypatch):
    host = host_device()
    assert not rates.store_rates(host, {"blocks": 99.0}, rates.MIN_MEASURED_BYTES - 16)
    monkeypatch.setenv("AESCL_NO_CACHE", "1")
    assert not rates.store_rates(host, {"blocks": 99.0}, 64 << 20)
    monkeypatch.delenv("AESCL_NO_CACHE")
    assert rates.stored_rate(host, "blocks") is None


def test_a_damaged_store_reads_as_unmeasured():
    rates.rates_path().parent.mkdir(parents=True)
    rates.rates_path().write_text("{not json")
    assert rates.stored_rate(host_device(), "blocks") is None


def test_bench_stores_the_host_figures_at_its_largest_size():
    result = run("bench", "--device", "host", "--sizes", "1M,16M", "--mode", "ctr",
                 "--mode", "gcm-chunked", "--key-bits", "256", "--min-time", "0",
                 "--no-host", "--json")
    assert result.returncode == 0, result.stderr
    (target,) = [t for t in json.loads(result.stdout)["targets"] if t["id"] == "host"]
    figures = {(r["mode"], r["bytes"]): r["host_gb_s"] for r in target["results"]}
    assert rates.stored_rate(host_device(), "blocks") == figures["ctr", 16 << 20]
    assert rates.stored_rate(host_device(), "chunks") == figures["gcm-chunked", 16 << 20]


def test_start_up_counts_only_where_opencl_has_not_started():
    host = host_device()
    device = dataclasses.replace(host, id="9:9", name="a device", vendor="pocl", type="gpu",
                                 driver_version="1")
    assert rates.start_seconds(host, started=False) == 0.0
    assert rates.start_seconds(device, started=True) == 0.0
    assert rates.start_seconds(device, started=False) == rates.GUESSED_START_SECONDS
    assert rates.least_start_seconds() == rates.GUESSED_START_SECONDS
    assert rates.store_start(device, 0.25)
    assert rates.start_seconds(device, started=False) == 0.25
    assert rates.least_start_seconds() == 0.25
    assert not rates.store_start(device, 0.0)


def test_a_file_job_goes_no_faster_than_the_files():
    host = host_device()
    assert rates.store_rates(host, {"chunks": 100.0}, 64 << 20)
    nbytes = 1 << 30
    assert rates.expected_seconds(host, "chunks", nbytes, False) == pytest.approx(nbytes / 100e9)
    assert rates.expected_seconds(host, "chunks", nbytes, False, file_job=True) == \
        pytest.approx(nbytes / (rates.GUESSED_FILE_GB_S * 1e9))


def test_bench_stores_an_opencl_devices_start_up():
    from conftest import an_opencl_device

    device = an_opencl_device()
    result = run("bench", "--device", device.id, "--quick", "--sizes", "16K", "--mode", "ctr",
                 "--key-bits", "128", "--no-host", "--json")
    assert result.returncode == 0, result.stderr
    (target,) = [t for t in json.loads(result.stdout)["targets"] if t["id"] == device.id]
    assert target["start_s"] > 0
    stored = json.loads(rates.rates_path().read_text())
    assert rates.device_key(device) in stored, (stored, result.stderr)
    record = stored[rates.device_key(device)]
    assert record[rates.START] == round(target["start_s"], 3)  # (in the store)
    assert rates.stored_rate(device, rates.START) == record[rates.START]  # (as read here)
    assert rates.stored_rate(device, "blocks") is None  # 16 KiB shows no rate worth keeping


def test_unmeasured_rates_follow_the_plain_calls_measured_on_a_gpu_host():
    """The guesses where nothing was measured (docs/benchmarks, the plain calls on the
    16-core H200 host): a GCM stream goes to the host engine's threads on many cores and
    to a GPU on few; a GCM stream and the chunked format to the CUDA engine before
    NVIDIA's OpenCL on the same GPU; and no figure of ``aescl bench`` is taken for a GCM stream."""
    host = host_device()
    many_cores = dataclasses.replace(host, compute_units=16)
    two_cores = dataclasses.replace(host, compute_units=2)
    # (Ids no real device has: a GPU machine's own were measured by other tests' jobs.)
    opencl_gpu = dataclasses.replace(host, id="98:0", type="gpu", engine="opencl",
                                     name="GPU", vendor="NVIDIA")
    cuda_gpu = dataclasses.replace(opencl_gpu, id="cuda:98", engine="cuda")
    host16, host2, opencl, cuda = (rates.expected_rate(d, "gcm")
                                   for d in (many_cores, two_cores, opencl_gpu, cuda_gpu))
    assert host16 > cuda > opencl > host2
    assert rates.expected_rate(cuda_gpu, "chunks") > rates.expected_rate(opencl_gpu, "chunks")
    assert not rates.store_rates(many_cores, {"gcm": 99.0}, 64 << 20)


def test_a_gpu_never_measured_is_guessed_on_pinned_memory_from_its_pcie_link(monkeypatch):
    """Pinned memory bounds a GPU by its PCIe link (an H200's: 0.69-0.79 of it, sealing
    and CTR, docs/benchmarks), not by what it does behind pageable memory, which the
    guess fell back to: 10 GB/s for blocks, below the host engine's guess on 16 cores,
    so that with nothing benched the default left such memory to the host engine at
    25-41 GB/s where the GPU does 46-49 (2026-12-01). A figure stored or measured comes
    first; a device of no known link, or not a GPU, keeps the fallback."""
    link = 31.5e9  # (PCIe 4 x16)
    gpu = dataclasses.replace(host_device(), id="97:0", type="gpu", engine="opencl",
                              name="a GPU", vendor="NVIDIA", pci_address="0000:00:06",
                              pcie_gb_s=link / 1e9)
    for kind in ("blocks", "chunks"):
        pinned = kind + rates.PINNED
        assert rates.expected_rate(gpu, pinned) == pytest.approx(0.7 * link)
        assert rates.expected_rate(gpu, kind) < 0.7 * link  # (pageable: as guessed before)
        assert rates.only_guessed(gpu, pinned)
        for unlinked in (dataclasses.replace(gpu, pcie_gb_s=None),
                         dataclasses.replace(gpu, type="cpu")):
            assert rates.expected_rate(unlinked, pinned) == rates.expected_rate(unlinked, kind)
    assert rates.store_rates(gpu, {"blocks-pinned": 3.0}, 64 << 20)
    assert rates.expected_rate(gpu, "blocks-pinned") == 3.0e9
    monkeypatch.setitem(rates.measured, (gpu.id, "chunks-pinned"), 4.0e9)
    assert rates.expected_rate(gpu, "chunks-pinned") == 4.0e9
