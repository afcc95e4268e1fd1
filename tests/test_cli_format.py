"""``aescl encrypt/decrypt`` in the authenticated file format, run as a user runs it.

Real subprocesses on real files: round trips with a key file, a passphrase
(environment, file, and a real terminal prompt) and stdin/stdout; a tamper
corpus where every case must exit non-zero and leave the directory exactly as
it was; bounded memory; and the refusals.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from aescl import chunked
from aescl.devices import cuda_devices
from conftest import an_opencl_device
from test_cli import AESCL

CHUNK, SEALED = chunked.CHUNK_SIZE, chunked.SEALED_CHUNK_SIZE
KEY_HEADER = 8  # magic, version, key source
FAST_SCRYPT = ["--work-factor", "10"]


def aescl(*args: str, stdin: bytes | None = None, env: dict | None = None, cwd=None):
    return subprocess.run([AESCL, *args], input=stdin, capture_output=True, timeout=300,
                          check=False, env={**os.environ, **(env or {})}, cwd=cwd)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def keyed(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "k.key"
    result = aescl("keygen", "-o", str(key))
    assert result.returncode == 0, result.stderr
    plain = tmp_path / "doc.bin"
    plain.write_bytes(os.urandom(2 * CHUNK + 100))
    return key, plain


def test_keygen_writes_a_private_hex_key(tmp_path):
    key = tmp_path / "k.key"
    assert aescl("keygen", "-o", str(key)).returncode == 0
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(bytes.fromhex(key.read_text().strip())) == 32
    before = key.read_bytes()
    refused = aescl("keygen", "-o", str(key))
    assert refused.returncode == 2 and b"exists" in refused.stderr
    assert key.read_bytes() == before
    assert aescl("keygen", "-o", str(key), "--force").returncode == 0
    assert key.read_bytes() != before


def test_key_file_round_trip_with_default_names(tmp_path, keyed):
    key, plain = keyed
    assert aescl("encrypt", "--key-file", str(key), str(plain)).returncode == 0
    sealed = tmp_path / "doc.bin.aescl"
    assert len(sealed.read_bytes()) == KEY_HEADER + chunked.sealed_size(2 * CHUNK + 100)
    original = plain.read_bytes()
    plain.unlink()
    result = aescl("decrypt", "--key-file", str(key), str(sealed))
    assert result.returncode == 0, result.stderr
    assert plain.read_bytes() == original
    # A key file of 32 raw bytes works as well as the hex form.
    raw_key = tmp_path / "raw.key"
    raw_key.write_bytes(bytes.fromhex(key.read_text()))
    out = aescl("decrypt", "--key-file", str(raw_key), str(sealed), "-o", "-")
    assert out.stdout == original


def test_stdin_to_stdout_round_trip(keyed):
    key, plain = keyed
    sealed = aescl("encrypt", "--key-file", str(key), stdin=plain.read_bytes())
    assert sealed.returncode == 0 and sealed.stdout.startswith(b"aescl\0")
    back = aescl("decrypt", "--key-file", str(key), "-", "-o", "-", stdin=sealed.stdout)
    assert back.returncode == 0 and back.stdout == plain.read_bytes()


def test_passphrase_from_environment_and_file(tmp_path, keyed):
    _, plain = keyed
    env = {"AESCL_PASSPHRASE": "correct horse"}
    assert aescl("encrypt", *FAST_SCRYPT, str(plain), "-o", str(tmp_path / "p.aescl"),
                 env=env).returncode == 0
    secret = tmp_path / "pass.txt"
    secret.write_text("correct horse\n")
    result = aescl("decrypt", "--passphrase-file", str(secret), str(tmp_path / "p.aescl"),
                   "-o", "-")
    assert result.returncode == 0 and result.stdout == plain.read_bytes()

    before = snapshot(tmp_path)
    wrong = aescl("decrypt", str(tmp_path / "p.aescl"), "-o", str(tmp_path / "out"),
                  env={"AESCL_PASSPHRASE": "wrong"})
    assert wrong.returncode == 3
    assert wrong.stderr.decode().strip() == "aescl: wrong key or passphrase"
    assert snapshot(tmp_path) == before


def _run_on_terminal(args: list[str], answers: list[bytes]) -> tuple[int, bytes]:
    """Run aescl with a real controlling terminal, answering each prompt in turn."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: become aescl, and never return into pytest
        try:
            os.execv(AESCL, [AESCL, *args])
        finally:
            os._exit(127)
    seen, deadline = b"", time.monotonic() + 120
    pending = list(answers)
    status = None  # (the child's, once reaped: it is reaped once, and its output read out)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 1)
        if ready:
            try:
                chunk = os.read(terminal, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if pending and seen.rstrip().endswith(b":"):
                os.write(terminal, pending.pop(0) + b"\n")
                seen += b"<answered>"
        elif status is not None:
            break
        if status is None:
            reaped, code = os.waitpid(pid, os.WNOHANG)
            status = code if reaped else None
    else:
        os.kill(pid, signal.SIGKILL)
    if status is None:
        _, status = os.waitpid(pid, 0)
    os.close(terminal)
    return os.waitstatus_to_exitcode(status), seen


def test_passphrase_prompt_asks_twice_and_does_not_echo(tmp_path, keyed):
    _, plain = keyed
    sealed = tmp_path / "t.aescl"
    code, transcript = _run_on_terminal(
        ["encrypt", "--passphrase", *FAST_SCRYPT, "-q", str(plain), "-o", str(sealed)],
        [b"s3cret phrase", b"s3cret phrase"],
    )
    assert code == 0, transcript
    assert transcript.count(b"<answered>") == 2 and b"Repeat" in transcript
    assert b"s3cret" not in transcript
    code, transcript = _run_on_terminal(
        ["decrypt", "-q", str(sealed), "-o", str(tmp_path / "t.out")], [b"s3cret phrase"]
    )
    assert code == 0, transcript
    assert (tmp_path / "t.out").read_bytes() == plain.read_bytes()


def test_invalid_text_typed_at_the_prompt_is_one_line(tmp_path, keyed):
    """Bytes that are not UTF-8 typed at the passphrase prompt were a traceback."""
    _, plain = keyed
    code, transcript = _run_on_terminal(
        ["encrypt", "--passphrase", *FAST_SCRYPT, "-q", str(plain), "-o",
         str(tmp_path / "t.aescl")], [b"\xff\xfe bad"])
    assert code == 2, transcript
    assert b"Traceback" not in transcript
    assert b"aescl: the passphrase typed is not valid text" in transcript
    assert not (tmp_path / "t.aescl").exists()


def _file_tamper_cases(sealed: bytes, key_file: Path, other_key: Path):
    payload = KEY_HEADER
    boundaries = [payload + 56 + k * SEALED for k in range(3)]
    cases = {
        "magic": (sealed[:1] + b"X" + sealed[2:], key_file, "not an aescl file"),
        "version": (sealed[:6] + b"\x07" + sealed[7:], key_file, "version"),
        "key source": (sealed[:7] + b"\x02" + sealed[8:], key_file, "passphrase|scrypt"),
        "payload salt": (_flip(sealed, payload + 5), key_file, "wrong key or passphrase"),
        "commitment": (_flip(sealed, payload + 40), key_file, "wrong key or passphrase"),
        "chunk 0 body": (_flip(sealed, boundaries[0] + 7), key_file, "chunk 0"),
        "chunk 1 tag": (_flip(sealed, boundaries[2] - 3), key_file, "chunk 1"),
        "final chunk": (_flip(sealed, len(sealed) - 20), key_file, "chunk 2"),
        "appended": (sealed + b"more", key_file, "chunk 2"),
        "chunks swapped": (sealed[: boundaries[0]] + sealed[boundaries[1] : boundaries[2]]
                           + sealed[boundaries[0] : boundaries[1]] + sealed[boundaries[2] :],
                           key_file, "chunk 0"),
        "wrong key": (sealed, other_key, "wrong key or passphrase"),
    }
    for boundary in [0, 4, payload, payload + 56, *boundaries, len(sealed)]:
        for cut in (boundary - 1, boundary, boundary + 1):
            if 0 <= cut < len(sealed):
                cases[f"cut at {cut}"] = (sealed[:cut], key_file, "truncated")
    return cases


def _flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0x04
    return bytes(out)


def test_tamper_corpus_exits_non_zero_and_leaves_nothing(tmp_path, keyed):
    key, plain = keyed
    assert aescl("encrypt", "--key-file", str(key), str(plain)).returncode == 0
    sealed = (tmp_path / "doc.bin.aescl").read_bytes()
    other = tmp_path / "other.key"
    assert aescl("keygen", "-o", str(other)).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    for name, (data, key_file, words) in _file_tamper_cases(sealed, key, other).items():
        victim = work / "victim.aescl"
        victim.write_bytes(data)
        before = snapshot(work)
        for target in (str(work / "victim"), "-"):
            result = aescl("decrypt", "--key-file", str(key_file), str(victim), "-o", target)
            message = result.stderr.decode()
            assert result.returncode in (2, 3), (name, message)
            assert len(message.strip().splitlines()) == 1, (name, message)
            assert re.search(words, message), (name, message)
            assert snapshot(work) == before, name
            if target == "-":  # nothing unauthenticated reaches standard output
                assert plain.read_bytes().startswith(result.stdout), name


def test_stdout_gets_only_the_authenticated_chunks(tmp_path, keyed):
    key, plain = keyed
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(5 * CHUNK + 9))
    assert aescl("encrypt", "--key-file", str(key), str(big)).returncode == 0
    sealed = (tmp_path / "big.bin.aescl").read_bytes()
    damaged = tmp_path / "damaged.aescl"
    damaged.write_bytes(_flip(sealed, KEY_HEADER + 56 + 3 * SEALED + 10))
    result = aescl("decrypt", "--key-file", str(key), "--batch-chunks", "1", str(damaged),
                   "-o", "-")
    assert result.returncode == 3 and b"chunk 3" in result.stderr
    assert result.stdout == big.read_bytes()[: 3 * CHUNK]


