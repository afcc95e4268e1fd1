"""aescl/engines/gpu_processes.py: a GPU's share of a team's job in a worker process of its
own, on aescl's shared memory. The worker runs the real engine of a device in a real
child process; here on each selected device (PoCL pins memory it did not allocate as
NVIDIA's driver does; ``cuda:0`` where there is one), and the team route on two GPUs
of each engine where a host has them."""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import chunked
from aescl.engines import BlockTransform, engine_for, gpu_processes
from aescl.engines.host import shared
from aescl.engines.host.processes import WorkerFailed
from aescl.errors import AuthenticationError
from interrupting import interrupted_stderr

pytestmark = pytest.mark.skipif(not shared.AVAILABLE, reason="no memfd here: no shared memory")

CHUNK, SEALED = chunked.CHUNK_SIZE, chunked.SEALED_CHUNK_SIZE


def _shared_copy(data: bytes) -> np.ndarray:
    memory = np.frombuffer(shared.shared_empty(len(data)), np.uint8)
    memory[:] = np.frombuffer(data, np.uint8)
    return memory


def test_block_ranges_in_a_worker_process_give_pycryptodomes_bytes(device):
    key, iv = os.urandom(16), os.urandom(16)
    data = os.urandom(16 * 5000)
    source, target = _shared_copy(data), _shared_copy(bytes(len(data)))
    apart = gpu_processes.ApartEngine(engine_for(device))
    worker = apart.blocks(BlockTransform(key, counter=int.from_bytes(iv, "big")))
    worker.run(source, target, iter([(3000, 5000), (0, 1), (1, 3000)]))
    assert gpu_processes._workers[device.id].process.poll() is None  # (it ran there)
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
    assert target.tobytes() == expected
    apart.blocks(BlockTransform(key, decrypt=True)).run(target, target, iter([(0, 5000)]))
    assert target.tobytes() == AES.new(key, AES.MODE_ECB).decrypt(expected)  # in place
    assert source.tobytes() == data

    # Once freed here, the worker lets go of the memory (and its pin) without waiting
    # for another job.
    pid = gpu_processes._workers[device.id].process.pid
    assert _mapped_regions(pid) >= 2
    del source, target
    gc.collect()
    deadline = time.monotonic() + 10
    while _mapped_regions(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _mapped_regions(pid) == 0


def _mapped_regions(pid: int) -> int:
    """Shared regions process ``pid`` maps (each is a memfd named aescl)."""
    with open(f"/proc/{pid}/maps") as maps:
        return sum("memfd:aescl" in line for line in maps)


def test_chunks_sealed_and_opened_in_a_worker_process_match_the_engine_here(device):
    key, base_nonce = os.urandom(32), os.urandom(12)
    count = 40
    plaintext = os.urandom(count * CHUNK)
    here = np.zeros(count * SEALED, np.uint8)
    engine = engine_for(device)
    engine.chunks(key, base_nonce, 8).seal_ranges(
        np.frombuffer(plaintext, np.uint8), here, 3, iter([(0, count)]))
    source, sealed = _shared_copy(plaintext), _shared_copy(bytes(count * SEALED))
    apart = gpu_processes.ApartEngine(engine).chunks(key, base_nonce, 8)
    apart.seal_ranges(source, sealed, 3, iter([(20, count), (0, 20)]))
    assert sealed.tobytes() == here.tobytes()
    opened = _shared_copy(bytes(count * CHUNK))
    apart.open_ranges(sealed, opened, 3, iter([(0, count)]))
    assert opened.tobytes() == plaintext

    sealed[25 * SEALED + 7] ^= 1
    with pytest.raises(AuthenticationError) as failed:
        apart.open_ranges(sealed, opened, 3, iter([(20, count)]))
    assert failed.value.chunk == 3 + 25


def test_tasks_begun_together_are_served_from_the_calling_thread(device):
    """A job's GPU tasks are sent, then served from one thread (Together); a second task
    for a worker that is busy runs on a thread of its own."""
    key = os.urandom(16)
    data = os.urandom(16 * 5000)
    source = _shared_copy(data)
    targets = [_shared_copy(bytes(len(data))) for _ in range(2)]
    apart = gpu_processes.ApartEngine(engine_for(device))
    transform = BlockTransform(key, counter=7)
    served_from: list[list[threading.Thread]] = [[], []]  # a task's ranges: by which thread

    def ranges(task, pieces):
        for piece in pieces:
            served_from[task].append(threading.current_thread())
            yield piece

    together, ends = gpu_processes.Together(), []
    for task, pieces in enumerate(([(3000, 5000), (0, 1), (1, 3000)], [(0, 5000)])):
        with together.begin(ends.append):
            apart.blocks(transform).run(source, targets[task], ranges(task, pieces))
    here = threading.current_thread()
    assert served_from[0] == [here]  # (its first range, sent with the task)
    try:
        assert ends == []  # (only begun)
    finally:
        together.serve()
    assert ends == [None, None]
    assert served_from[0] == [here] * 3  # (all three of its ranges)
    assert here not in served_from[1]  # the busy worker's second task: on a thread
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=7).encrypt(data)
    assert [t.tobytes() for t in targets] == [expected, expected]


