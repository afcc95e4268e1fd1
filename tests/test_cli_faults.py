"""Faults while ``aescl encrypt``/``decrypt`` run, as real subprocesses: each ends with a
documented exit code and one line on stderr, leaves the output directory exactly as
it was (or holds the complete file), and never touches the input (docs/security.md)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import an_opencl_device, selected_devices
from test_cli import AESCL

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE, EXIT_TERMINATED = 1, 2, 130, 141, 143

# The two ways a file gets written: the host engine's writes, and the OpenCL pipeline's
# (which maps a file where fallocate reserved its room).
ENGINES = ["host", *(device.id for device in selected_devices()[:1])]


def aescl_run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([AESCL, *args], capture_output=True, text=True, timeout=300,
                          **kwargs)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("aescl: ")
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def job(tmp_path):
    """A key, a random 8 MiB input and its encryption, in a directory of their own."""
    key = tmp_path / "k.key"
    assert aescl_run("keygen", "-o", str(key)).returncode == 0
    plain = tmp_path / "plain.bin"
    plain.write_bytes(os.urandom(8 << 20))
    sealed = tmp_path / "plain.bin.aescl"
    assert aescl_run("encrypt", "--key-file", str(key), "--device", "host",
                     str(plain)).returncode == 0
    return key, plain, sealed


@contextlib.contextmanager
def mounted_tmpfs(where: Path, options: str):
    """A tmpfs of its own (needs root and mount(8)); skipped visibly where it cannot be had."""
    where.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root needed): {mount.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("verb", ["encrypt", "decrypt"])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, job, engine, verb):
    key, plain, sealed = job
    source = plain if verb == "encrypt" else sealed
    before = digest(source)
    with mounted_tmpfs(tmp_path / "disk", "size=2m") as disk:
        result = aescl_run(verb, "--key-file", str(key), "--device", engine, "-o",
                           str(disk / "out"), str(source))
        assert result.returncode == EXIT_FAILED, result.stderr  # not a SIGBUS (-7)
        assert "no space left" in one_line(result.stderr)
        assert os.listdir(disk) == []
    assert digest(source) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_the_file_size_limit_is_one_line_and_leaves_nothing(tmp_path, job, engine):
    key, plain, _ = job
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    result = aescl_run("encrypt", "--key-file", str(key), "--device", engine, "-o",
                       str(out_dir / "big.aescl"), str(plain), preexec_fn=limit_file_size)
    assert result.returncode == EXIT_FAILED, result.stderr
    assert "file size limit" in one_line(result.stderr)
    assert os.listdir(out_dir) == []


def _started(tmp_path: Path, key: Path, output: Path, *extra: str) -> subprocess.Popen:
    """An encryption of standard input, waiting for it: the test feeds the input."""
    return subprocess.Popen([AESCL, "encrypt", "--key-file", str(key), "--device", "host",
                             *extra, "-o", str(output), "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)


SIGNALS = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
SIGNAL_IDS = ["kill-9", "ctrl-c", "sigterm"]


def _assert_ended_by(how: int, returncode: int, stderr: str) -> None:
    """The documented end of a run stopped by ``how``: killed, or one line and its code."""
    if how == signal.SIGKILL:
        assert returncode == -signal.SIGKILL
    elif how == signal.SIGINT:
        assert returncode == EXIT_INTERRUPTED, stderr
        assert "interrupted" in one_line(stderr)
    else:
        assert returncode == EXIT_TERMINATED, stderr
        assert "terminated" in one_line(stderr)


@pytest.mark.parametrize("fed_mib", [0, 1, 24])
@pytest.mark.parametrize("how", SIGNALS, ids=SIGNAL_IDS)
def test_a_killed_or_interrupted_run_leaves_nothing(tmp_path, job, how, fed_mib):
    key, *_ = job
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    process = _started(tmp_path, key, out_dir / "stream.aescl")
    try:
        process.stdin.write(os.urandom(fed_mib << 20))
        process.stdin.flush()
        time.sleep(1.5)  # started up and working on what it was given
        process.send_signal(how)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    _assert_ended_by(how, process.returncode, stderr.decode())
    assert os.listdir(out_dir) == []  # nothing named, not even a hidden part file


@pytest.mark.parametrize("how", SIGNALS, ids=SIGNAL_IDS)
@pytest.mark.parametrize("verb", ["encrypt", "decrypt"])
def test_a_stopped_job_over_several_files_leaves_nothing(tmp_path, job, verb, how):
    """The last input is a FIFO: the run waits on it with the other files' outputs under
    way (encrypting: the first file done; decrypting: its output planned), and is
    stopped there. Its outputs, decrypted plaintext among them, must all be gone."""
    key, plain, sealed = job
    work = tmp_path / "files"
    work.mkdir()
    first = work / ("first.bin" if verb == "encrypt" else "first.bin.aescl")
    first.write_bytes((plain if verb == "encrypt" else sealed).read_bytes())
    fifo = work / ("last.bin" if verb == "encrypt" else "last.bin.aescl")
    os.mkfifo(fifo)
    before = sorted(os.listdir(work))
    process = subprocess.Popen([AESCL, verb, "--key-file", str(key), "--device", "host",
                                str(first), str(fifo)], stderr=subprocess.PIPE)
    try:
        with open(fifo, "wb") as feed:  # returns once the run opened it: it waits there
            if verb == "encrypt":
                feed.write(os.urandom(1 << 20))
                feed.flush()
            time.sleep(0.5)
            process.send_signal(how)
            _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    _assert_ended_by(how, process.returncode, stderr.decode())
    assert sorted(os.listdir(work)) == before  # no output, no hidden part file
    assert digest(first) == digest(plain if verb == "encrypt" else sealed)


def test_a_closed_standard_output_is_refused(job):
    key, plain, _ = job
    result = subprocess.run([AESCL, "encrypt", "--key-file", str(key), "-o", "-", str(plain)],
                            stderr=subprocess.PIPE, text=True, timeout=120,
                            preexec_fn=lambda: os.close(1))
    assert result.returncode == EXIT_USAGE
    assert "standard output is closed" in one_line(result.stderr)


def test_a_reader_that_goes_away_stops_it_quietly(job):
    key, plain, _ = job
    process = subprocess.Popen([AESCL, "encrypt", "--key-file", str(key), "-o", "-",
                                str(plain)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(process.stdout.read(100)) == 100  # as `| head -c 100` does
    process.stdout.close()
    assert process.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert process.stderr.read() == b""


def test_an_unreadable_input_is_one_line(tmp_path, job):
    key, *_ = job
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # Reading /proc/self/mem at offset 0 fails with EIO, for root too.
    inputs = ["/proc/self/mem"]
    if os.geteuid() != 0:  # (root reads files whatever their mode)
        locked = tmp_path / "locked.bin"
        locked.write_bytes(b"secret")
        locked.chmod(0)
        inputs.append(str(locked))
    for source in inputs:
        result = aescl_run("encrypt", "--key-file", str(key), "-o", str(out_dir / "x"),
                           source)
        assert result.returncode == EXIT_FAILED, result.stderr
        one_line(result.stderr)
        assert os.listdir(out_dir) == []


def test_an_output_directory_that_cannot_be_written_is_one_line(tmp_path, job):
    key, plain, _ = job
    if os.geteuid() == 0:
        context = mounted_tmpfs(tmp_path / "readonly", "ro,size=1m")
    else:
        (tmp_path / "readonly").mkdir(mode=0o555)
        context = contextlib.nullcontext(tmp_path / "readonly")
    with context as directory:
        result = aescl_run("encrypt", "--key-file", str(key), "-o", str(directory / "x"),
                           str(plain))
        assert result.returncode == EXIT_FAILED, result.stderr
        line = one_line(result.stderr)
        assert "read-only file system" in line or "permission denied" in line
        assert os.listdir(directory) == []


@pytest.mark.parametrize("force", [False, True])
def test_two_runs_writing_one_name(tmp_path, job, force):
    """Both start before the name exists. Without --force the first to finish takes
    the name and the other fails, replacing nothing; with it the last one wins. Either
    way the file is one run's whole output, never a mix."""
    key, *_ = job
    target = tmp_path / "shared.aescl"
    inputs = [os.urandom(3 << 20), os.urandom(3 << 20)]
    runs = [_started(tmp_path, key, target, *(["--force"] if force else [])) for _ in inputs]
    for run, data in zip(runs, inputs, strict=True):
        run.stdin.write(data)
        run.stdin.flush()
    results = []
    for run in runs:  # the first finishes before the second is let finish
        _, stderr = run.communicate(timeout=120)
        results.append((run.returncode, stderr.decode()))
    assert results[0][0] == 0, results[0][1]
    if force:
        assert results[1][0] == 0, results[1][1]
    else:
        assert results[1][0] == EXIT_FAILED
        assert "appeared while this run was writing it" in one_line(results[1][1])
    opened = aescl_run("decrypt", "--key-file", str(key), "-o", str(tmp_path / "opened"),
                       str(target))
    assert opened.returncode == 0, opened.stderr
    assert (tmp_path / "opened").read_bytes() == inputs[1 if force else 0]
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["k.key", "plain.bin", "plain.bin.aescl", "shared.aescl", "opened"])