def test_memory_stays_bounded_for_a_large_file(tmp_path, keyed):
    # 96 MiB through 2-chunk batches must not cost anything like 96 MiB of memory.
    key, _ = keyed
    small, large = tmp_path / "small.bin", tmp_path / "large.bin"
    small.write_bytes(b"s" * 1000)
    with open(large, "wb") as handle:
        for _ in range(96):
            handle.write(os.urandom(1 << 20))

    def peak_rss_kib(path: Path) -> int:
        code = (
            "import resource, subprocess, sys; "
            "subprocess.run(sys.argv[1:], check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        result = subprocess.run(
            ["python3", "-c", code, AESCL, "encrypt", "--key-file", str(key),
             "--batch-chunks", "2", "-q", str(path), "-o", str(path) + ".aescl"],
            capture_output=True, text=True, timeout=600, check=True,
        )
        return int(result.stdout.strip())

    growth_mib = (peak_rss_kib(large) - peak_rss_kib(small)) / 1024
    assert growth_mib < 40, growth_mib
    size = large.stat().st_size
    assert (tmp_path / "large.bin.aescl").stat().st_size == KEY_HEADER + chunked.sealed_size(size)


def test_refusals(tmp_path, keyed):
    key, plain = keyed
    before = snapshot(tmp_path)
    cases = [
        (["encrypt", str(plain)], "choose a key"),
        (["encrypt", "--key-file", str(key), "--passphrase", str(plain)], "choose one key"),
        (["encrypt", "--key-file", str(plain), str(plain), "-o", "x"], "not a key file"),
        (["encrypt", "--key-file", str(key), "--key", "00" * 16, str(plain)], "only apply"),
        (["encrypt", "--key-file", str(key), str(plain), "-o", str(plain)], "input file"),
        (["encrypt", "--key-file", str(key), str(plain), "-o", str(key)], "exists"),
        # found only once the output is open (its room is reserved meanwhile)
        (["encrypt", "--key-file", str(key), "--device", "no-such-device", str(plain)],
         "no device matches"),
    ]
    if not cuda_devices():  # (where there is one, files run on it: the test below)
        cases.append((["encrypt", "--key-file", str(key), "--device", "cuda", str(plain)],
                      "no CUDA GPU for 'cuda'"))
    for args, words in cases:
        result = aescl(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert words.encode() in result.stderr, (args, result.stderr)
        assert snapshot(tmp_path) == before

    # A key-file file asked to decrypt with a passphrase says which key it needs.
    assert aescl("encrypt", "--key-file", str(key), str(plain)).returncode == 0
    result = aescl("decrypt", str(tmp_path / "doc.bin.aescl"), "-o", str(tmp_path / "o"),
                   env={"AESCL_PASSPHRASE": "x"})
    assert result.returncode == 2 and b"key file" in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not cuda_devices(), reason="no CUDA GPU on this machine: --device cuda "
                                              "is refused (test_refusals)")
