"""aescl/scheduler.py: one job split over several engines, byte-identical to one engine.

The split runs on what every machine has: the host engine, the CPU's OpenCL
device, and several OpenCL devices made from that one CPU by device fission.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import chunked, rates, scheduler, teams
from aescl.devices import host_device, sub_devices
from aescl.engines import engine_for
from aescl.engines.host import shared
from conftest import selected_devices
from test_cli import AESCL


@pytest.fixture(scope="module")
def opencl_cpu() -> aescl.Device:
    cpus = [d for d in selected_devices() if d.type == "cpu"]
    if not cpus:
        pytest.skip("no OpenCL CPU device on this machine")
    return cpus[0]


@pytest.fixture(scope="module")
def fission(opencl_cpu) -> list[aescl.Device]:
    try:
        return sub_devices(opencl_cpu, 2)
    except aescl.DeviceNotFound as exc:
        pytest.skip(str(exc))


def _split_targets(opencl_cpu, fission):
    return {"host+cpu": [host_device(), opencl_cpu], "fission": fission,
            "host+fission": [host_device(), *fission]}


@pytest.mark.parametrize("layout", ["host+cpu", "fission", "host+fission"])
def test_every_engine_takes_part_and_the_bytes_match(opencl_cpu, fission, layout, monkeypatch):
    devices = _split_targets(opencl_cpu, fission)[layout]
    for device in devices:
        # An OpenCL pipeline takes ranges for the pieces it queues ahead, up to eight
        # pieces each: with 1 MiB pieces and its thread started first, it took all of
        # this small job before the host engine, on the caller's thread, asked.
        if device.is_opencl:
            monkeypatch.setattr(engine_for(device), "piece_bytes", 1 << 16)
    data = np.frombuffer(os.urandom((6 << 20) + 16 * 33 + 5), np.uint8)
    key, iv = os.urandom(32), os.urandom(16)
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data.tobytes())
    # Work stealing has no fixed split: an engine whose thread starts late on a busy
    # machine may find the job gone. Every run must be right; within a few runs each
    # engine must have taken part.
    took_part: set[str] = set()
    for _ in range(5):
        ours = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device=devices)
        assert ours.encrypt(data) == expected
        shares = teams.team(devices).shares
        assert [s.device.id for s in shares] == [d.id for d in devices]
        assert not any(s.failed for s in shares), shares
        assert sum(s.units for s in shares) == data.nbytes // 16
        took_part |= {s.device.id for s in shares if s.units > 0}
        if len(took_part) == len(devices):
            break
    assert took_part == {d.id for d in devices}

    whole = data[: data.nbytes // 16 * 16]
    ecb = aescl.new(key, aescl.MODE_ECB, device=devices)
    assert ecb.decrypt(whole) == AES.new(key, AES.MODE_ECB).decrypt(whole.tobytes())

    sealed = chunked.encrypt(key, data, b"ctx", device=devices)
    assert chunked.decrypt(key, sealed, b"ctx", device=host_device()) == data.tobytes()
    assert chunked.decrypt(key, sealed, b"ctx", device=devices) == data.tobytes()


def test_all_is_every_real_device_gpus_first():
    chosen = teams.resolve_devices("all")
    # (A GPU that OpenCL and CUDA both see, once: tests/test_teams.py.)
    gpus = teams.one_engine_per_gpu([d for d in aescl.devices()
                                     if d.type in ("gpu", "accelerator")])
    cpus = [d for d in aescl.devices() if d.type == "cpu"]
    assert chosen == [*gpus, host_device(), *cpus]
    assert not any(d.is_simulator for d in chosen)
    assert teams.resolve_devices(["host", "host"]) == [host_device()]
    with pytest.raises(aescl.DeviceNotFound):
        teams.resolve_devices(["host", "no-such-device"])
    with pytest.raises(aescl.DeviceNotFound):
        teams.resolve_devices([])


class _FailingEngine:
    """A real engine that breaks after its first range, as a lost device would. The
    engine beside it starts only once this one holds a range (``took``), so that
    there is always a range to redo."""

    def __init__(self, engine, device, took):
        self._engine, self.device, self.piece_bytes = engine, device, 64 << 10
        self.holds_gil_for = frozenset()  # takes part in a split of every kind of work
        self.on_host_cores, self.stages = engine.on_host_cores, engine.stages
        self.in_interpreter = engine.in_interpreter
        self._took = took

    def _failing(self, worker):
        engine = self

        class Worker:
            def run(self, source, target, ranges, first_block=0):
                first = next(iter(ranges))
                engine._took.set()
                worker.run(source, target, iter([first]), first_block)
                raise RuntimeError(f"{engine.device.id} lost")  # after writing a range

            def seal_ranges(self, plaintext, sealed, first, ranges):
                lo, hi = next(iter(ranges))  # garbage over the range it took, then it fails
                engine._took.set()
                sealed[lo * chunked.SEALED_CHUNK_SIZE : hi * chunked.SEALED_CHUNK_SIZE] = 0xEE
                raise RuntimeError(f"{engine.device.id} lost")

        return Worker()

    def blocks(self, transform):
        return self._failing(self._engine.blocks(transform))

    def chunks(self, key, base_nonce, batch_chunks):
        return self._failing(self._engine.chunks(key, base_nonce, batch_chunks))


class _LateEngine:
    """A real engine whose workers begin once ``start`` is set."""

    def __init__(self, engine, start):
        self._engine, self.device, self.piece_bytes = engine, engine.device, engine.piece_bytes
        self.holds_gil_for = engine.holds_gil_for
        self.on_host_cores, self.stages = engine.on_host_cores, engine.stages
        self.in_interpreter = engine.in_interpreter
        self._start = start

    def _late(self, worker):
        start = self._start

        class Worker:
            def __getattr__(self, name):
                attribute = getattr(worker, name)
                if callable(attribute):
                    def late(*args, **kwargs):
                        start.wait(10)
                        return attribute(*args, **kwargs)
                    return late
                return attribute

        return Worker()

    def blocks(self, transform):
        return self._late(self._engine.blocks(transform))

    def chunks(self, key, base_nonce, batch_chunks):
        return self._late(self._engine.chunks(key, base_nonce, batch_chunks))


def _team_with_a_failing_engine(opencl_cpu, fails_too: bool = False):
    broken = dataclasses.replace(host_device(), id="broken-host")
    took = threading.Event()
    team = scheduler.Team([host_device(), opencl_cpu])
    team.devices = [broken, opencl_cpu]
    other = (_FailingEngine(engine_for(opencl_cpu), opencl_cpu, threading.Event())
             if fails_too else engine_for(opencl_cpu))
    team.engines = [_FailingEngine(engine_for(host_device()), broken, took),
                    _LateEngine(other, took)]
    return team


def test_an_engine_that_fails_mid_job_is_dropped_and_the_others_finish(opencl_cpu, monkeypatch):
    monkeypatch.setattr(scheduler, "SPLIT_MIN_BYTES", 0)
    team = _team_with_a_failing_engine(opencl_cpu)
    key, iv = os.urandom(16), os.urandom(16)
    data = np.frombuffer(os.urandom(3 << 20), np.uint8)
    out = np.zeros_like(data)
    transform = aescl.engines.BlockTransform(key, counter=int.from_bytes(iv, "big"))
    team.blocks(transform).run(data, out)
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data.tobytes())
    assert out.tobytes() == expected
    broken, kept = team.shares
    assert broken.failed and "lost" in broken.error and not kept.failed

    # The chunked format too, with an engine that wrote garbage over the range it took:
    # that range is sealed again by the other.
    base_nonce, plaintext = os.urandom(12), os.urandom(40 * chunked.CHUNK_SIZE)
    sealed = np.zeros(40 * chunked.SEALED_CHUNK_SIZE, np.uint8)
    team = _team_with_a_failing_engine(opencl_cpu)
    team.chunks(key * 2, base_nonce, 8).seal_full(np.frombuffer(plaintext, np.uint8), sealed, 0)
    reference = chunked.encrypt_raw(key * 2, base_nonce, plaintext, device="host")
    assert sealed.tobytes() == reference[: sealed.nbytes]


def test_when_every_engine_fails_the_job_fails(opencl_cpu, monkeypatch):
    monkeypatch.setattr(scheduler, "SPLIT_MIN_BYTES", 0)
    team = _team_with_a_failing_engine(opencl_cpu, fails_too=True)
    data = np.zeros(1 << 20, np.uint8)
    with pytest.raises(RuntimeError, match="lost"):
        team.blocks(aescl.engines.BlockTransform(os.urandom(16), counter=0)).run(data, data)


def test_a_rejected_chunk_stops_the_split_job_and_releases_nothing(opencl_cpu, fission):
    key = os.urandom(32)
    sealed = bytearray(chunked.encrypt(key, os.urandom(3 << 20), device="host"))
    sealed[-100_000] ^= 1
    devices = [host_device(), *fission]
    with pytest.raises(aescl.AuthenticationError, match="failed authentication"):
        chunked.decrypt(key, bytes(sealed), device=devices)
    body = np.frombuffer(bytes(sealed), np.uint8)[chunked.HEADER_SIZE:]
    out = np.full(body.nbytes // chunked.SEALED_CHUNK_SIZE * chunked.CHUNK_SIZE + 1, 7, np.uint8)
    chunk_key, base_nonce = aescl.chunkformat.open_header(key, bytes(sealed[:56]), b"")
    with pytest.raises(aescl.AuthenticationError):
        chunked.decrypt_raw(chunk_key, base_nonce, body, device=devices,
                            output=out[: aescl.chunkformat.opened_size(body.nbytes)])
    assert not out[:-1].any()  # the output buffer is left zeroed


def test_a_runs_final_chunk_goes_to_the_host_engine_on_every_team(opencl_cpu):
    """The final chunk (under 16 KiB) is sealed and opened on the host engine, not on the
    team's lead: a GPU took about 1 ms for it, a fixed cost of every team call."""
    key, base_nonce = os.urandom(32), os.urandom(12)
    cipher = scheduler.Team([opencl_cpu]).chunks(key, base_nonce, 8)
    plaintext = os.urandom(2 * chunked.CHUNK_SIZE + 100)
    sealed = bytes(cipher.seal(plaintext, 0, final=True))
    assert sealed == chunked.encrypt_raw(key, base_nonce, plaintext, device="host")
    assert bytes(cipher.open(sealed, 0, final=True)) == plaintext
    made = {kind for _, kind in cipher.worker._made}
    assert made == {type(engine_for(opencl_cpu)).__name__, "HostEngine"}

    # A run of the final chunk alone starts no worker on the team's own engine.
    alone = scheduler.Team([opencl_cpu]).chunks(key, base_nonce, 8)
    assert bytes(alone.seal(plaintext[:100], 0, final=True)) == chunked.encrypt_raw(
        key, base_nonce, plaintext[:100], device="host")
    assert {kind for _, kind in alone.worker._made} == {"HostEngine"}


