"""``aescl encrypt``/``decrypt`` with several inputs, in this process and on a Dask
cluster started the usual way (``dask scheduler``, ``dask worker``), as real
subprocesses on real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_cli import AESCL, run

DASK = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")


def _files(directory: Path, sizes: list[int]) -> dict[Path, bytes]:
    contents = {}
    for index, size in enumerate(sizes):
        path = directory / f"file{index}.bin"
        contents[path] = os.urandom(size)
        path.write_bytes(contents[path])
    return contents


def _names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def _key(directory: Path) -> str:
    key = directory.parent / f"{directory.name}.key"
    if not key.exists():
        assert run("keygen", "-o", str(key)).returncode == 0
    return str(key)


def test_several_inputs_round_trip_in_this_process(tmp_path):
    contents = _files(tmp_path, [0, 5000, 16384, 300000])
    key = _key(tmp_path)
    inputs = [str(path) for path in contents]
    result = run("encrypt", "--key-file", key, *inputs)
    assert result.returncode == 0, result.stderr
    for path in contents:
        path.unlink()
    result = run("decrypt", "--key-file", key, *[name + ".aescl" for name in inputs])
    assert result.returncode == 0, result.stderr
    for path, data in contents.items():
        assert path.read_bytes() == data


def test_one_bad_file_among_several_fails_the_job_and_publishes_nothing(tmp_path):
    contents = _files(tmp_path, [40000, 40000, 40000])
    key = _key(tmp_path)
    inputs = [str(path) for path in contents]
    assert run("encrypt", "--key-file", key, *inputs).returncode == 0
    for path in contents:
        path.unlink()
    sealed = bytearray(Path(inputs[1] + ".aescl").read_bytes())
    sealed[-100] ^= 1
    Path(inputs[1] + ".aescl").write_bytes(sealed)
    before = _names(tmp_path)
    result = run("decrypt", "--key-file", key, *[name + ".aescl" for name in inputs])
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "authentication" in result.stderr
    assert _names(tmp_path) == before


def test_several_inputs_refuse_an_existing_output_before_any_work(tmp_path):
    contents = _files(tmp_path, [100, 200])
    key = _key(tmp_path)
    inputs = [str(path) for path in contents]
    Path(inputs[1] + ".aescl").write_bytes(b"keep me")
    result = run("encrypt", "--key-file", key, *inputs)
    assert result.returncode == 2 and "exists" in result.stderr
    assert Path(inputs[1] + ".aescl").read_bytes() == b"keep me"
    assert not Path(inputs[0] + ".aescl").exists()


@pytest.mark.parametrize("extra", [["-o", "out"], ["--raw", "--key", "00" * 16, "--iv", "00" * 16],
                                   ["-"]])
def test_several_inputs_refuse_what_needs_one(tmp_path, extra):
    contents = _files(tmp_path, [100, 200])
    result = run("encrypt", "--key-file", _key(tmp_path), *map(str, contents), *extra)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("aescl: ") and result.stderr.count("\n") == 1
    assert _names(tmp_path) == ["file0.bin", "file1.bin"]


def _scheduler_address(scheduler_file, deadline):
    """The address the scheduler wrote, once the whole file is there.

    The scheduler creates the file before it writes it, so a file that exists can
    still be empty or half written for a moment."""
    while True:
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, ValueError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A scheduler and two single-threaded workers, started the usual way."""
    if DASK is None:
        pytest.skip("the dask command is not installed (pip install 'aescl[dask]')")
    directory = tmp_path_factory.mktemp("dask")
    scheduler_file = directory / "scheduler.json"
    logs = open(directory / "log", "wb")
    processes = [subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)], stdout=logs, stderr=logs)]
    try:
        address = _scheduler_address(scheduler_file, deadline=time.monotonic() + 60)
        # The workers' own working directory: a relative path must never mean a file
        # there (test_relative_paths_are_the_clients).
        processes.append(subprocess.Popen(
            [DASK, "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "2",
             "--nthreads", "1", "--no-dashboard"], stdout=logs, stderr=logs, cwd=directory))
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, directory
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        logs.close()


def test_files_and_a_split_file_round_trip_on_a_running_cluster(scheduler, tmp_path):
    scheduler, _ = scheduler
    contents = _files(tmp_path, [1000, 70000, (300 << 20) + 11])  # the last one is split
    key = _key(tmp_path)
    inputs = [str(path) for path in contents]
    result = run("encrypt", "--scheduler", scheduler, "--key-file", key, *inputs)
    assert result.returncode == 0, result.stderr
    for path in contents:
        path.unlink()
    result = run("decrypt", "--scheduler", scheduler, "--key-file", key,
                 *[name + ".aescl" for name in inputs])
    assert result.returncode == 0, result.stderr
    for path, data in contents.items():
        assert path.read_bytes() == data
    assert not [name for name in _names(tmp_path) if name.startswith(".")]


def test_a_flipped_bit_on_the_cluster_fails_with_exit_3_and_leaves_nothing(scheduler, tmp_path):
    scheduler, _ = scheduler
    contents = _files(tmp_path, [(260 << 20) + 3])
    key = _key(tmp_path)
    (source,) = contents
    assert run("encrypt", "--scheduler", scheduler, "--key-file", key,
               str(source)).returncode == 0
    source.unlink()
    sealed = Path(str(source) + ".aescl")
    with open(sealed, "r+b") as handle:
        handle.seek(200 << 20)
        byte = handle.read(1)
        handle.seek(200 << 20)
        handle.write(bytes([byte[0] ^ 4]))
    result = run("decrypt", "--scheduler", scheduler, "--key-file", key, str(sealed))
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("aescl: ") and result.stderr.count("\n") == 1
    assert _names(tmp_path) == [sealed.name]