def test_a_file_round_trips_through_the_cuda_engine(tmp_path, keyed):
    key, plain = keyed
    sealed, opened = tmp_path / "cuda.aescl", tmp_path / "cuda.out"
    for args in (["encrypt", str(plain), "-o", str(sealed)],
                 ["decrypt", str(sealed), "-o", str(opened)]):
        result = aescl(args[0], "--key-file", str(key), "--device", "cuda", *args[1:])
        assert result.returncode == 0, result.stderr
    assert opened.read_bytes() == plain.read_bytes()


def test_split_jobs_round_trip_on_the_command_line(tmp_path, keyed):
    # --device all (every GPU and the host engine) and a repeated --device: the same
    # files come out as from one device.
    key, _ = keyed
    plain = tmp_path / "split.bin"
    plain.write_bytes(os.urandom(3 * (1 << 20) + 77))
    cpu = an_opencl_device()  # an OpenCL device beside the host engine
    for name, devices in (("all", ["--device", "all"]),
                          ("listed", ["--device", "host", "--device", cpu.id])):
        sealed = tmp_path / f"{name}.aescl"
        result = aescl("encrypt", "--key-file", str(key), *devices, str(plain), "-o", str(sealed))
        assert result.returncode == 0, result.stderr
        back = tmp_path / f"{name}.out"
        result = aescl("decrypt", "--key-file", str(key), "--device", cpu.id, str(sealed),
                       "-o", str(back))
        assert result.returncode == 0, result.stderr
        assert back.read_bytes() == plain.read_bytes()
        result = aescl("decrypt", "--key-file", str(key), *devices, str(sealed), "-o", "-")
        assert result.returncode == 0 and result.stdout == plain.read_bytes(), result.stderr
    result = aescl("encrypt", "--key-file", str(key), "--device", "host", "--device", "nope",
                   str(plain), "-o", str(tmp_path / "never"))
    assert result.returncode == 2 and b"nope" in result.stderr
    assert not (tmp_path / "never").exists()


