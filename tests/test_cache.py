"""aescl/_cache.py: the cache is used only where it is the user's own. Folders are made
0700 whatever the umask; a folder or entry that another user owns, or that others can
write, is passed over with one line on stderr; entries are read only from regular files
of bounded size (a FIFO used to hang every run); the ICD vendors directory follows the
same rule."""

from __future__ import annotations

import os
import stat
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from Crypto.Cipher import AES

import aescl
from aescl import _cache, _icd, rates
from aescl.devices import host_device
from conftest import selected_devices


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("AESCL_CACHE_DIR", str(root))
    monkeypatch.delenv("AESCL_NO_CACHE", raising=False)
    monkeypatch.delenv("AESCL_TUNE", raising=False)
    monkeypatch.setattr(_cache, "_said", set())
    return root


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_are_made_0700_and_entries_0600_whatever_the_umask(own_cache):
    previous = os.umask(0)
    try:
        _cache.write_cache_file(own_cache / "kernels" / "entry", b"binary")
    finally:
        os.umask(previous)
    assert (_mode(own_cache), _mode(own_cache / "kernels")) == (0o700, 0o700)
    assert _mode(own_cache / "kernels" / "entry") == 0o600
    assert _cache.read_cache_file(own_cache / "kernels" / "entry", 100) == b"binary"


@pytest.mark.parametrize("how", ["others-can-write-the-folder", "others-can-write-the-entry",
                                 "another-user-owns-the-entry"])
def test_an_entry_others_could_have_written_is_not_used(own_cache, capsys, how):
    entry = own_cache / "kernels" / "entry"
    _cache.write_cache_file(entry, b"binary")
    if how == "others-can-write-the-folder":
        entry.parent.chmod(0o777)
    elif how == "others-can-write-the-entry":
        entry.chmod(0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(entry, 65534, 65534)
    assert _cache.read_cache_file(entry, 100) is None
    assert _cache.read_cache_file(entry, 100) is None
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and str(entry.parent if "folder" in how else entry) in said[0]
    _cache.write_cache_file(own_cache / "kernels" / "other", b"x")
    if "folder" in how:  # nothing is written into it either
        assert not (own_cache / "kernels" / "other").exists()


def test_an_entry_that_is_not_a_regular_file_or_too_large_is_not_read(own_cache):
    folder = _cache.private_folder(own_cache / "tuning")
    assert folder is not None
    os.mkfifo(folder / "fifo")
    (folder / "large").write_bytes(bytes(101))
    (folder / "link").symlink_to(folder / "large")
    for name in ("fifo", "large", "link", "missing"):
        assert _cache.read_cache_file(folder / name, 100) is None, name


def test_rates_stored_as_a_fifo_do_not_hang_a_run(own_cache):
    path = rates.rates_path()
    assert _cache.private_folder(path.parent) is not None
    os.mkfifo(path)
    answers = []
    reader = threading.Thread(target=lambda: answers.append(
        rates.stored_rate(host_device(), "blocks")), daemon=True)
    reader.start()
    reader.join(20)
    assert answers == [None]


@pytest.mark.parametrize("record", [{"blocks": -3.0}, {"blocks": True}, {"blocks": 1e12},
                                    {"start-seconds": 1e9}, {"blocks": "fast"}])
def test_rates_that_no_measurement_gives_are_ignored(own_cache, record, capsys):
    path = rates.rates_path()
    assert _cache.private_folder(path.parent) is not None
    path.write_text(__import__("json").dumps({rates.device_key(host_device()): record}))
    assert rates.stored_rate(host_device(), "blocks") is None
    assert rates.stored_rate(host_device(), rates.START) is None
    (said,) = capsys.readouterr().err.splitlines()
    assert "ignoring figures" in said


def _cpu_device() -> aescl.Device:
    cpus = [d for d in selected_devices() if d.type == "cpu"]
    if not cpus:
        pytest.skip("no OpenCL CPU device on this machine")
    return cpus[0]


@pytest.mark.parametrize("planted", ["others-can-write", "out-of-range", "wrong-type"])
def test_a_planted_tuning_record_does_not_change_what_the_kernels_compute(own_cache, planted):
    """A record asking for ``max_work_groups: 0`` made every OpenCL output zeros, exit 0."""
    from aescl.engines.opencl import tuning

    device = _cpu_device()
    good = tuning.tune(device, tuning.candidates(device)[:1], data_bytes=1 << 16)
    bad = replace(good, chosen=replace(good.chosen, max_work_groups=0 if planted != "wrong-type"
                                       else "8"))  # (a TypeError from OpenCL: a traceback)
    tuning.store(device, bad)
    tuning._memory.clear()
    tuning._configs.clear()
    if planted == "others-can-write":  # (in range otherwise: only the folder tells)
        tuning.store(device, replace(good, chosen=replace(good.chosen, max_work_groups=1)))
        tuning._configs.clear()
        tuning.tuning_path(device).parent.chmod(0o777)
        tuning._memory.clear()
    assert tuning.stored(device) is None
    key, nonce, data = os.urandom(16), os.urandom(8), os.urandom(1 << 16)
    got = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device).encrypt(data)
    assert got == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data)


def _report() -> _icd.IcdReport:
    return _icd.IcdReport(Path("/nonexistent"), (),
                          {"nvidia": Path("/usr/lib/libnvidia-opencl.so.1")})


def test_a_vendors_directory_with_other_entries_is_not_reused(own_cache):
    parent = own_cache / "icd"
    first = _icd.write_private_vendors_dir(_report(), parent)
    assert [p.name for p in first.iterdir()] == ["aescl-nvidia.icd"]
    (first / "planted.icd").write_text("/tmp/planted.so\n")
    second = _icd.write_private_vendors_dir(_report(), parent)
    assert [p.name for p in second.iterdir()] == ["aescl-nvidia.icd"]
    assert _mode(parent) == 0o700


def test_a_vendors_directory_is_not_made_in_a_folder_others_can_write(own_cache):
    parent = own_cache / "icd"
    parent.mkdir(parents=True)
    parent.chmod(0o777)
    made = _icd.write_private_vendors_dir(_report(), parent)
    assert parent not in made.parents and _mode(made) == 0o700
    assert [p.name for p in made.iterdir()] == ["aescl-nvidia.icd"]


def test_the_cache_root_follows_its_settings_as_they_change(monkeypatch, tmp_path):
    """The root is worked out once a setting (it is read before every job's device
    choice), so a changed setting must give a new one, and the old one back after."""
    from aescl._cache import cache_root

    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "one"))
    assert cache_root() == tmp_path / "one"
    assert rates.rates_path() == tmp_path / "one" / "tuning" / "rates.json"
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "two"))
    assert rates.rates_path() == tmp_path / "two" / "tuning" / "rates.json"
    monkeypatch.delenv("AESCL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache_root() == tmp_path / "xdg" / "aescl"
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "one"))
    assert cache_root() == tmp_path / "one"