def test_an_unreachable_scheduler_is_one_line_and_exit_1(tmp_path):
    pytest.importorskip("distributed")
    contents = _files(tmp_path, [100])
    result = subprocess.run(
        [AESCL, "encrypt", "--scheduler", "tcp://127.0.0.1:9", "--key-file", _key(tmp_path),
         *map(str, contents)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"})  # Dask's setting
    assert result.returncode == 1
    assert "cannot reach the Dask scheduler" in result.stderr and result.stderr.count("\n") == 1
    assert _names(tmp_path) == ["file0.bin"]


def test_file_urls_are_inputs_like_paths(tmp_path):
    contents = _files(tmp_path, [3000])
    key = _key(tmp_path)
    (path,) = contents
    assert run("encrypt", "--key-file", key, f"file://{path}").returncode == 0
    again = run("encrypt", "--key-file", key, f"file://{path}")
    assert again.returncode == 2 and "exists" in again.stderr
    path.unlink()
    assert run("decrypt", "--key-file", key, f"file://{path}.aescl").returncode == 0
    assert path.read_bytes() == contents[path]


def test_relative_paths_are_the_clients(scheduler, tmp_path):
    """Names are resolved where the command runs, not in a worker's working directory,
    which holds a file of the same name here."""
    scheduler, workers_directory = scheduler
    mine = os.urandom(50000)
    (tmp_path / "f1").write_bytes(mine)
    (tmp_path / "f2").write_bytes(b"second")
    (workers_directory / "f1").write_bytes(b"the worker's own f1, never to be read")
    key = _key(tmp_path)
    result = subprocess.run([AESCL, "encrypt", "--scheduler", scheduler, "--key-file", key,
                             "f1", "f2"], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (tmp_path / "f1").unlink()
    assert run("decrypt", "--key-file", key, str(tmp_path / "f1.aescl")).returncode == 0
    assert (tmp_path / "f1").read_bytes() == mine
    assert sorted(os.listdir(workers_directory)).count("f1.aescl") == 0


@pytest.mark.parametrize("address", ["bogus://x", "tcp://127.0.0.1:notaport", ""])
def test_a_bad_scheduler_address_is_one_line_naming_it(tmp_path, address):
    pytest.importorskip("distributed")
    contents = _files(tmp_path, [100, 200])
    result = subprocess.run([AESCL, "encrypt", "--scheduler", address, "--key-file",
                             _key(tmp_path), *map(str, contents)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"aescl: invalid Dask scheduler address {address!r}")
    assert _names(tmp_path) == ["file0.bin", "file1.bin"]


def test_resources_no_worker_has_fail_after_the_wait(scheduler, tmp_path):
    scheduler, _ = scheduler
    contents = _files(tmp_path, [100])
    result = run("encrypt", "--scheduler", scheduler, "--resources", "GPU=1",
                 "--resources-wait", "1", "--key-file", _key(tmp_path), *map(str, contents))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "no worker has the resources GPU=1" in result.stderr
    assert _names(tmp_path) == ["file0.bin"]


def test_sigterm_on_the_client_leaves_nothing(scheduler, tmp_path):
    """Stopped while it waits for a worker (its part files made): they are removed."""
    scheduler, _ = scheduler
    contents = _files(tmp_path, [1000, 2000])
    process = subprocess.Popen([AESCL, "encrypt", "--scheduler", scheduler, "--resources",
                                "GPU=1", "--key-file", _key(tmp_path), *map(str, contents)],
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(n.startswith(".") for n in _names(tmp_path)):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        process.terminate()
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert stderr.strip() == "aescl: terminated; no output written"
    assert _names(tmp_path) == ["file0.bin", "file1.bin"]


def test_kill_9_of_the_client_leaves_no_part_file(scheduler, tmp_path):
    """The scheduler removes the parts of a job whose client died before publishing
    (aescl.distributed.PartsOfALostClient): killed here while it waits for a worker."""
    scheduler, _ = scheduler
    contents = _files(tmp_path, [1000, 2000])
    process = subprocess.Popen([AESCL, "encrypt", "--scheduler", scheduler, "--resources",
                                "GPU=1", "--key-file", _key(tmp_path), *map(str, contents)],
                               stderr=subprocess.DEVNULL)
    from distributed import Client

    def guards(dask_scheduler) -> list[str]:
        return [name for name in dask_scheduler.plugins if name.startswith("aescl-parts-")]

    try:
        with Client(scheduler, timeout="30s") as observer:
            before = set(observer.run_on_scheduler(guards))
            deadline = time.monotonic() + 60
            while set(observer.run_on_scheduler(guards)) == before:  # until it is guarded
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
        assert any(n.startswith(".") for n in _names(tmp_path))  # its parts are there
        process.kill()
        process.wait(timeout=30)
    finally:
        process.kill()
    deadline = time.monotonic() + 30
    while _names(tmp_path) != ["file0.bin", "file1.bin"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _names(tmp_path) == ["file0.bin", "file1.bin"]