def test_devices_lists_the_host_engine():
    import json

    listed = json.loads(aescl("devices", "--json").stdout)["devices"]
    assert listed[-1]["id"] == "host" and listed[-1]["type"] == "host"
    assert "host" in aescl("devices").stdout.decode()


@pytest.mark.slow
def test_the_largest_advertised_work_factor_works_and_the_next_is_refused(tmp_path, keyed):
    """--work-factor 20 (1 GiB of scrypt memory) round trips; 21 is outside the range."""
    _, plain = keyed
    env = {"AESCL_PASSPHRASE": "correct horse"}
    sealed = tmp_path / "p.aescl"
    result = aescl("encrypt", "--work-factor", "20", str(plain), "-o", str(sealed), env=env)
    assert result.returncode == 0, result.stderr
    assert sealed.read_bytes()[8] == 20
    result = aescl("decrypt", str(sealed), "-o", "-", env=env)
    assert result.returncode == 0 and result.stdout == plain.read_bytes(), result.stderr
    refused = aescl("encrypt", "--work-factor", "21", str(plain), "-o", str(tmp_path / "x"),
                    env=env)
    assert refused.returncode == 2 and b"10<=x<=20" in refused.stderr
    assert "20 1 GiB" in " ".join(aescl("encrypt", "--help").stdout.decode().split())


@pytest.mark.parametrize("sealed_with, opened_with, opens", [
    (("env", "pw\n"), ("file", "pw\n"), True),
    (("env", "pw\n"), ("file", "pw\r\n"), True),
    (("env", "pw\n"), ("env", "pw"), True),
    (("file", "pw\n"), ("env", "pw"), True),
    (("file", "pw\n\n"), ("env", "pw\n\n"), True),  # one line end goes, the other stays
    (("file", "pw\n\n"), ("env", "pw\n"), False),
    (("env", "pw "), ("file", "pw\n"), False),  # spaces are part of it
])
def test_one_passphrase_rule_for_file_and_variable(tmp_path, keyed, sealed_with, opened_with,
                                                   opens):
    _, plain = keyed

    def source(how: tuple[str, str]) -> tuple[list[str], dict]:
        kind, text = how
        if kind == "env":
            return [], {"AESCL_PASSPHRASE": text}
        secret = tmp_path / f"pass-{len(list(tmp_path.iterdir()))}.txt"
        secret.write_bytes(text.encode())
        return ["--passphrase-file", str(secret)], {"AESCL_PASSPHRASE": "unused"}

    args, env = source(sealed_with)
    sealed = tmp_path / "p.aescl"
    assert aescl("encrypt", *FAST_SCRYPT, *args, str(plain), "-o", str(sealed),
                 env=env).returncode == 0
    args, env = source(opened_with)
    result = aescl("decrypt", *args, str(sealed), "-o", "-", env=env)
    assert (result.returncode == 0 and result.stdout == plain.read_bytes()) == opens
    if not opens:
        assert result.returncode == 3


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_job_over_several_files_never_writes_over_one_of_its_inputs(tmp_path, keyed, force):
    """``encrypt --force a a.aescl`` replaced the input a.aescl with a's output."""
    key, plain = keyed
    other = tmp_path / "doc.bin.aescl"  # doc.bin's output, and an input of its own
    other.write_bytes(os.urandom(1000))
    before = snapshot(tmp_path)
    result = aescl("encrypt", "--key-file", str(key), *force, str(plain), str(other))
    assert result.returncode == 2, result.stderr
    assert b"is one of the inputs" in result.stderr
    assert snapshot(tmp_path) == before
