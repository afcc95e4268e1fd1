"""Start-up: ``import aescl``, the CLI and a small job on the default device import
neither numpy nor pyopencl, and never look for OpenCL (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "pyopencl")


def _loaded_after(code: str, cwd) -> list[str]:
    """The heavy modules loaded once ``code`` ran in a new interpreter, started in ``cwd``
    (not the repository, whose ``aescl/`` would shadow the installed package)."""
    check = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    env_free = "import os; os.environ.pop('AESCL_DEVICE', None)\n"
    result = subprocess.run([sys.executable, "-c", env_free + check], capture_output=True,
                            text=True, cwd=cwd, timeout=120)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout.strip().splitlines()[-1])


def test_import_aescl_and_the_cli_load_neither(tmp_path):
    assert _loaded_after("import aescl, aescl.chunked, aescl.fileformat, aescl.cli.main",
                         tmp_path) == []


def test_a_small_default_job_loads_neither(tmp_path):
    code = """
import os
import aescl
from aescl import chunked
from Crypto.Cipher import AES
key, iv, data = os.urandom(16), os.urandom(16), os.urandom(100_000)
ours = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
assert ours == AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
assert aescl.new(key, aescl.MODE_ECB).decrypt(aescl.new(key, aescl.MODE_ECB).encrypt(
    data[:4096])) == data[:4096]
k32 = os.urandom(32)
assert chunked.decrypt(k32, chunked.encrypt(k32, data)) == data
from aescl.devices import opencl_started
assert not opencl_started()
"""
    assert _loaded_after(code, tmp_path) == []


@pytest.mark.parametrize("device_args", [(), ("--device", "host")])
def test_the_cli_encrypts_and_decrypts_a_small_file_without_them(tmp_path, device_args):
    (tmp_path / "small.bin").write_bytes(b"x" * 1024)
    code = f"""
import aescl.cli.main as cli
for args in (["keygen", "-o", "k.key"],
             ["encrypt", "--key-file", "k.key", *{device_args!r}, "small.bin"],
             ["decrypt", "--key-file", "k.key", *{device_args!r}, "-o", "back.bin",
              "small.bin.aescl"]):
    try:
        cli.main(args)
    except SystemExit as done:
        assert done.code in (0, None), (args, done.code)
"""
    assert _loaded_after(code, cwd=tmp_path) == []
    assert (tmp_path / "back.bin").read_bytes() == b"x" * 1024


@pytest.mark.parametrize("args", [["--help"], ["bench", "--help"], ["encrypt", "--help"],
                                  ["encrypt", "--no-such-option"], ["bench", "--sizes", "x"]])
def test_help_and_argument_errors_load_neither(tmp_path, args):
    code = f"""
import aescl.cli.main as cli
try:
    cli.main({args!r})
except SystemExit as done:
    assert done.code in (0, 2, None), done.code
"""
    assert _loaded_after(code, cwd=tmp_path) == []


def test_the_public_surface_is_what_users_call():
    """``aescl.__all__`` names the API, the errors and the two public formats; the
    house's inner rooms (scheduler, teams, chunkformat, an engine's tuning) are not
    exported, and ``aescl.tuning`` is gone (the OpenCL engine's, reached from the top)."""
    import aescl

    assert set(aescl.__all__) == {
        "AESGCM", "MODE_CTR", "MODE_ECB", "MODE_GCM", "CtrCipher", "EcbCipher", "GcmCipher",
        "Device", "new", "pinned_empty", "get_device", "list_devices", "devices", "chunked",
        "fileformat", "AesclError", "AuthenticationError", "CounterOverflowError",
        "DeviceNotFound", "DeviceUnavailable", "FormatError", "KernelBuildError", "KeySourceError",
        "KeystreamReuseError", "NoPlatformError", "PaddingError", "TruncatedError",
        "WrongKeyError",
    }
    assert all(hasattr(aescl, name) for name in aescl.__all__)
    with pytest.raises(AttributeError):
        aescl.tuning  # noqa: B018