class _Unknown:
    """A real engine under a device id that its worker process cannot find."""

    def __init__(self, engine):
        self._engine = engine
        self.device = dataclasses.replace(engine.device, id="no-such-device:0")

    def __getattr__(self, name):
        return getattr(self._engine, name)


def test_a_task_begun_together_whose_worker_cannot_start_runs_here_on_a_thread(device):
    """Where a GPU's worker does not start, its task runs in this process instead, on a
    thread of its own, and ends as the others do; its device stays here from then on."""
    key = os.urandom(16)
    data = os.urandom(16 * 3000)
    source, target = _shared_copy(data), _shared_copy(bytes(len(data)))
    apart = gpu_processes.ApartEngine(_Unknown(engine_for(device)))
    served_from: list[threading.Thread] = []

    def ranges():
        for piece in [(1000, 3000), (0, 1000)]:
            served_from.append(threading.current_thread())
            yield piece

    together, ends = gpu_processes.Together(), []
    with together.begin(ends.append):
        apart.blocks(BlockTransform(key, counter=3)).run(source, target, ranges())
    together.serve()
    assert ends == [None]
    assert threading.current_thread() not in served_from
    assert "no-such-device:0" in gpu_processes._cannot_start
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=3).encrypt(data)
    assert target.tobytes() == expected


def test_a_task_that_fails_with_its_next_range_on_the_way_leaves_its_worker_in_step(device):
    """The worker asks for its next range as it starts one: where the engine fails first,
    the answer on its way is read before the task's reply, and the next task is served
    right by the same worker."""
    key, base_nonce = os.urandom(32), os.urandom(12)
    count = 40
    plaintext = os.urandom(count * CHUNK)
    source, sealed = _shared_copy(plaintext), _shared_copy(bytes(count * SEALED))
    apart = gpu_processes.ApartEngine(engine_for(device)).chunks(key, base_nonce, 8)
    apart.seal_ranges(source, sealed, 0, iter([(0, count)]))
    sealed[25 * SEALED + 7] ^= 1
    opened = _shared_copy(bytes(count * CHUNK))
    with pytest.raises(AuthenticationError):
        apart.open_ranges(sealed, opened, 0, iter([(20, 30), (0, 20), (30, count)]))
    pid = gpu_processes._workers[device.id].process.pid
    sealed[25 * SEALED + 7] ^= 1
    apart.open_ranges(sealed, opened, 0, iter([(0, 20), (20, count)]))
    assert opened.tobytes() == plaintext
    assert gpu_processes._workers[device.id].process.pid == pid  # (the same worker)


