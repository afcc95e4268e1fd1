"""aescl/bench.py: every figure is measured and every device output checked against the host."""

from __future__ import annotations

import numpy as np
import pytest

import aescl
from aescl import bench, benchreport, chunked, teams
from aescl.engines.opencl.kernels import aes_options, time_builds
from aescl.engines.opencl.tuning import launch_config

# One full chunk plus a short final one, so that gcm-chunked covers both kinds.
SIZES = (16 << 10, (16 << 10) + 48)


@pytest.fixture(scope="module")
def reports() -> dict[str, bench.Report]:
    return {}


def _report(device, reports) -> bench.Report:
    if device.id not in reports:
        settings = bench.Settings(key_bits=(128, 256), sizes=SIZES, min_seconds=0)
        reports[device.id] = bench.run([device], settings)
    return reports[device.id]


def test_every_configuration_has_three_figures_and_matches_the_host(device, reports):
    report = _report(device, reports)
    target = report.targets[0]
    assert (target.id, target.backend, target.name) == (device.id, "opencl", device.name)
    wanted = {(m, b, s) for m, b in bench.Settings(key_bits=(128, 256)).configurations()
              for s in SIZES}
    assert {(r.mode, r.key_bits, r.bytes) for r in target.results} == wanted
    for result in target.results:
        assert result.verified is True, result
        for measure in bench.DEVICE_MEASURES:
            assert 0 < result.figure(measure) < float("inf"), (result, measure)
    assert report.mismatches == []


def test_the_host_baseline_runs_the_same_work(device, reports):
    report = _report(device, reports)
    baseline = next(t for t in report.targets if t.backend == "pycryptodome")
    assert baseline.type == "host"
    assert len(baseline.results) == len(report.targets[0].results)
    for result in baseline.results:
        assert result.kernel_gb_s is None and result.resident_gb_s is None
        assert result.host_gb_s > 0


def test_build_times_and_transfers_are_reported(device, reports):
    target = _report(device, reports).targets[0]
    assert target.build["cold_s"] > 0
    assert target.build["warm_s"] is None or target.build["warm_s"] > 0
    assert target.transfer["bytes"] == max(SIZES)
    assert target.transfer["pinned_h2d_gb_s"] > 0 and target.transfer["pinned_d2h_gb_s"] > 0


def test_the_table_labels_every_measure_and_size(device, reports):
    report = _report(device, reports)
    text = bench.table(report)
    assert device.name in text and "pycryptodome" in text
    for label in ("kernel", "resident", "host->host", "16 KiB", "16432 B", "gcm-chunked"):
        assert label in text
    assert "MISMATCH" not in text


def test_a_wrong_device_output_is_reported_as_a_mismatch(device):
    data = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)
    job = bench._Job("ctr", bytes(16), bytes(16))
    right = np.empty_like(data)
    bench._pycryptodome_run(job)(data, right)
    pinned = (aescl.pinned_empty(4096, device), aescl.pinned_empty(4096, device))
    assert bench._measure_device(device, job, data, right, 0, pinned).verified is True
    wrong = right.copy()
    wrong[1234] ^= 1
    result = bench._measure_device(device, job, data, wrong, 0, pinned)
    assert result.verified is False
    report = bench.Report("0", "now", {}, {"sizes": [4096]},
                          [bench.Target(device.id, device.name, "opencl", device.type,
                                        results=[result])])
    assert report.mismatches == [f"{device.name}: ctr AES-128 4 KiB"]
    assert "OUTPUT MISMATCH" in bench.table(report) and "!" in bench.table(report)


def test_the_host_chunked_baseline_is_the_format(device):
    data = np.random.default_rng(2).integers(0, 256, 40000, dtype=np.uint8)
    job = bench._Job("gcm-chunked", bytes(range(32)), bytes(range(12)))
    out = np.empty(job.output_bytes(data.nbytes), np.uint8)
    bench._pycryptodome_run(job)(data, out)
    expected = chunked.encrypt_raw(job.key, job.iv, data, device=device)
    assert out.tobytes() == expected


def test_cold_and_warm_builds_both_reach_a_result(device):
    options = aes_options(10, "host", launch_config(device))
    launched = []
    cold, warm = time_builds(device, "aes_ctr.cl", options, launched.append)
    assert cold > 0 and (warm is None or warm > 0)
    assert len(launched) == (1 if warm is None else 2)


