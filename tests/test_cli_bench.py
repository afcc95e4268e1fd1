"""``aescl bench``, run as a user runs it: a real subprocess on the PoCL device (or any)."""

from __future__ import annotations

import json

import pytest

from aescl import bench
from aescl.engines.opencl import kernels, tuning
from conftest import selected_devices
from test_cli import run

pytestmark = pytest.mark.skipif(not selected_devices(), reason="no OpenCL device here")
DEVICE = next(iter(selected_devices()), None)


def test_bench_json_reports_each_figure_and_writes_a_plot(tmp_path):
    plot = tmp_path / "bench.png"
    result = run("bench", "--device", DEVICE.id, "--quick", "--sizes", "16K,32K",
                 "--mode", "ctr", "--mode", "gcm-chunked", "--key-bits", "256",
                 "--json", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # stdout is the JSON alone: progress goes to stderr
    assert "bench: " in result.stderr
    device, *baselines = report["targets"]
    assert device["id"] == DEVICE.id and device["backend"] == "opencl"
    assert {b["backend"] for b in baselines} >= {"pycryptodome"}
    assert device["build"]["cold_s"] > 0 and device["start_s"] > 0
    rows = {(r["mode"], r["key_bits"], r["bytes"]) for r in device["results"]}
    assert rows == {(m, 256, s) for m in ("ctr", "gcm-chunked") for s in (16384, 32768)}
    for row in device["results"]:
        assert row["verified"] is True
        assert min(row["kernel_gb_s"], row["resident_gb_s"], row["host_gb_s"],
                   row["bytes_gb_s"]) > 0  # (bytes->bytes: the plain call, checked too)
    assert report["settings"]["measures"] == bench.MEASURE_LABELS
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A saved report prints and plots again without measuring.
    saved = tmp_path / "bench.json"
    saved.write_text(result.stdout)
    again = run("bench", "--load", str(saved), "--json", "--plot", str(tmp_path / "again.png"))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == report and again.stderr == ""
    assert (tmp_path / "again.png").read_bytes()[:4] == b"\x89PNG"
    table = run("bench", "--load", str(saved))
    assert table.returncode == 0 and "host->host" in table.stdout and DEVICE.name in table.stdout


def test_bench_processes_adds_a_teams_yardstick_row():
    """``--processes`` on a team (the host engine and a device: ``all``'s block) measures
    its N-process yardstick, in processes of their own, and the table shows the row;
    without it there is none."""
    common = ("bench", "--device", "host", "--device", DEVICE.id, "--mode", "ctr",
              "--key-bits", "128", "--sizes", "64K", "--min-time", "0", "--no-host", "-q")
    result = run(*common, "--processes", "--json")
    assert result.returncode == 0, result.stderr
    team = next(t for t in json.loads(result.stdout)["targets"] if t["id"] == "all")
    (row,) = team["results"]
    assert row["processes_gb_s"] > 0 and row["pinned_gb_s"] > 0
    table = run(*common, "--processes")
    assert table.returncode == 0 and "N processes" in table.stdout
    plain = run(*common, "--json")
    team = next(t for t in json.loads(plain.stdout)["targets"] if t["id"] == "all")
    assert team["results"][0]["processes_gb_s"] is None


def test_a_file_that_is_not_a_report_is_refused(tmp_path):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"targets": 3}')
    result = run("bench", "--load", str(bogus))
    assert result.returncode == 2 and "is not an aescl bench --json report" in result.stderr