def test_a_task_begun_together_that_fails_ends_with_its_failure_and_its_worker_serves_on(
        device):
    """A task served together whose engine fails on its second range (the chunk counter
    would pass its end) ends with the worker's failure, told to its ``ended``; the
    worker, in step, serves the next task."""
    key, base_nonce = os.urandom(32), os.urandom(12)
    plaintext = os.urandom(8 * CHUNK)
    source, sealed = _shared_copy(plaintext), _shared_copy(bytes(8 * SEALED))
    apart = gpu_processes.ApartEngine(engine_for(device)).chunks(key, base_nonce, 8)
    together, ends = gpu_processes.Together(), []
    with together.begin(ends.append):
        apart.seal_ranges(source, sealed, chunked.MAX_CHUNKS - 6,
                          iter([(0, 2), (4, 8), (2, 4)]))
    together.serve()
    assert len(ends) == 1 and isinstance(ends[0], WorkerFailed), ends
    assert "CounterOverflowError" in str(ends[0])
    pid = gpu_processes._workers[device.id].process.pid
    here = np.zeros(8 * SEALED, np.uint8)
    engine_for(device).chunks(key, base_nonce, 8).seal_ranges(
        np.frombuffer(plaintext, np.uint8), here, 5, iter([(0, 8)]))
    apart.seal_ranges(source, sealed, 5, iter([(4, 8), (0, 4)]))
    assert sealed.tobytes() == here.tobytes()
    assert gpu_processes._workers[device.id].process.pid == pid


def test_a_worker_that_dies_fails_its_job_and_the_next_job_starts_another(device):
    key = os.urandom(16)
    data = os.urandom(16 * 256)
    source, target = _shared_copy(data), _shared_copy(bytes(len(data)))
    apart = gpu_processes.ApartEngine(engine_for(device))
    transform = BlockTransform(key, counter=0)
    apart.blocks(transform).run(source, target, iter([(0, 256)]))
    first = gpu_processes._workers[device.id].process
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    with pytest.raises(WorkerFailed):
        apart.blocks(transform).run(source, target, iter([(0, 256)]))
    target[:] = 0
    apart.blocks(transform).run(source, target, iter([(0, 256)]))
    assert gpu_processes._workers[device.id].process.pid != first.pid
    assert target.tobytes() == AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=0).encrypt(data)


def test_ctrl_c_interrupts_the_program_and_not_its_gpu_worker(device):
    err = interrupted_stderr(
        "from aescl.engines import BlockTransform, engine_for, gpu_processes\n"
        "from aescl.engines.host import shared\n"
        "import numpy as np\n"
        f"apart = gpu_processes.ApartEngine(engine_for(aescl.get_device({device.id!r})))\n"
        "data = np.frombuffer(shared.shared_empty(16 << 20), np.uint8)\n"
        "work = apart.blocks(BlockTransform(bytes(16), counter=0))\n"
        "crypt = lambda: work.run(data, data, iter([(0, data.nbytes // 16)]))\n"
        "crypt()",
        "crypt()")
    assert err.count("Traceback") == 1 and "_serve" not in err, err  # (the program's alone)


_CAUGHT_CTRL_C = """
import os, signal, sys
import numpy as np
import aescl
from Crypto.Cipher import AES
from aescl.engines import BlockTransform, engine_for, gpu_processes
from aescl.engines.host import shared
signal.signal(signal.SIGINT, signal.default_int_handler)  # (as a terminal's)
apart = gpu_processes.ApartEngine(engine_for(aescl.get_device(sys.argv[1])))
n = 32 << 20
data = np.frombuffer(shared.shared_empty(n), np.uint8)
data[:] = np.frombuffer(os.urandom(n), np.uint8)
first, after = (np.frombuffer(shared.shared_empty(n), np.uint8) for _ in range(2))
def crypt(key, out):  # (many small ranges: the job mostly waits on its worker's asks)
    ranges = iter([(lo, lo + 2048) for lo in range(0, n // 16, 2048)])
    apart.blocks(BlockTransform(key, counter=0)).run(data, out, ranges)
crypt(bytes(16), first)
print("ready", flush=True)
try:
    while True:
        if sys.argv[2] == "together":
            together = gpu_processes.Together()
            with together.begin(lambda failure: None):
                crypt(bytes(16), first)
            together.serve()
        else:
            crypt(bytes(16), first)
except KeyboardInterrupt:
    pass
key = bytes(range(16))
crypt(key, after)
expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=0).encrypt(data.tobytes())
print("right" if after.tobytes() == expected else "wrong", flush=True)
"""


