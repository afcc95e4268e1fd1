"""aescl.distributed on a real Dask LocalCluster: two worker processes under nannies."""

from __future__ import annotations

import os
import signal
import sys

import pytest

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

import cloudpickle  # noqa: E402  (comes with distributed)
from distributed import Client, LocalCluster  # noqa: E402
from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402

from aescl import chunked, chunkformat, fileformat  # noqa: E402
from aescl import distributed as aescl_distributed  # noqa: E402
from aescl.errors import AuthenticationError  # noqa: E402

pytestmark = pytest.mark.slow

KEY = os.urandom(32)
BIG = 64 << 20
RANGE = 8 << 20

# The worker plugin below is sent to the workers by value: they cannot import tests/.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    directory = tmp_path_factory.mktemp("big")
    data = os.urandom(BIG) + os.urandom(1234)  # and a final short chunk
    (directory / "big.bin").write_bytes(data)
    return directory / "big.bin", data


def _one_process(data: bytes, salt: bytes) -> bytes:
    header = fileformat.Header.new(fileformat.KEY_FILE).encode()
    return header + chunked.encrypt(KEY, data, header, salt=salt, device="host")


def _names(directory) -> list[str]:
    return sorted(os.listdir(directory))


def test_a_file_set_round_trips_on_two_workers(client, tmp_path):
    contents = {f"f{index}.txt": os.urandom(37000 * index) for index in range(6)}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    inputs = [str(tmp_path / name) for name in contents]
    done: list[int] = []
    outputs = aescl_distributed.encrypt_files(client, inputs, key=KEY, progress=done.append)
    assert outputs == [name + ".aescl" for name in inputs]
    assert sum(done) == sum(map(len, contents.values()))
    back = [str(tmp_path / f"back-{name}") for name in contents]
    aescl_distributed.decrypt_files(client, outputs, back, key=KEY)
    for name, output in zip(contents, back, strict=True):
        assert open(output, "rb").read() == contents[name]
    assert not [name for name in _names(tmp_path) if name.startswith(".")]


def test_a_64_mib_file_split_in_eight_ranges_is_byte_identical(client, big_file, tmp_path):
    path, data = big_file
    salt = os.urandom(chunkformat.SALT_SIZE)
    sealed = str(tmp_path / "big.aescl")
    tasks: list[int] = []  # progress comes once per finished task
    aescl_distributed.encrypt_files(client, [str(path)], [sealed], key=KEY,
                                    range_bytes=RANGE, salt=salt, progress=tasks.append)
    assert len(tasks) >= 8 and sum(tasks) == len(data)
    assert open(sealed, "rb").read() == _one_process(data, salt)
    opened = str(tmp_path / "opened")
    aescl_distributed.decrypt_files(client, [sealed], [opened], key=KEY, range_bytes=RANGE)
    assert open(opened, "rb").read() == data
    assert _names(tmp_path) == ["big.aescl", "opened"]


def test_one_flipped_bit_fails_the_job_and_leaves_nothing(client, big_file, tmp_path):
    path, data = big_file
    sealed = tmp_path / "big.aescl"
    aescl_distributed.encrypt_files(client, [str(path)], [str(sealed)], key=KEY,
                                    range_bytes=RANGE)
    body = bytearray(sealed.read_bytes())
    body[len(body) // 2] ^= 0x10
    sealed.write_bytes(body)
    with pytest.raises(AuthenticationError):
        aescl_distributed.decrypt_files(client, [str(sealed)], [str(tmp_path / "out")],
                                        key=KEY, range_bytes=RANGE)
    assert _names(tmp_path) == ["big.aescl"]


class _KillOnce(WorkerPlugin):
    """SIGKILL the worker the first time one of its tasks has finished (its range is
    written, its result not yet delivered): once per test, marked by a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        if str(key).startswith("aescl-") and finish == "memory":
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_job_changes_nothing(client, big_file, tmp_path):
    path, data = big_file
    salt = os.urandom(chunkformat.SALT_SIZE)
    marker = tmp_path / "killed"
    out = tmp_path / "out"
    out.mkdir()
    client.register_plugin(_KillOnce(str(marker)), name="aescl-kill-once")
    try:
        aescl_distributed.encrypt_files(client, [str(path)], [str(out / "big.aescl")],
                                        key=KEY, range_bytes=RANGE, salt=salt)
    finally:
        client.unregister_worker_plugin("aescl-kill-once")
    assert marker.exists()  # a worker really died during the job
    assert (out / "big.aescl").read_bytes() == _one_process(data, salt)
    assert _names(out) == ["big.aescl"]
    client.wait_for_workers(2, timeout=60)  # the nanny brought it back


@pytest.mark.parametrize("seconds", [-1, float("nan")])
def test_a_bad_resources_wait_is_refused(seconds):
    from aescl import distributed

    with pytest.raises(ValueError, match="resources_wait"):
        distributed.wait_for_resources(None, {"GPU": 1}, seconds)  # (no client is needed)