def _bytes_read(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, KeyError):
        fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        return int(fields["rchar"])
    return 0


def test_an_input_that_shrinks_while_read_fails_and_leaves_nothing(tmp_path, job):
    """The input is cut short once the job has read its first piece (the OpenCL pipeline
    reads a file in pieces, ahead of the device): one line, exit 1, nothing written;
    never a shorter file that decrypts cleanly, never a crash."""
    if not Path(f"/proc/{os.getpid()}/io").exists():
        pytest.skip("no /proc/PID/io here to see how far the job has read")
    key, *_ = job
    device = an_opencl_device()
    source = tmp_path / "shrinking.bin"
    source.write_bytes(os.urandom(96 << 20))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    process = subprocess.Popen([AESCL, "encrypt", "--key-file", str(key), "--device",
                                device.id, "-o", str(out_dir / "x"), str(source)],
                               stderr=subprocess.PIPE)
    # Start-up reads a few MiB (modules, the key); then the input, a piece at a time.
    while process.poll() is None and _bytes_read(process.pid) < (24 << 20):
        time.sleep(0.005)
    os.truncate(source, 1 << 20)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == EXIT_FAILED, stderr
    assert "ended early" in one_line(stderr.decode())
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize("shape", ["file to stdout", "stdin to stdout", "stdin to -o"])
def test_output_that_is_its_own_input_is_refused(tmp_path, job, shape):
    """As `cat f >> f` is refused: the run would read what it writes."""
    key, plain, _ = job
    before = digest(plain)
    with open(plain, "rb") as stdin, open(plain, "ab") as appended:
        args = {"file to stdout": ["-o", "-", str(plain)],
                "stdin to stdout": ["-o", "-"],
                "stdin to -o": ["-o", str(plain), "--force"]}[shape]
        result = subprocess.run([AESCL, "encrypt", "--key-file", str(key), *args],
                                stdin=stdin, stdout=appended, stderr=subprocess.PIPE,
                                text=True, timeout=120)
    assert result.returncode == EXIT_USAGE
    assert "is the input file itself" in one_line(result.stderr)
    assert digest(plain) == before