@pytest.mark.parametrize("served", ["alone", "together"])
def test_a_job_cut_by_a_caught_ctrl_c_leaves_the_next_job_right(device, served):
    """As in a notebook: Ctrl-C stops a job while its worker is mid-task, and the program
    goes on. That worker's conversation is lost, so it is not used again: the next job,
    under another key into other memory, gives pycryptodome's bytes (a worker used again
    would hand the new job's ranges to the old task)."""
    program = subprocess.Popen([sys.executable, "-c", _CAUGHT_CTRL_C, device.id, served],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert program.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        os.killpg(program.pid, signal.SIGINT)  # (to the whole group, as a terminal does)
        out, err = program.communicate(timeout=60)
    finally:
        if program.poll() is None:
            os.killpg(program.pid, signal.SIGKILL)
            program.wait()
    assert (program.returncode, out.strip()) == (0, "right"), err


def test_only_gpus_go_apart_and_only_on_shared_memory(device):
    engine = engine_for(device)
    assert gpu_processes.can_run_apart(device) == (device.type == "gpu")
    pair = [engine, engine_for(aescl.devices.host_device())]
    assert gpu_processes.apart(pair, [_shared_copy(b"x" * 64)]) == {}  # one GPU at most
    ordinary = np.zeros(64, np.uint8)
    assert gpu_processes.apart([engine, engine], [ordinary]) == {}


def _two_gpus_of(engine: str) -> list[str]:
    """The ids of two GPUs of ``engine``; skips, visibly, where the host has fewer."""
    gpus = [d.id for d in aescl.devices() if d.engine == engine and d.type == "gpu"]
    if len(gpus) < 2:
        pytest.skip(f"fewer than two {engine} GPUs here")
    return gpus[:2]


def _random_pinned(n: int, team: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``aescl.pinned_empty(n, team)`` holding random bytes, and a copy of them."""
    memory = aescl.pinned_empty(n, team)
    data = np.frombuffer(os.urandom(n), np.uint8)
    memory[:] = data
    return memory, data


@pytest.mark.parametrize("engine", ["opencl", "cuda"])
def test_a_team_of_gpus_works_a_process_a_gpu_on_its_pinned_memory(engine):
    """Two GPUs of one engine: ``pinned_empty`` of the team is shared memory, and a job on
    it runs each GPU's share in its own worker. Skips, visibly, without two such GPUs."""
    team = _two_gpus_of(engine)
    n = 64 << 20
    memory, data = _random_pinned(n, team)
    assert shared.locate(memory) is not None
    out = aescl.pinned_empty(n, team)
    key, nonce = os.urandom(16), os.urandom(8)
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=team).encrypt(memory, output=out)
    assert out.tobytes() == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data.tobytes())
    assert all(gpu_processes._workers[d].process.poll() is None for d in team)

    sealed = aescl.pinned_empty(chunked.sealed_size(n), team)
    chunked.encrypt(key * 2, memory, output=sealed, device=team)
    opened = aescl.pinned_empty(n, team)
    chunked.decrypt(key * 2, sealed, output=opened, device=team)
    assert opened.tobytes() == data.tobytes()


@pytest.mark.parametrize("engine", ["opencl", "cuda"])
def test_a_teams_gpu_whose_worker_died_has_its_ranges_redone_and_a_rejection_names_its_chunk(
        engine):
    """Two GPUs of one engine, served together from the job's thread: a worker killed
    between jobs fails its share of the next, which the other GPU redoes; and a sealed
    chunk changed on its way is refused by the team, its index named. Skips, visibly,
    without two such GPUs."""
    team = _two_gpus_of(engine)
    n = 16 << 20
    memory, data = _random_pinned(n, team)
    out = aescl.pinned_empty(n, team)
    key, nonce = os.urandom(16), os.urandom(8)
    expected = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data.tobytes())
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=team).encrypt(memory, output=out)
    victim = gpu_processes._workers[team[0]].process
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    out[:] = 0
    aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=team).encrypt(memory, output=out)
    assert out.tobytes() == expected

    sealed = aescl.pinned_empty(chunked.sealed_size(n), team)
    chunked.encrypt(key * 2, memory, output=sealed, device=team)
    sealed[700 * SEALED + SEALED // 2] ^= 1  # (past the header, well inside chunk 700)
    opened = aescl.pinned_empty(n, team)
    with pytest.raises(AuthenticationError) as failed:
        chunked.decrypt(key * 2, sealed, output=opened, device=team)
    assert failed.value.chunk == 700