@pytest.mark.parametrize("text,expected", [
    ("16K", 16 << 10), ("4m", 4 << 20), ("1G", 1 << 30), ("1GiB", 1 << 30), ("4096", 4096),
])
def test_sizes_parse_with_binary_units(text, expected):
    assert bench.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "K", "1.5M", "-4K", "12X"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError):
        bench.parse_size(text)


def test_settings_refuse_what_cannot_be_benched():
    with pytest.raises(ValueError, match="multiples of 16"):
        bench.Settings(sizes=(100,))
    with pytest.raises(ValueError, match="unknown mode"):
        bench.Settings(modes=("cbc",))
    with pytest.raises(ValueError, match="128, 192 or 256"):
        bench.Settings(key_bits=(512,))
    assert bench.Settings(modes=("gcm-chunked",), key_bits=(128,)).configurations() == []
    assert bench.Settings(modes=("gcm-chunked",)).configurations() == [("gcm-chunked", 256)]


def test_sizes_are_named_readably():
    assert [bench.format_size(n) for n in (16 << 10, 1 << 30, 16432)] == [
        "16 KiB", "1 GiB", "16432 B"]


def test_a_team_row_has_its_n_process_yardstick():
    """``all`` of the host engine and an OpenCL CPU: host->host, pinned and plain
    figures, and with ``processes`` each member's pinned job in a process of its own, at
    once (real processes), checked against the host like every figure."""
    members = [d for d in aescl.devices() if d.type in ("host", "cpu")]
    if len(members) < 2:
        pytest.skip("needs the host engine and an OpenCL CPU device (PoCL)")
    settings = bench.Settings(modes=("ctr",), key_bits=(128,), sizes=(64 << 10,),
                              min_seconds=0, processes=True)
    report = bench.run(members, settings)
    team = next(t for t in report.targets if t.id == "all")
    (result,) = team.results
    assert result.verified is True and result.processes_gb_s > 0 and result.pinned_gb_s > 0
    assert result.kernel_gb_s is None  # (one member with kernels: no team kernel figure)
    assert "N processes" in bench.table(report)


def test_a_team_of_gpus_is_benched_beside_its_members(tmp_path):
    """On a host of two GPUs or more: a "gpus" row (one engine a GPU) with the kernel
    figure of the GPUs at once, host->host, pinned and the N-process yardstick, drawn
    in the plot beside each GPU."""
    gpus = teams.one_engine_per_gpu([d for d in aescl.devices() if d.type == "gpu"])
    if len(gpus) < 2:
        pytest.skip("needs two GPUs or more")
    pytest.importorskip("matplotlib")
    host = [d for d in aescl.devices() if d.type == "host"]
    settings = bench.Settings(modes=("ctr", "gcm-chunked"), key_bits=(256,),
                              sizes=(4 << 20,), min_seconds=0, processes=True)
    report = bench.run(gpus + host, settings)
    team = next(t for t in report.targets if t.id == "gpus")
    assert team.name == " + ".join(d.id for d in gpus)
    for result in team.results:
        assert result.verified is True
        for measure in ("kernel", "host", "pinned", "bytes", "processes"):
            assert result.figure(measure) > 0, (result, measure)
        assert set(result.shares) == {d.id for d in gpus}
    bench.save_plot(report, str(tmp_path / "team.png"))
    assert (tmp_path / "team.png").stat().st_size > 0


def test_a_teams_kernel_figure_never_wins_in_device_memory():
    """A team's kernel figure is its devices' at once on data in each one's memory: the
    summary's "in device memory" column names a device, not the team."""
    one = bench.Result("ctr", 128, 4096, 10.0, 9.0, 1.0, True)
    team = bench.Result("ctr", 128, 4096, 20.0, None, 1.5, True)
    report = bench.Report("0", "now", {}, {"sizes": [4096]}, [
        bench.Target("cuda:0", "GPU", "cuda", "gpu", results=[one]),
        bench.Target("gpus", "cuda:0 + cuda:1", "scheduler", "gpus", results=[team])])
    summary = "\n".join(benchreport.fastest(report))
    assert "cuda:0 10.0" in summary and "gpus 20" not in summary
    assert "gpus 1.50" in summary  # (from host memory the team may win)
