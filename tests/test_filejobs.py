"""Jobs over sets of files (aescl/filejobs.py), run in this process: split files are
byte-identical to a one-process encryption, outputs appear only when every task
succeeded, and no part file is left behind."""

from __future__ import annotations

import os

import pytest

from aescl import chunked, chunkformat, fileformat, filejobs
from aescl.errors import AuthenticationError, InputChangedError, TruncatedError, WrongKeyError

KEY = bytes(range(32))
RANGE = 64 << 10  # 4 chunks per range


def _payload() -> fileformat.PayloadKey:
    return fileformat.PayloadKey.new(key=KEY)


def _one_process(data: bytes, salt: bytes) -> bytes:
    header = fileformat.Header.new(fileformat.KEY_FILE).encode()
    return header + chunked.encrypt(KEY, data, header, salt=salt, device="host")


def _names(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("size", [0, 100, chunkformat.CHUNK_SIZE, 4 * chunkformat.CHUNK_SIZE,
                                  (1 << 20) + 5, 11 * chunkformat.CHUNK_SIZE])
def test_a_split_file_is_byte_identical_to_one_process(tmp_path, size):
    data = os.urandom(size)
    source = tmp_path / "data.bin"
    source.write_bytes(data)
    salt = os.urandom(chunkformat.SALT_SIZE)
    plan = filejobs.plan_encrypt([str(source)], _payload(), device="host", range_bytes=RANGE,
                                 salt=salt)
    if size > RANGE:
        # Ranges of at most 4 whole chunks, in order, covering every chunk; the last
        # one also takes the final short chunk.
        starts = [task.first for task in plan.tasks]
        ends = [task.first + task.count for task in plan.tasks]
        assert starts == [0] + ends[:-1] and ends[-1] == size // chunkformat.CHUNK_SIZE
        assert all(0 < task.count <= 4 for task in plan.tasks)
        assert [task.final for task in plan.tasks] == [False] * (len(plan.tasks) - 1) + [True]
    assert filejobs.run_here(plan) == [str(source) + ".aescl"]
    sealed = (tmp_path / "data.bin.aescl").read_bytes()
    if size > RANGE:
        assert sealed == _one_process(data, salt)
    source.rename(tmp_path / "original")
    plan = filejobs.plan_decrypt([str(source) + ".aescl"], fileformat.KeyRing(KEY, None),
                                 device="host", range_bytes=RANGE)
    filejobs.run_here(plan)
    assert source.read_bytes() == data
    assert _names(tmp_path) == ["data.bin", "data.bin.aescl", "original"]


def test_split_ranges_run_in_any_order_and_again(tmp_path):
    data = os.urandom(10 * chunkformat.CHUNK_SIZE + 7)
    (tmp_path / "in").write_bytes(data)
    salt = os.urandom(chunkformat.SALT_SIZE)
    plan = filejobs.plan_encrypt([str(tmp_path / "in")], _payload(), [str(tmp_path / "out")],
                                 device="host", range_bytes=RANGE, salt=salt)
    assert len(plan.tasks) == 3
    for task in reversed(plan.tasks):
        task()
    plan.tasks[1]()  # a task run twice (its worker died after writing) writes the same bytes
    plan.publish()
    assert (tmp_path / "out").read_bytes() == _one_process(data, salt)


def test_a_file_set_round_trips_with_one_passphrase_prompt(tmp_path):
    contents = [os.urandom(n) for n in (0, 1, 16384, 70000)]
    inputs = []
    for index, data in enumerate(contents):
        (tmp_path / f"f{index}").write_bytes(data)
        inputs.append(str(tmp_path / f"f{index}"))
    payload = fileformat.PayloadKey.new(passphrase=b"correct horse", work_factor=10)
    filejobs.run_here(filejobs.plan_encrypt(inputs, payload, device="host"))
    asked = []

    def passphrase() -> bytes:
        asked.append(1)
        return b"correct horse"

    outputs = [str(tmp_path / f"back{index}") for index in range(len(inputs))]
    plan = filejobs.plan_decrypt([name + ".aescl" for name in inputs],
                                 fileformat.KeyRing(None, passphrase), outputs, device="host")
    filejobs.run_here(plan)
    assert asked == [1]
    for data, output in zip(contents, outputs, strict=True):
        assert open(output, "rb").read() == data
    salts = {open(name + ".aescl", "rb").read()[27:51] for name in inputs}
    assert len(salts) == len(inputs)  # one scrypt, but a payload salt per file


def test_a_wrong_key_fails_before_any_part_exists(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    filejobs.run_here(filejobs.plan_encrypt([str(tmp_path / "a")], _payload(), device="host"))
    (tmp_path / "a").unlink()
    with pytest.raises(WrongKeyError):
        filejobs.plan_decrypt([str(tmp_path / "a.aescl")], fileformat.KeyRing(bytes(32), None))
    assert _names(tmp_path) == ["a.aescl"]


@pytest.mark.parametrize("range_bytes", [None, RANGE])
def test_a_modified_file_fails_the_whole_set_and_leaves_nothing(tmp_path, range_bytes):
    inputs = []
    for index in range(3):
        (tmp_path / f"f{index}").write_bytes(os.urandom(200000))
        inputs.append(str(tmp_path / f"f{index}"))
    filejobs.run_here(filejobs.plan_encrypt(inputs, _payload(), device="host"))
    for name in inputs:
        os.unlink(name)
    sealed = bytearray((tmp_path / "f2.aescl").read_bytes())
    sealed[150000] ^= 1
    (tmp_path / "f2.aescl").write_bytes(sealed)
    before = _names(tmp_path)
    plan = filejobs.plan_decrypt([name + ".aescl" for name in inputs],
                                 fileformat.KeyRing(KEY, None), device="host",
                                 range_bytes=range_bytes)
    with pytest.raises(AuthenticationError):
        filejobs.run_here(plan)
    assert _names(tmp_path) == before  # f0 and f1 decrypted fine, but nothing is published


def test_a_truncated_file_is_rejected(tmp_path):
    (tmp_path / "a").write_bytes(os.urandom(5 * chunkformat.CHUNK_SIZE))
    filejobs.run_here(filejobs.plan_encrypt([str(tmp_path / "a")], _payload(), device="host"))
    sealed = (tmp_path / "a.aescl").read_bytes()
    (tmp_path / "a.aescl").write_bytes(sealed[: -chunkformat.TAG_SIZE])  # no final chunk
    with pytest.raises(TruncatedError):
        filejobs.plan_decrypt([str(tmp_path / "a.aescl")], fileformat.KeyRing(KEY, None),
                              [str(tmp_path / "b")], range_bytes=RANGE)
    assert _names(tmp_path) == ["a", "a.aescl"]


def test_existing_outputs_are_refused_unless_forced(tmp_path):
    (tmp_path / "a").write_bytes(b"new")
    (tmp_path / "a.aescl").write_bytes(b"old")
    with pytest.raises(FileExistsError):
        filejobs.plan_encrypt([str(tmp_path / "a")], _payload())
    assert (tmp_path / "a.aescl").read_bytes() == b"old"
    filejobs.run_here(filejobs.plan_encrypt([str(tmp_path / "a")], _payload(), device="host",
                                            replace=True))
    assert (tmp_path / "a.aescl").read_bytes() != b"old"
    assert _names(tmp_path) == ["a", "a.aescl"]


def test_an_output_that_appears_meanwhile_is_never_replaced(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"data")
    plan = filejobs.plan_encrypt([str(tmp_path / "a"), str(tmp_path / "b")], _payload(),
                                 device="host")
    for task in plan.tasks:
        task()
    (tmp_path / "b.aescl").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        filejobs.run_here(plan)
    assert (tmp_path / "b.aescl").read_bytes() == b"someone else's"
    assert _names(tmp_path) == ["a", "b", "b.aescl"]  # a.aescl was taken back


def test_two_inputs_may_not_share_an_output(tmp_path):
    (tmp_path / "a").write_bytes(b"1")
    with pytest.raises(ValueError, match="same output"):
        filejobs.plan_encrypt([str(tmp_path / "a"), str(tmp_path / "a")], _payload())


def test_a_task_of_an_abandoned_job_cannot_leave_a_file(tmp_path):
    (tmp_path / "a").write_bytes(b"late")
    plan = filejobs.plan_encrypt([str(tmp_path / "a")], _payload(), device="host")
    plan.discard()
    with pytest.raises(FileNotFoundError):
        plan.tasks[0]()  # tasks never create their part file
    assert _names(tmp_path) == ["a"]


def test_file_urls_and_fsspec_file_systems(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    data = os.urandom(50000)
    (tmp_path / "a").write_bytes(data)
    filejobs.run_here(filejobs.plan_encrypt([f"file://{tmp_path}/a"], _payload(),
                                            device="host"))
    memory = fsspec.filesystem("memory")
    memory.pipe("/aescl-test/a.aescl", (tmp_path / "a.aescl").read_bytes())
    try:
        outputs = filejobs.run_here(filejobs.plan_decrypt(
            ["memory://aescl-test/a.aescl"], fileformat.KeyRing(KEY, None), device="host"))
        assert outputs == ["memory://aescl-test/a"]
        assert memory.cat("/aescl-test/a") == data
        assert sorted(memory.ls("/aescl-test", detail=False)) == ["/aescl-test/a",
                                                                  "/aescl-test/a.aescl"]
    finally:
        memory.rm("/aescl-test", recursive=True)


def test_tasks_on_several_threads_of_one_process_stay_correct(tmp_path):
    """A Dask worker runs tasks on several threads; they share one OpenCL device, whose
    pipeline serves one job at a time (four of eight files came out wrong before)."""
    import aescl

    if not any(d.is_opencl and d.type == "cpu" for d in aescl.devices()):
        pytest.skip("no OpenCL CPU device here")
    from concurrent.futures import ThreadPoolExecutor

    contents = {tmp_path / f"f{i}": os.urandom((3 << 20) + i) for i in range(8)}
    for path, data in contents.items():
        path.write_bytes(data)
    plan = filejobs.plan_encrypt(list(map(str, contents)), _payload(), device="cpu")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda task: task(), plan.tasks))
    plan.publish()
    for path in contents:
        path.unlink()
    filejobs.run_here(filejobs.plan_decrypt([f"{path}.aescl" for path in contents],
                                            fileformat.KeyRing(KEY, None), device="host"))
    for path, data in contents.items():
        assert path.read_bytes() == data


@pytest.mark.parametrize("range_bytes", [None, RANGE])
@pytest.mark.parametrize("change", ["grown", "rewritten"])
def test_an_input_that_is_not_the_planned_file_fails_and_leaves_nothing(tmp_path, range_bytes,
                                                                        change):
    """What a task reads must be the file the client planned (a worker elsewhere may see
    another file under the name): same size, same modification time."""
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(os.urandom(300000))
    before = _names(tmp_path)
    plan = filejobs.plan_encrypt([str(tmp_path / "a"), str(tmp_path / "b")], _payload(),
                                 device="host", range_bytes=range_bytes)
    data = (tmp_path / "b").read_bytes()
    if change == "grown":
        (tmp_path / "b").write_bytes(data + b"more")
    else:  # the same size, another time
        os.utime(tmp_path / "b", ns=(0, os.stat(tmp_path / "b").st_mtime_ns + 10**9))
    with pytest.raises(InputChangedError, match="not the file that was planned"):
        filejobs.run_here(plan)
    assert _names(tmp_path) == before


def test_parts_of_a_plan_run_here_have_no_name(tmp_path):
    """In this process the parts are unnamed files: a kill -9 leaves nothing of them."""
    contents = {name: os.urandom(5000 + len(name)) for name in ("a", "b")}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    inputs = [str(tmp_path / name) for name in contents]
    plan = filejobs.plan_encrypt(inputs, _payload(), device="host", in_process=True)
    assert _names(tmp_path) == ["a", "b"]
    filejobs.run_here(plan)
    for name in inputs:
        os.unlink(name)
    plan = filejobs.plan_decrypt([name + ".aescl" for name in inputs],
                                 fileformat.KeyRing(KEY, None), device="host", in_process=True)
    assert _names(tmp_path) == ["a.aescl", "b.aescl"]
    filejobs.run_here(plan)
    for name, data in contents.items():
        assert (tmp_path / name).read_bytes() == data


@pytest.mark.parametrize("range_bytes, error", [(0, ValueError), (-5, ValueError),
                                                (100, ValueError), (2.5e6, TypeError)])
def test_a_bad_range_size_is_refused_before_any_part_exists(tmp_path, range_bytes, error):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    with pytest.raises(error, match="range_bytes"):
        filejobs.plan_encrypt([str(tmp_path / "a")], _payload(), range_bytes=range_bytes)
    assert _names(tmp_path) == ["a"]


@pytest.mark.parametrize("swap", ["symlink", "another-file", "hard-link"])
def test_a_part_file_swapped_by_someone_who_can_write_the_directory_gets_nothing(
        tmp_path, swap):
    """A part of a job for other processes (Dask workers) was reopened and published by
    name: swapped for a link to a file of an attacker's, it got the job's plaintext."""
    data = os.urandom(3 * chunkformat.CHUNK_SIZE + 7)
    (tmp_path / "data.bin").write_bytes(data)
    filejobs.run_here(filejobs.plan_encrypt([str(tmp_path / "data.bin")], _payload(),
                                            device="host"))
    (tmp_path / "data.bin").unlink()
    plan = filejobs.plan_decrypt([str(tmp_path / "data.bin.aescl")],
                                 fileformat.KeyRing(KEY, None), device="host")
    (part, _), = plan.outputs
    assert isinstance(part, filejobs.NamedPart)
    theirs = tmp_path / "theirs"
    if swap != "hard-link":
        theirs.write_bytes(b"")
    if swap == "symlink":
        os.unlink(part.path)
        os.symlink(theirs, part.path)
    elif swap == "another-file":
        os.replace(theirs, part.path)
        theirs.write_bytes(b"")
    else:
        os.link(part.path, theirs)
    for task in plan.tasks:
        with pytest.raises(filejobs.PartReplaced):
            task()
    with pytest.raises(filejobs.PartReplaced):
        plan.publish()
    assert theirs.read_bytes() == b"" and not (tmp_path / "data.bin").exists()


def test_a_range_whose_source_shrank_unseen_is_truncation(tmp_path, monkeypatch):
    """The last range sealed whatever the source still held as the final chunk: a file
    that shrank in a way its size and time did not show gave a shorter message."""
    data = os.urandom(9 * chunkformat.CHUNK_SIZE + 100)
    source = tmp_path / "data.bin"
    source.write_bytes(data)
    plan = filejobs.plan_encrypt([str(source)], _payload(), device="host", range_bytes=RANGE)
    monkeypatch.setattr(filejobs.Location, "check_stamp", lambda self, handle, planned: None)
    source.write_bytes(data[:-50])
    with pytest.raises(TruncatedError, match="ended early"):
        plan.tasks[-1]()