def test_bench_prints_a_table_and_quiet_silences_progress():
    result = run("bench", "--device", DEVICE.id, "--quick", "--sizes", "16K",
                 "--mode", "ecb-decrypt", "--key-bits", "192", "--no-host", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{DEVICE.id} {DEVICE.name}")
    assert any("cold" in line and "warm" in line for line in lines)
    first = next(i for i, line in enumerate(lines) if "ecb-decrypt" in line)
    rows = [line.split() for line in lines[first : first + 3]]
    assert [row[:-1] for row in rows] == [["ecb-decrypt", "AES-192", "kernel"], ["resident"],
                                          ["host->host"]]
    assert all(float(row[-1]) > 0 for row in rows)  # one 16 KiB column of GB/s
    assert "pycryptodome" not in result.stdout


@pytest.mark.parametrize("args,message", [
    (("--sizes", "100"), "multiples of 16"),
    (("--sizes", "12X"), "not a size"),
    (("--device", "no-such-device"), "no device matches"),
    (("--mode", "gcm-chunked", "--key-bits", "128"), "nothing to bench"),
])
def test_bench_refuses_bad_requests_in_one_line(args, message):
    result = run("bench", "--quick", "-q", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_bench_tune_stores_the_settings_that_later_runs_report(tmp_path, monkeypatch):
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "cache"))
    args = ("bench", "--device", DEVICE.id, "--quick", "--sizes", "16K", "--mode", "ctr",
            "--key-bits", "128", "--no-host")
    result = run(*args, "--tune", "--json")
    assert result.returncode == 0, result.stderr
    assert "tuning, setting 1 of" in result.stderr
    launch = json.loads(result.stdout)["targets"][0]["launch"]
    assert launch["tuned"]["trials"] == len(tuning.candidates(DEVICE))
    assert launch["tuned"]["gb_s"] >= launch["tuned"]["default_gb_s"] > 0
    assert tuning.stored(DEVICE).chosen.work_group_size == launch["work_group_size"]

    again = run(*args)  # no --tune: the stored settings, reported in the table
    assert again.returncode == 0, again.stderr
    assert "tuning" not in again.stderr
    assert f"launch: work-groups of {launch['work_group_size']}" in again.stdout
    # Which AES rounds the kernels compiled to there (the tables where a CPU's AES
    # instructions did not run: tuning.hardware_rounds_work).
    config = tuning.launch_config(DEVICE)
    assert launch["rounds"] == kernels.core_variant(DEVICE, kernels.aes_options(10, "host", config))
    assert f"table cop{'y' if launch['table_lanes'] == 1 else 'ies'}, {launch['rounds']} rounds" \
        in again.stdout
    assert f"over {launch['tuned']['trials']} settings" in again.stdout

    monkeypatch.setenv("AESCL_TUNE", "0")
    refused = run(*args, "--tune")
    assert refused.returncode == 2 and "AESCL_TUNE=0" in refused.stderr
    defaults = run(*args)
    assert "(defaults)" in defaults.stdout


def test_a_plot_into_a_missing_directory_is_refused_before_measuring(tmp_path):
    """It was a traceback, after the whole benchmark had run."""
    pytest.importorskip("matplotlib")
    result = run("bench", "--device", "host", "--quick", "--sizes", "16K", "--mode", "ctr",
                 "--plot", str(tmp_path / "missing" / "x.png"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"aescl: --plot {tmp_path / 'missing' / 'x.png'}: the directory "
                     f"{tmp_path / 'missing'} does not exist"]


def test_a_device_the_driver_will_not_start_is_one_line_and_exit_1(tmp_path):
    """The aescl command with the driver's context call refusing, as NVIDIA's OpenCL
    refused a full GPU (tests/test_engine_opencl.py: the stand-in, as PoCL gives no such
    refusal): one line naming the device, no traceback, exit status 1, no output left."""
    import os
    import subprocess
    import sys

    key, plain = tmp_path / "k.key", tmp_path / "plain"
    assert run("keygen", "-o", str(key)).returncode == 0
    plain.write_bytes(os.urandom(4 << 20))
    program = (
        "import sys, pyopencl as cl\n"
        "def refuse(*args, **kwargs):\n"
        "    raise cl.RuntimeError(cl._cl._ErrorRecord('clCreateContext', -6,"
        " 'OUT_OF_HOST_MEMORY'))\n"
        "cl.Context = refuse\n"
        "from aescl.cli.main import run\n"
        "sys.argv = ['aescl'] + sys.argv[1:]\n"
        "run()\n")
    for command in (["bench", "--device", DEVICE.id, "--quick", "--sizes", "16K",
                     "--mode", "ctr", "--key-bits", "128", "--no-host"],
                    ["encrypt", "--device", DEVICE.id, "--key-file", str(key), str(plain)]):
        result = subprocess.run([sys.executable, "-c", program, *command],
                                capture_output=True, timeout=120, cwd=tmp_path)
        stderr = result.stderr.decode()
        assert result.returncode == 1, (command, stderr)
        assert "Traceback" not in stderr, (command, stderr)
        assert f"aescl: cannot start {DEVICE.id} " in stderr, (command, stderr)
        assert "OUT_OF_HOST_MEMORY" in stderr.splitlines()[-1], (command, stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key", "plain"]