def _read_fifo(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as stream:
            into.append(stream.read())
    reader = threading.Thread(target=read, daemon=True)  # (never holds up the suite)
    reader.start()
    return reader


@pytest.mark.parametrize("force", [False, True])
def test_a_fifo_output_is_written_as_a_stream_and_kept(tmp_path, job, force):
    key, plain, sealed = job
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _read_fifo(fifo, got)
    result = aescl_run("decrypt", "--key-file", str(key), "-o", str(fifo), str(sealed),
                       *(["--force"] if force else []))
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert got == [plain.read_bytes()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not a file in its place


def test_a_character_device_output_is_written_and_never_replaced(tmp_path, job):
    key, plain, _ = job
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        device = Path(os.devnull)  # not root: the system's own, which is never replaced
    for extra in ([], ["--force"]):
        result = aescl_run("encrypt", "--key-file", str(key), "-o", str(device), str(plain),
                           *extra)
        assert result.returncode == 0, result.stderr
        status = os.lstat(device)
        assert stat.S_ISCHR(status.st_mode) and status.st_rdev == os.makedev(1, 3)


def test_an_output_that_is_a_loop_of_links_is_one_line(tmp_path, job):
    key, plain, _ = job
    (tmp_path / "loop").symlink_to("loop")
    result = aescl_run("encrypt", "--key-file", str(key), "-o", str(tmp_path / "loop"),
                       str(plain))
    assert result.returncode == EXIT_USAGE
    assert "symbolic links" in one_line(result.stderr)


@pytest.mark.parametrize("args, code, says", [
    (["encrypt", "{plain}", "{plain}"], EXIT_USAGE, "two inputs would be written to the "
                                                    "same output"),
    (["encrypt", "{long_path}"], EXIT_USAGE, "File name too long"),
    (["encrypt", "{long_name}"], EXIT_USAGE, "File name too long"),
    (["encrypt", "--device", "", "{plain}"], EXIT_USAGE, "an empty spec"),
    (["encrypt", "--device", " ", "{plain}"], EXIT_USAGE, "an empty spec"),
    (["bench", "--sizes", ","], EXIT_USAGE, "no size in ','"),
    (["bench", "--min-time", "nan"], EXIT_USAGE, "nan is not a number of seconds"),
], ids=["two-inputs-one-output", "path-over-path-max", "default-name-too-long",
        "empty-device", "blank-device", "empty-sizes", "nan-min-time"])
def test_bad_input_is_refused_with_its_reason(tmp_path, job, args, code, says):
    key, plain, _ = job
    long_name = tmp_path / ("x" * 250)  # its default output name would be 256 bytes
    long_name.write_bytes(b"data")
    values = {"plain": str(plain), "long_name": str(long_name),
              "long_path": "/" + "a/" * 3000 + "f"}
    before = sorted(os.listdir(tmp_path))
    extra = ["--key-file", str(key)] if args[0] == "encrypt" else []
    result = aescl_run(args[0], *extra, *(a.format(**values) for a in args[1:]))
    assert result.returncode == code, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_devices_warns_when_aescl_device_names_nothing():
    result = aescl_run("devices", env={**os.environ, "AESCL_DEVICE": "bogus"})
    assert "warning: AESCL_DEVICE='bogus' names no device" in result.stderr
    quiet = aescl_run("devices", env={**os.environ, "AESCL_DEVICE": "host"})
    assert "warning" not in quiet.stderr


@pytest.mark.parametrize("kind", ["fifo", "character-device"])
def test_keygen_never_replaces_a_device_or_a_fifo(tmp_path, kind):
    """``keygen -o /dev/null --force`` unlinked /dev/null (as root)."""
    target = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(target)
    else:
        if os.geteuid() != 0:
            pytest.skip("making a character device needs root")
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # (/dev/null's numbers)
    before = target.stat()
    for force in ([], ["--force"]):
        result = aescl_run("keygen", "-o", str(target), *force)
        assert result.returncode == 2, result.stderr
        assert "not a regular file" in one_line(result.stderr)
    after = target.stat()
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode,
                                                            before.st_rdev)


def test_keygen_on_a_full_disk_leaves_nothing(tmp_path):
    """It left a 0-byte key file."""
    with mounted_tmpfs(tmp_path / "disk", "size=64k") as disk:
        filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(filler, bytes(4096))
        os.close(filler)
        result = aescl_run("keygen", "-o", str(disk / "k.key"))
        assert result.returncode == EXIT_FAILED, result.stderr
        assert "no space left" in one_line(result.stderr).lower()
        assert sorted(os.listdir(disk)) == ["filler"]


@pytest.mark.parametrize("option", ["--key-file", "--passphrase-file"])
def test_a_key_or_passphrase_file_that_never_ends_is_refused(tmp_path, option):
    """``--key-file /dev/zero`` read until memory ran out."""
    plain = tmp_path / "plain"
    plain.write_bytes(b"data")
    result = aescl_run("encrypt", option, "/dev/zero", "-o", str(tmp_path / "out"), str(plain))
    assert result.returncode == 2, result.stderr
    assert "must be a regular file, a pipe or -" in one_line(result.stderr)
    big = tmp_path / "big"
    big.write_bytes(b"a" * (1 << 20))
    result = aescl_run("encrypt", option, str(big), "-o", str(tmp_path / "out"), str(plain))
    assert result.returncode == 2 and "too large" in one_line(result.stderr)
    zeros = subprocess.run(f"head -c 100000000 /dev/zero | {AESCL} encrypt {option} - "
                           f"-o {tmp_path / 'out'} {plain}", shell=True, capture_output=True,
                           text=True, timeout=60)
    assert zeros.returncode == 2 and "too large" in one_line(zeros.stderr)
    assert not (tmp_path / "out").exists()


def test_a_key_file_may_come_through_a_pipe(tmp_path):
    key, plain = tmp_path / "k.key", tmp_path / "plain"
    assert aescl_run("keygen", "-o", str(key)).returncode == 0
    plain.write_bytes(os.urandom(5000))
    piped = subprocess.run(f"cat {key} | {AESCL} encrypt --key-file - -o {tmp_path / 's'} "
                           f"{plain}", shell=True, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    back = aescl_run("decrypt", "--key-file", str(key), "-o", str(tmp_path / "b"),
                     str(tmp_path / "s"))
    assert back.returncode == 0 and (tmp_path / "b").read_bytes() == plain.read_bytes()


def test_a_job_over_more_files_than_descriptors_leaves_no_part_after_kill_9(tmp_path, job):
    """Below files + 256 descriptors a job over several files fell back to named part
    files, which a ``kill -9`` left holding the whole plaintext. Now it runs a batch of
    unnamed parts at a time: killed after its first batch was published, it leaves those
    complete outputs and nothing else."""
    key, plain, _ = job
    sealed_dir, out_dir = tmp_path / "sealed", tmp_path / "out"
    sealed_dir.mkdir()
    out_dir.mkdir()
    names = [f"f{i:02}" for i in range(40)]
    contents = {}
    for name in names:
        contents[name] = os.urandom(1 << 20)
        (out_dir / name).write_bytes(contents[name])
    assert aescl_run("encrypt", "--key-file", str(key), "--device", "host",
                     *(str(out_dir / n) for n in names)).returncode == 0
    for name in names:
        (out_dir / f"{name}.aescl").rename(sealed_dir / f"{name}.aescl")
        (out_dir / name).unlink()

    def few_descriptors() -> None:  # room for 4 parts beside the 256 kept spare
        resource.setrlimit(resource.RLIMIT_NOFILE, (260, 260))

    process = subprocess.Popen(
        [AESCL, "decrypt", "--key-file", str(key), "--device", "host",
         *(str(sealed_dir / f"{n}.aescl") for n in names)],
        preexec_fn=few_descriptors, stderr=subprocess.PIPE, cwd=out_dir)
    deadline = time.monotonic() + 120
    while (process.poll() is None and time.monotonic() < deadline
           and not any(sealed_dir.glob("f*[0-9]"))):
        time.sleep(0.001)
    process.kill()
    process.wait()
    left = sorted(p.name for p in sealed_dir.iterdir() if not p.name.endswith(".aescl"))
    assert left, "the job ended before its first batch was published"
    for name in left:  # every output there is whole; no part, hidden or named
        assert name in contents, left
        assert (sealed_dir / name).read_bytes() == contents[name]


def _new_file_in_a_process(target: Path, setup: str, replace: bool, then: str,
                           ) -> subprocess.CompletedProcess:
    """A process of its own that runs ``setup``, makes an atomicfile.NewFile for
    ``target``, writes b'plaintext' into it and runs ``then`` (``part`` is the file)."""
    return subprocess.run(
        [sys.executable, "-c",
         f"import os, sys\n{setup}\nfrom aescl import atomicfile\n"
         f"part = atomicfile.NewFile(sys.argv[1], replace={replace})\n"
         f"os.write(part.fd, b'plaintext')\n{then}", str(target)])


def test_where_files_cannot_be_unnamed_a_kill_9_leaves_a_private_part_the_next_run_removes(
        tmp_path):
    """Without O_TMPFILE a part has a hidden name from the start: a ``kill -9`` leaves it
    (mode 0600, docs/security.md), and the next run in that directory removes it."""
    without_tmpfile = "del os.O_TMPFILE"
    killed = _new_file_in_a_process(tmp_path / "out", without_tmpfile, False,
                                    "os.kill(os.getpid(), 9)")
    assert killed.returncode == -signal.SIGKILL
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".aescl.") and left.name.endswith(".part")
    assert stat.S_IMODE(left.stat().st_mode) == 0o600
    assert _new_file_in_a_process(tmp_path / "out", without_tmpfile, False,
                                  "part.publish()").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_hidden_name_left_by_a_killed_replacing_run_is_removed_by_the_next(tmp_path):
    """Replacing an output (--force) names the finished file for a moment before the
    rename over the output: a ``kill -9`` in that moment leaves it, whole (authenticated
    plaintext, when decrypting). The next run that replaces a file there removes it."""
    killed = _new_file_in_a_process(
        tmp_path / "out", "", True,
        "atomicfile.publish_path = lambda *args: os.kill(os.getpid(), 9)\npart.publish()")
    assert killed.returncode == -signal.SIGKILL
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".aescl.") and left.read_bytes() == b"plaintext"
    assert _new_file_in_a_process(tmp_path / "out", "", True,
                                  "part.publish()").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