# ---- no device named: the default team -------------------------------------------------

@pytest.fixture
def no_device_named(monkeypatch, tmp_path):
    """A default team with nothing measured in this process and an empty rates store."""
    monkeypatch.delenv("AESCL_DEVICE", raising=False)
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rates, "measured", {})
    monkeypatch.setattr(teams, "_default_team", [])
    return teams.team(None)


@pytest.fixture
def without_a_gpu():
    """For tests of how the default team weighs the host engine against an OpenCL CPU
    alone: a GPU (OpenCL or CUDA) would be weighed too."""
    gpus = [d.id for d in aescl.list_devices() if d.type == "gpu"]
    if gpus:
        pytest.skip(f"this machine has GPUs ({', '.join(gpus)}), which the default team "
                    "weighs beside the host engine and the OpenCL CPU")


def test_no_device_named_gives_the_default_team(no_device_named, monkeypatch):
    assert isinstance(no_device_named, teams.DefaultTeam)
    monkeypatch.setenv("AESCL_DEVICE", "host")  # a device named in the environment
    assert not isinstance(teams.team(None), teams.DefaultTeam)


def test_aescl_device_may_name_every_spec_all_and_cuda_included(no_device_named, monkeypatch,
                                                                  tmp_path):
    """``AESCL_DEVICE=all`` was refused everywhere ("no device matches 'all'")."""
    monkeypatch.setenv("AESCL_DEVICE", "all")
    assert teams.team(None).devices == teams.resolve_devices("all")
    assert teams.resolve_devices(None) == teams.resolve_devices("all")
    key, data = os.urandom(32), os.urandom(3 << 20)
    assert chunked.decrypt(key, chunked.encrypt(key, data), device="host") == data
    plain, sealed = tmp_path / "plain", tmp_path / "plain.aescl"
    plain.write_bytes(data)
    (tmp_path / "k").write_text(key.hex())
    done = subprocess.run([AESCL, "encrypt", "--key-file",
                           str(tmp_path / "k"), str(plain)], capture_output=True, text=True,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert sealed.exists()


def test_a_small_job_runs_on_the_host_engine(no_device_named, opencl_cpu):
    small = scheduler.SPLIT_MIN_BYTES - 16
    for kind in ("blocks", "chunks"):
        assert no_device_named.for_job(small, kind).devices == [host_device()]


@pytest.mark.parametrize("kind", ["blocks", "chunks"])
def test_a_large_job_runs_on_the_device_measured_fastest(no_device_named, opencl_cpu, kind):
    large = 1 << 30
    for fast, slow in ((opencl_cpu, host_device()), (host_device(), opencl_cpu)):
        assert rates.store_rates(fast, {kind: 50.0}, 64 << 20)
        assert rates.store_rates(slow, {kind: 5.0}, 64 << 20)
        assert no_device_named.best_device(kind) == fast
        assert no_device_named.for_job(large, kind).devices == [fast]


@pytest.mark.skipif(not shared.AVAILABLE, reason="no memfd here: no shared memory")
@pytest.mark.parametrize("kind", ["blocks", "chunks"])
def test_a_large_job_runs_on_the_device_measured_fastest_on_its_arrays(
        no_device_named, opencl_cpu, kind):
    """The default team weighs each device at its rate on the job's arrays: from memory a
    device reads directly (``aescl bench``'s pinned figures; here the host engine's on
    its shared memory), that rate, not its rate on ordinary memory. On the H200 host the
    default ran CTR at the host engine's 33-41 GB/s on memory pinned for a GPU that does
    48-49 on it (docs/benchmarks, 2026-12-01)."""
    large = 1 << 30
    assert rates.store_rates(opencl_cpu, {kind: 50.0}, 64 << 20)
    assert rates.store_rates(host_device(), {kind: 5.0, kind + rates.PINNED: 500.0}, 64 << 20)
    direct = (aescl.pinned_empty(2 << 20, "host"), aescl.pinned_empty(2 << 20, "host"))
    assert rates.rate_kind(engine_for(host_device()), kind, direct) == kind + rates.PINNED
    ordinary = (np.zeros(2 << 20, np.uint8), np.zeros(2 << 20, np.uint8))
    assert no_device_named.for_job(large, kind, arrays=direct).devices == [host_device()]
    assert no_device_named.for_job(large, kind, arrays=ordinary).devices == [opencl_cpu]
    assert no_device_named.for_job(large, kind).devices == [opencl_cpu]
    if kind == "blocks":  # (and a call with no device named goes there)
        key, nonce = os.urandom(16), os.urandom(8)
        for (source, target), expected in ((direct, host_device()), (ordinary, opencl_cpu)):
            source[:] = 3
            aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(source, output=target)
            assert teams.team(expected).shares[0].units == source.nbytes // 16
            assert bytes(target) == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(
                bytes(source))


@pytest.mark.parametrize("kind", ["blocks", "chunks"])
def test_with_nothing_benched_memory_pinned_for_a_gpu_goes_to_that_gpu(no_device_named, kind):
    """A GPU never measured is weighed on memory pinned for it at a share of its PCIe
    link (aescl.rates.pinned_guess), not at its guess behind pageable memory, which
    lost to the host engine: on the H200 host the default then ran such memory at the
    host engine's 25-41 GB/s, where the GPU does 46-49 (docs/benchmarks, 2026-12-01).
    Here the host engine is measured between the two guesses, so either rule decides."""
    gpus = [d for d in aescl.list_devices() if d.type == "gpu" and d.pcie_gb_s]
    if not gpus:
        pytest.skip("no GPU whose PCIe link Linux describes here")
    link_guess = min(rates.pinned_guess(d) for d in gpus) / 1e9
    between = (link_guess + max(rates.expected_rate(d, kind) for d in gpus) / 1e9) / 2
    assert rates.store_rates(host_device(), {kind: between}, 64 << 20)
    for cpu in (d for d in aescl.list_devices() if d.type == "cpu"):  # (not tried first)
        assert rates.store_rates(cpu, {kind: 1.0}, 64 << 20)
    key, nonce = os.urandom(16), os.urandom(8)
    for gpu in gpus:
        pinned = (aescl.pinned_empty(2 << 20, gpu), aescl.pinned_empty(2 << 20, gpu))
        ordinary = (np.zeros(2 << 20, np.uint8), np.zeros(2 << 20, np.uint8))
        assert no_device_named.for_job(1 << 30, kind, arrays=pinned).devices == [gpu]
        assert no_device_named.for_job(1 << 30, kind, arrays=ordinary).devices == [host_device()]
        if kind == "blocks":  # (and a call with no device named runs there)
            source, target = pinned
            source[:] = 5
            aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(source, output=target)
            assert teams.team(gpu).shares[0].units == source.nbytes // 16
            assert bytes(target) == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(
                bytes(source))


def test_in_all_a_file_job_runs_alone_on_a_device_that_keeps_up_with_the_files(
        no_device_named):
    """No team is faster than the files: in ``all``, a job between files runs on the
    host engine where it is expected to keep up with them (nothing measured: its
    guessed rate), and on the team where no device is; a job in memory stays the
    team's."""
    everyone = teams.team("all")
    if len(everyone.devices) < 2:
        pytest.skip("all is one device on this machine")
    size = 1 << 30
    assert everyone.for_job(size, "chunks") is everyone
    assert everyone.for_job(size, "chunks", file_job=True).devices == [host_device()]
    for device in everyone.devices:  # (each measured slower than the files)
        assert rates.store_rates(device, {"chunks": rates.GUESSED_FILE_GB_S / 2}, 64 << 20)
    assert everyone.for_job(size, "chunks", file_job=True) is everyone


def test_all_lists_no_device_for_work_the_host_engine_takes_alone(no_device_named,
                                                                   monkeypatch):
    """``all`` lists (and starts) its devices only when a job needs more than the host
    engine: not for a job below SPLIT_MIN_BYTES or between files that the host engine
    keeps up with (guessed, nothing measured), which run there; a job in memory lists
    them."""
    monkeypatch.setattr(teams, "_teams", {})
    everyone = teams.team(["all"])  # (as the CLI passes --device all)
    assert everyone is teams.team("all")
    small = everyone.for_job(scheduler.SPLIT_MIN_BYTES - 16, "blocks")
    by_files = everyone.for_job(1 << 30, "chunks", file_job=True)
    assert small.devices == by_files.devices == [host_device()]
    assert everyone._listed is None
    assert everyone.for_job(1 << 30, "chunks") is everyone
    assert everyone.devices == teams.resolve_devices("all")


_COLD_CHOICES = """
import json, sys
from aescl import teams
from aescl.devices import opencl_started
default = teams.team(None)
choices = {"1G": default.for_job(1 << 30, "chunks").devices[0].id}
choices["8G file"] = default.for_job(8 << 30, "chunks", file_job=True).devices[0].id
choices["cold"] = opencl_started()
choices["8G"] = default.for_job(8 << 30, "chunks").devices[0].id
print(json.dumps(choices))
"""


def _choices_after_a_start_up_stored(opencl_cpu, program: str, tmp_path) -> object:
    """What ``program`` prints, run in a fresh process where the OpenCL device is stored
    at ten times the host engine's rate for chunks, after 0.5 s of start-up."""
    assert rates.store_rates(opencl_cpu, {"chunks": 50.0}, 64 << 20)
    assert rates.store_rates(host_device(), {"chunks": 5.0}, 64 << 20)
    assert rates.store_start(opencl_cpu, 0.5)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_fresh_process_weighs_a_devices_start_up_against_the_job(no_device_named,
                                                                    opencl_cpu, tmp_path):
    # Stored: the OpenCL device ten times the host engine's rate, after 0.5 s of
    # start-up. 1 GiB takes the host engine 0.21 s: less than any start-up, so OpenCL is
    # not even started. Between files both would go at the files' rate, which the host
    # engine beats: nor is it started for 8 GiB of files. 8 GiB in memory takes the
    # host engine 1.7 s, the device 0.67.
    choices = _choices_after_a_start_up_stored(opencl_cpu, _COLD_CHOICES, tmp_path)
    assert choices == {"1G": "host", "8G file": "host", "cold": False, "8G": opencl_cpu.id}


_RENTING = """
import json
from aescl import teams
from aescl.devices import opencl_started
default = teams.team(None)
choices = []
for _ in range(3):
    choices.append([default.for_job(1 << 30, "chunks").devices[0].id, opencl_started()])
print(json.dumps(choices))
"""


def test_a_process_of_many_jobs_starts_a_faster_device_once_renting_costs_its_start_up(
        no_device_named, opencl_cpu, tmp_path):
    # As above: 1 GiB takes the host engine 0.21 s, less than the 0.5 s start-up, so the
    # first two run there without starting OpenCL. The third would bring the host
    # engine's time to 0.64 s: it starts OpenCL and runs on the faster device.
    choices = _choices_after_a_start_up_stored(opencl_cpu, _RENTING, tmp_path)
    assert choices == [["host", False], ["host", False], [opencl_cpu.id, True]]


_STREAM_COLD = """
import json, os
import aescl
from aescl.devices import opencl_started
cipher = aescl.new(os.urandom(16), aescl.MODE_GCM, nonce=os.urandom(12))
sealed = cipher.encrypt(bytes(2 << 20))
print(json.dumps([cipher._message.__class__.__module__, opencl_started()]))
"""


def test_a_gcm_stream_in_a_fresh_process_runs_on_the_host_engine_starting_no_device(
        no_device_named, opencl_cpu, tmp_path):
    # Even where a device is stored as faster at everything: a stream's length is not
    # known, and a start-up costs more than the host engine takes for all but gigabytes.
    for kind in ("blocks", "chunks", "gcm"):
        rates.store_rates(opencl_cpu, {kind: 50.0}, 64 << 20)
    done = subprocess.run([sys.executable, "-c", _STREAM_COLD], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    module, started = json.loads(done.stdout)
    assert module.startswith("aescl.engines.host") and not started


_FIRST_JOB = """
import json, os
import aescl
from aescl import rates
key, data = os.urandom(32), os.urandom(4 << 20)
seen = []
for _ in range(2):
    aescl.chunked.encrypt(key, data, device="host")
    seen.append(("host", "chunks") in rates.measured)
print(json.dumps(seen))
"""


def test_a_devices_first_job_sets_no_measured_rate(tmp_path):
    # It carries the engine's start-up; the second job's rate is the device's.
    done = subprocess.run([sys.executable, "-c", _FIRST_JOB], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, True]


def test_a_file_job_keeps_the_device_chosen_for_it(without_a_gpu, no_device_named, opencl_cpu):
    # OpenCL runs here. Between files the two tie at the files' rate (the host engine
    # ranks first); a window alone, 2 MiB in memory, would go to the faster device.
    assert rates.store_rates(opencl_cpu, {"chunks": 50.0}, 64 << 20)
    assert rates.store_rates(host_device(), {"chunks": 5.0}, 64 << 20)
    key, base_nonce = os.urandom(32), os.urandom(12)
    cipher = scheduler.TeamChunks(no_device_named, key, base_nonce, batch_chunks=128)
    assert no_device_named.for_job(128 * chunked.CHUNK_SIZE, "chunks").devices == [opencl_cpu]
    files = cipher.for_files(384)
    assert [e.device for e in files.engines] == [host_device()]
    data = os.urandom(384 * chunked.CHUNK_SIZE)
    sink = io.BytesIO()
    chunked.seal_from_file(cipher, io.BytesIO(data), sink, 0, 384)
    on_host = scheduler.TeamChunks(teams.team("host"), key, base_nonce, 128)
    assert sink.getvalue() == bytes(on_host.seal(data, 0, final=False))
    assert teams.team("host").shares[0].units > 0  # the windows ran there


def test_once_opencl_runs_a_job_goes_by_rate_alone(no_device_named, opencl_cpu):
    # This process has started OpenCL (the fixture): no start-up left to pay.
    assert rates.store_rates(opencl_cpu, {"chunks": 50.0}, 64 << 20)
    assert rates.store_rates(host_device(), {"chunks": 5.0}, 64 << 20)
    assert rates.store_start(opencl_cpu, 30.0)
    assert no_device_named.for_job(64 << 20, "chunks").devices == [opencl_cpu]


def test_a_gcm_stream_goes_by_its_own_rates_not_the_chunked_formats(no_device_named,
                                                                    opencl_cpu):
    # The chunked format measured ten times faster on the OpenCL device: a GCM stream,
    # which that figure does not measure (aescl.rates, "gcm"), still goes to the host
    # engine's threads.
    assert rates.store_rates(opencl_cpu, {"chunks": 50.0}, 64 << 20)
    assert rates.store_rates(host_device(), {"chunks": 5.0}, 64 << 20)
    assert no_device_named.best_device("chunks") == opencl_cpu
    assert no_device_named.stream_engine().device == host_device()


def test_unmeasured_devices_rank_the_host_engine_before_an_opencl_cpu(without_a_gpu,
                                                                      no_device_named,
                                                                      opencl_cpu):
    # The guesses alone, asked with no job: a CPU device is guessed low so that it starts
    # for nothing the host engine would do (a job then tries it once OpenCL runs: above).
    for kind in ("blocks", "chunks"):
        assert no_device_named.best_device(kind) == host_device()


def test_a_started_cpu_device_takes_large_jobs_until_it_is_measured(no_device_named,
                                                                      opencl_cpu):
    """A CPU device is guessed low so that, unmeasured, it starts for no job the host
    engine would do. Once OpenCL runs (the fixture started it), a CPU device whose rate
    is only a guess takes the large jobs in memory until a job has measured it; then
    its measured rate decides. (On the CI kind PoCL seals faster than the host engine,
    so a default that never tried it stayed on the slower device for good.)"""
    large = rates.MIN_MEASURED_BYTES
    tried = no_device_named.for_job(large, "chunks").devices
    assert len(tried) == 1 and tried[0].type == "cpu"
    assert no_device_named.for_job(large, "chunks", file_job=True).devices == [host_device()]
    assert no_device_named.for_job(large // 2, "chunks").devices == [host_device()]

    key, data = os.urandom(32), os.urandom(large + 5)
    for _ in range(2):
        sealed = chunked.encrypt(key, data)
        assert chunked.decrypt(key, sealed, device="host") == data
    assert not rates.only_guessed(tried[0], "chunks")
    assert teams.team(tried[0]).shares[0].units > 0  # (its jobs ran there)

    # Measured now: slower than the host engine, it takes no more.
    rates.measured[tried[0].id, "chunks"] = 1e6
    rates.measured[host_device().id, "chunks"] = 1e9
    assert no_device_named.for_job(large, "chunks").devices == [host_device()]
    rates.measured[tried[0].id, "chunks"] = 1e10
    assert no_device_named.for_job(large, "chunks").devices == tried


def test_a_devices_first_job_of_each_kind_of_launch_sets_no_rate(opencl_cpu, monkeypatch):
    """A device's first opening builds the opening kernel, which its first sealing did
    not: its time is not the device's rate either (PoCL on the CI kind measured 0.39
    GB/s that way, against 1.7 after). Each kind of launch's first job is left out."""
    monkeypatch.setattr(scheduler, "_worked_before", set())
    monkeypatch.setattr(rates, "measured", {})
    key, data = os.urandom(32), os.urandom(rates.MIN_MEASURED_BYTES + 5)
    sealed = chunked.encrypt(key, data, device=opencl_cpu)
    assert chunked.decrypt(key, sealed, device=opencl_cpu) == data
    assert (opencl_cpu.id, "chunks") not in rates.measured
    chunked.encrypt(key, data, device=opencl_cpu)
    assert (opencl_cpu.id, "chunks") in rates.measured

    ctr = aescl.new(key[:16], aescl.MODE_CTR, nonce=bytes(8), device=opencl_cpu)
    ctr.encrypt(data)
    assert (opencl_cpu.id, "blocks") not in rates.measured
    aescl.new(key, aescl.MODE_CTR, nonce=bytes(8), device=opencl_cpu).encrypt(data)
    assert (opencl_cpu.id, "blocks") not in rates.measured  # (AES-256: its own build)
    ctr.encrypt(data)
    assert (opencl_cpu.id, "blocks") in rates.measured


def test_default_jobs_match_pycryptodome_and_the_format(no_device_named, monkeypatch):
    # Large enough to be split, with a device named by the default team.
    data = os.urandom((3 << 20) + 7)
    key, iv = os.urandom(16), os.urandom(16)
    ours = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv)
    assert ours.encrypt(data) == AES.new(key, AES.MODE_CTR, nonce=b"",
                                          initial_value=iv).encrypt(data)
    message_key = os.urandom(32)
    sealed = chunked.encrypt(message_key, data)
    assert chunked.decrypt(message_key, sealed, device="host") == data


def test_an_engine_that_holds_the_gil_sits_out_a_split_of_that_kind(opencl_cpu, monkeypatch):
    # The host engine's chunk work holds the GIL (each AEAD call): beside an OpenCL
    # engine it would starve the pipeline's threads, so the OpenCL engine seals alone.
    monkeypatch.setattr(scheduler, "SPLIT_MIN_BYTES", 0)
    devices = [host_device(), opencl_cpu]
    assert "chunks" in engine_for(host_device()).holds_gil_for
    key, data = os.urandom(32), os.urandom(3 << 20)
    sealed = chunked.encrypt(key, data, device=devices)
    assert chunked.decrypt(key, sealed, device="host") == data
    host_share, cpu_share = teams.team(devices).shares
    assert host_share.units == 0 and cpu_share.units > 0
    # (Block work releases the GIL inside OpenSSL: both take part, as the first test shows.)


# ---- who takes part ---------------------------------------------------------------------

@pytest.fixture
def apart_from_host_memory() -> aescl.Device:
    """A real OpenCL device that does not compute in host memory: a GPU where there is
    one, else the Oclgrind simulator (its buffers are its own, as a GPU's are)."""
    found = [d for d in aescl.devices() if d.is_opencl and d.type != "cpu"]
    if not found:
        pytest.skip("no OpenCL device apart from host memory (no GPU, no Oclgrind)")
    return found[0]


def test_a_device_that_would_stage_the_data_sits_out_beside_the_host_cores(
        apart_from_host_memory):
    device, n = apart_from_host_memory, 64 << 20
    team = scheduler.Team([device, host_device()])
    gpu, host = team.engines
    pageable = (np.empty(4096, np.uint8), np.empty(4096, np.uint8))
    pinned = (aescl.pinned_empty(4096, device), aescl.pinned_empty(4096, device))
    assert gpu.stages(*pageable) and not gpu.stages(*pinned)
    assert gpu.stages(pinned[0], pageable[1])  # one array it would stage is enough
    assert not host.stages(*pageable)
    for kind in ("blocks", "chunks"):
        assert team.taking_part(n, kind, pageable) == [host]
    assert team.taking_part(n, "blocks", pinned) == [gpu, host]
    # Alone, the device takes every job: there are no host cores to give it to.
    alone = scheduler.Team([device])
    assert alone.taking_part(n, "blocks", pageable) == alone.engines


def test_host_arrays_are_what_each_engine_reads_directly(apart_from_host_memory, opencl_cpu):
    from aescl.engines.opencl.pipeline import is_pinned

    array = engine_for(apart_from_host_memory).host_array(4096)
    assert is_pinned(array, apart_from_host_memory) and array.nbytes == 4096
    for device in (opencl_cpu, host_device()):
        array = engine_for(device).host_array(4096)
        assert len(memoryview(array).cast("B")) == 4096
        assert not engine_for(device).stages(array, array)


@pytest.mark.parametrize("kind", ["blocks", "chunks"])
def test_all_gives_the_host_cores_to_the_engine_measured_fastest(no_device_named, opencl_cpu,
                                                                  kind):

    team = teams.team("all")
    assert team.whole_machine and not teams.team(teams.resolve_devices("all")).whole_machine
    arrays = (np.empty(4096, np.uint8),) * 2
    for fast, slow in ((opencl_cpu, host_device()), (host_device(), opencl_cpu)):
        assert rates.store_rates(fast, {kind: 50.0}, 64 << 20)
        assert rates.store_rates(slow, {kind: 5.0}, 64 << 20)
        on_cores = [e.device for e in team.taking_part(64 << 20, kind, arrays)
                    if e.on_host_cores]
        assert on_cores == [fast]
    # A list of devices keeps every one it names.
    named = teams.team([host_device(), opencl_cpu])
    assert len(named.taking_part(64 << 20, "blocks", arrays)) == 2


def test_all_gives_a_many_core_hosts_cores_to_the_host_engine_over_a_cpu_device_measured_slower(
        no_device_named, opencl_cpu, monkeypatch):
    """The host engine's chunk rate, never measured, is guessed a core. On the 16-core
    H200 host PoCL measured 5.7 GB/s sealing (a default job tries it) and the host
    engine seals at 13.6-16.8; a guess of 3.0 for any host gave ``all`` to PoCL, at a
    third of the host engine's rate (docs/benchmarks, 2026-12-01)."""
    from aescl.engines import registry

    monkeypatch.setattr(registry, "_engines", dict(registry._engines))  # (a 16-core one)
    many_cores = dataclasses.replace(host_device(), compute_units=16)
    rates.measured[opencl_cpu.id, "chunks"] = 5.7e9
    team = scheduler.Team([many_cores, opencl_cpu], whole_machine=True)
    arrays = (np.empty(4096, np.uint8),) * 2
    assert [e.device for e in team.taking_part(64 << 20, "chunks", arrays)] == [many_cores]


def test_beside_a_device_all_gives_the_host_cores_to_an_opencl_cpu(
        no_device_named, apart_from_host_memory, opencl_cpu):

    # Even where the host engine measured faster alone: its threads wait for the
    # interpreter beside a device's feeding thread (docs/benchmarks).
    assert rates.store_rates(host_device(), {"blocks": 50.0}, 64 << 20)
    assert rates.store_rates(opencl_cpu, {"blocks": 5.0}, 64 << 20)
    team = scheduler.Team([apart_from_host_memory, host_device(), opencl_cpu],
                          whole_machine=True)
    pinned = (aescl.pinned_empty(4096, apart_from_host_memory),) * 2
    assert [e.device for e in team.taking_part(64 << 20, "blocks", pinned)] == [
        apart_from_host_memory, opencl_cpu]
    pageable = (np.empty(4096, np.uint8),) * 2  # the device sits out: the faster alone
    assert [e.device for e in team.taking_part(64 << 20, "blocks", pageable)] == [host_device()]


def test_beside_two_devices_apart_from_host_memory_all_leaves_the_host_cores_out(
        no_device_named, apart_from_host_memory, opencl_cpu):
    """Two devices apart from host memory (the one here listed twice, under another id:
    only the team's choice is asked, no work runs) take a pinned job of ``all`` alone;
    beside one, the host's cores join it."""
    import dataclasses

    from aescl.engines.opencl import host_memory

    twin = dataclasses.replace(apart_from_host_memory, id=apart_from_host_memory.id + "-twin")
    pinned = (host_memory(4096, [apart_from_host_memory, twin], None),) * 2  # (for both)
    for kind in ("blocks", "chunks"):
        two = scheduler.Team([apart_from_host_memory, twin, host_device(), opencl_cpu],
                             whole_machine=True)
        assert [e.device for e in two.taking_part(64 << 20, kind, pinned)] == [
            apart_from_host_memory, twin]
        one = scheduler.Team([apart_from_host_memory, host_device(), opencl_cpu],
                             whole_machine=True)
        assert any(e.on_host_cores for e in one.taking_part(64 << 20, "blocks", pinned))
        named = scheduler.Team([apart_from_host_memory, twin, opencl_cpu])  # (a list: kept)
        assert len(named.taking_part(64 << 20, kind, pinned)) == 3


@pytest.mark.parametrize("mode", ["ctr", "chunked"])
def test_a_job_on_all_matches_the_reference(mode, opencl_cpu):
    data = os.urandom((3 << 20) + 21)
    if mode == "ctr":
        key, iv = os.urandom(16), os.urandom(16)
        ours = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device="all")
        assert ours.encrypt(data) == AES.new(key, AES.MODE_CTR, nonce=b"",
                                              initial_value=iv).encrypt(data)
    else:
        key = os.urandom(32)
        sealed = chunked.encrypt(key, data, device="all")
        assert chunked.decrypt(key, sealed, device="host") == data
        assert chunked.decrypt(key, sealed, device="all") == data
    shares = teams.team("all").shares
    assert sum(s.units > 0 for s in shares if s.device.type in ("host", "cpu")) == 1


def test_a_split_file_job_reads_into_memory_the_device_reads_directly(apart_from_host_memory):
    # The windows are the device's pinned memory (host_array); jobs this small run on
    # the leading engine alone, so the simulator never runs, but every window goes
    # through that memory.
    team = scheduler.Team([apart_from_host_memory, host_device()])
    key, base_nonce, count = os.urandom(32), os.urandom(12), 5
    plaintext = os.urandom(count * chunked.CHUNK_SIZE + 100)
    sink = io.BytesIO()
    cipher = team.chunks(key, base_nonce, 2)
    chunked.seal_from_file(cipher, io.BytesIO(plaintext), sink, 0, count)
    reference = chunked.encrypt_raw(key, base_nonce, plaintext, device="host")
    assert sink.getvalue() == reference[: count * chunked.SEALED_CHUNK_SIZE]
    opened = io.BytesIO()
    chunked.open_from_file(cipher, io.BytesIO(sink.getvalue()), opened, 0, count)
    assert opened.getvalue() == plaintext[: count * chunked.CHUNK_SIZE]


def test_overlapped_windows_stop_cleanly_on_a_short_input_and_on_a_bad_chunk():
    team = scheduler.Team([host_device()])
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(8 * chunked.CHUNK_SIZE)
    # The input ends inside the third window: the reader thread's error is raised here.
    with pytest.raises(aescl.TruncatedError, match="ended early"):
        chunked.seal_from_file(team.chunks(key, base_nonce, 2),
                               io.BytesIO(plaintext[: 5 * chunked.CHUNK_SIZE + 7]),
                               io.BytesIO(), 0, 8)
    sealed = bytearray(chunked.encrypt_raw(key, base_nonce, plaintext + b"x", device="host"))
    sealed[3 * chunked.SEALED_CHUNK_SIZE + 10] ^= 1  # chunk 3: the second window's
    opened = io.BytesIO()
    with pytest.raises(aescl.AuthenticationError, match="chunk 3"):
        chunked.open_from_file(team.chunks(key, base_nonce, 2), io.BytesIO(bytes(sealed)),
                               opened, 0, 8)
    # Only the windows before the bad one, each authenticated whole, were written.
    assert opened.getvalue() == plaintext[: 2 * chunked.CHUNK_SIZE]


def test_a_split_with_no_units_reads_no_rate(monkeypatch):
    """The format's final-chunk run splits no whole chunks on every call: it returns
    before the rates store is read (a stat and a path each time)."""
    def read(*_args, **_kwargs):
        raise AssertionError("an empty split read a rate")

    monkeypatch.setattr(scheduler, "expected_rate", read)
    monkeypatch.setattr(scheduler, "rate_kind", read)
    ran = []
    teams.Team([host_device()]).split(0, 16, lambda engine, ranges: ran.append(1))
    assert ran == []
