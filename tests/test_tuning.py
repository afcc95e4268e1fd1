"""Per-device autotuning (aescl/tuning.py): candidates, the measurement, storage, and that
every tuned setting gives the same output."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import chunked
from aescl.engines.opencl import kernels, tuning
from test_devices import fake


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, so that stored tunings do not leak."""
    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AESCL_NO_CACHE", raising=False)
    monkeypatch.delenv("AESCL_TUNE", raising=False)
    return tmp_path / "cache"


def _small_tuning(device: aescl.Device) -> tuning.Tuning:
    """A quick tuning: the default and a few other settings on 1 MiB."""
    found = tuning.candidates(device)
    return tuning.tune(device, [found[0], *found[1:4], found[-1]], data_bytes=1 << 20)


def test_candidates_start_with_the_default_and_fit_the_device():
    for device in (fake("0:0", "NVIDIA H200", "nvidia", "gpu", units=132),
                   fake("1:0", "gfx90a", "amd", "gpu", units=104),
                   fake("2:0", "pthread", "pocl", "cpu", units=16)):
        found = tuning.candidates(device)
        assert found[0] == tuning.checked_default_config(device)
        assert len(found) == len(set(found)) > 1
        for config in found:
            assert config.work_group_size <= device.max_work_group_size
            assert config.table_lanes <= config.work_group_size
            assert config.table_lanes & (config.table_lanes - 1) == 0
            if device.type == "gpu":
                local = config.table_lanes * 1024 + 8192  # the copies and what sits beside
                assert local <= device.local_mem_bytes
            else:
                assert config.table_lanes == 1 and not config.tables_in_local
        assert {c.work_group_size for c in found} >= {64, 256}
    gpu = tuning.candidates(fake("0:0", "NVIDIA H200", "nvidia", "gpu", units=132))
    assert {c.table_lanes for c in gpu} == {1, 2, 4, 8, 16, 32}


def test_tuning_chooses_the_fastest_verified_setting(device, own_cache):
    result = _small_tuning(device)
    assert result.chosen.verified is True
    assert result.chosen.gb_s == max(t.gb_s for t in result.trials if t.gb_s is not None)
    assert result.default == tuning._trial(tuning.checked_default_config(device),
                                           result.default.gb_s, result.default.verified)
    assert result.data_bytes == 1 << 20 and len(result.trials) == 5


def test_a_stored_tuning_is_what_later_launches_use(device, own_cache, monkeypatch):
    if device.type == "simulator":
        pytest.skip("the simulator keeps its small default groups whatever is stored")
    if device.type == "cpu":  # CPUs are not tuned unless asked; GPUs are on first use
        assert tuning.launch_config(device) == tuning.checked_default_config(device)
        assert not tuning.tuning_path(device).exists()
    result = _small_tuning(device)
    chosen = replace(result.chosen, work_group_size=16, max_work_groups=device.compute_units)
    tuning.store(device, replace(result, chosen=chosen))
    assert tuning.tuning_path(device).is_file()
    assert tuning.stored(device) == replace(result, chosen=chosen)
    after = tuning.launch_config(device)
    assert (after.work_group_size, after.max_work_groups) == (16, device.compute_units)
    described = tuning.describe(device)
    assert described["work_group_size"] == 16 and described["tuned"]["trials"] == 5

    # AESCL_TUNE=0 keeps the defaults whatever is stored.
    monkeypatch.setenv("AESCL_TUNE", "0")
    assert tuning.launch_config(device) == tuning.checked_default_config(device)
    assert tuning.describe(device)["tuned"] is None


def test_a_damaged_or_outdated_stored_tuning_is_ignored(device, own_cache):
    result = _small_tuning(device)
    tuning.store(device, result)
    path = tuning.tuning_path(device)
    path.write_text("{not json")
    assert tuning.stored(device) is None
    path.write_text('{"version": 0}')
    assert tuning.stored(device) is None
    config = tuning.launch_config(device)
    if device.type == "gpu":  # tuned again on this use, and the new tuning kept
        again = tuning.stored(device)
        assert again is not None and again.date >= result.date
        assert (config.work_group_size, config.max_work_groups) == (
            again.chosen.work_group_size, again.chosen.max_work_groups)
    else:  # CPUs and the simulator keep their defaults until tuned on request
        assert config == tuning.checked_default_config(device)


def test_a_bad_tune_setting_is_refused(monkeypatch):
    monkeypatch.setenv("AESCL_TUNE", "yes")
    with pytest.raises(ValueError, match="AESCL_TUNE must be 0 or 1"):
        tuning.tuning_enabled()


@pytest.mark.parametrize("group,per_unit", [(16, 1), (256, 16)])
def test_every_tuned_setting_gives_the_same_output(device, own_cache, group, per_unit):
    result = _small_tuning(device)
    chosen = replace(result.chosen, work_group_size=group,
                     max_work_groups=device.compute_units * per_unit)
    tuning.store(device, replace(result, chosen=chosen))
    assert tuning.launch_config(device).work_group_size == group
    key, nonce = os.urandom(32), os.urandom(12)
    data = os.urandom(3 * chunked.CHUNK_SIZE + 77)
    ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8], device=device).encrypt(data)
    assert ctr == AES.new(key, AES.MODE_CTR, nonce=nonce[:8]).encrypt(data)
    ecb = aescl.new(key, aescl.MODE_ECB, device=device).decrypt(data[:4096])
    assert ecb == AES.new(key, AES.MODE_ECB).decrypt(data[:4096])
    sealed, tag = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device
                            ).encrypt_and_digest(data)
    assert (sealed, tag) == AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(data)
    message = np.frombuffer(os.urandom(5 * chunked.CHUNK_SIZE + 9), np.uint8)
    sealed_message = chunked.encrypt(key, message, device=device)
    assert bytes(chunked.decrypt(key, sealed_message, device=device)) == message.tobytes()


@pytest.mark.parametrize("contiguous", [False, True], ids=["grid-stride", "contiguous"])
def test_both_block_mappings_give_the_same_output(device, monkeypatch, contiguous):
    """aes_core.cl's AES_CONTIGUOUS_RUNS, whatever the device's default: uneven spans,
    work-items with nothing to do, and runs cut by the end of the data."""
    default_config = tuning.default_config
    monkeypatch.setattr(tuning, "default_config",
                        lambda d: replace(default_config(d), contiguous_runs=contiguous,
                                          work_group_size=min(16, d.max_work_group_size),
                                          max_work_groups=3))
    monkeypatch.setattr(tuning, "_configs", {})
    monkeypatch.setenv("AESCL_TUNE", "0")
    assert tuning.launch_config(device).contiguous_runs is contiguous
    key, nonce = os.urandom(16), os.urandom(12)
    for size in (16, 16 * 47 + 3, 16 * 48 * 8 + 5, 3 * chunked.CHUNK_SIZE + 77):
        data = os.urandom(size)
        ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce[:8], device=device).encrypt(data)
        assert ctr == AES.new(key, AES.MODE_CTR, nonce=nonce[:8]).encrypt(data), size
        whole = data[: size - size % 16]
        ecb = aescl.new(key, aescl.MODE_ECB, device=device).encrypt(whole)
        assert ecb == AES.new(key, AES.MODE_ECB).encrypt(whole), size
        assert aescl.new(key, aescl.MODE_ECB, device=device).decrypt(ecb) == whole, size
        sealed = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device
                           ).encrypt_and_digest(data)
        assert sealed == AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(data), size


def test_a_gpu_is_tuned_on_first_use(gpu_device, own_cache):
    assert not tuning.tuning_path(gpu_device).exists()
    config = tuning.launch_config(gpu_device)
    result = tuning.stored(gpu_device)
    assert result is not None and result.chosen.verified is True
    assert (config.work_group_size, config.max_work_groups, config.table_lanes) == (
        result.chosen.work_group_size, result.chosen.max_work_groups, result.chosen.table_lanes)
    assert result.chosen.gb_s >= result.default.gb_s
    assert len(result.trials) == len(tuning.candidates(gpu_device))


def test_wide_rounds_are_used_once_a_separate_process_found_them_working(
        device, own_cache, monkeypatch):
    if device.type != "cpu":
        pytest.skip("only CPU devices take the wide AES instructions")
    wanted = kernels.default_config(device)
    if not wanted.wide_rounds:
        pytest.skip("this host's CPU has no VAES with VPCLMULQDQ")
    monkeypatch.setattr(tuning, "_rounds_checked", {})  # (earlier tests' answers)
    # (beside the 128-bit rounds as builtins, or as inline assembly: aes_vendor.h)
    works = tuning.hardware_rounds_work(device, wanted) or tuning.hardware_rounds_work(
        device, kernels.with_assembled_rounds(wanted))
    assert list((own_cache / "checks").glob("hardware-rounds-*.json")), "the answer was not kept"
    chosen = tuning.launch_config(device)
    assert chosen.wide_rounds == (wanted.wide_rounds if works else 0)
    # What the kernels compiled to follows the configuration (tests/test_core_variants.py).
    assert kernels.core_variant(device, kernels.aes_options(10, "host", chosen)) == \
        kernels.requested_variant(chosen)


def test_wide_rounds_that_do_not_run_are_not_used(device, own_cache, monkeypatch):
    if device.type != "cpu" or not kernels.default_config(device).wide_rounds:
        pytest.skip("needs a CPU device whose host CPU has VAES with VPCLMULQDQ")
    # Six blocks do not fill 512-bit registers, so the checking process gets the 128-bit
    # rounds (kernels.default_config), and says that the wide ones did not run.
    monkeypatch.setattr(tuning, "_rounds_checked", {})
    broken = replace(kernels.default_config(device), wide_rounds=512, blocks_per_item=6)
    assert tuning.hardware_rounds_work(device, broken) is False
    stored = list((own_cache / "checks").glob("hardware-rounds-*.json"))
    assert len(stored) == 1 and '"works": false' in stored[0].read_text()


def test_the_aes_instructions_are_used_only_once_a_separate_process_ran_them(
        device, own_cache, monkeypatch):
    # PoCL 3.1's pthread-haswell target aborted the process in code generation on the
    # 128-bit AES instructions (an AMD EPYC that has them): the settings chosen here must
    # be ones a separate process built and ran, and must then build and run here.
    if device.type != "cpu" or not kernels.default_config(device).hardware_rounds:
        pytest.skip("needs a CPU device whose host CPU has the AES instructions")
    monkeypatch.setattr(tuning, "_rounds_checked", {})
    monkeypatch.setattr(tuning, "_configs", {})
    # The order of preference: the wide rounds (where the CPU has them), those beside the
    # 128-bit ones as inline assembly, the 128-bit ones, those as inline assembly (where a
    # compiler drops the builtins' target attribute: aes_vendor.h), the tables.
    wanted = kernels.default_config(device)
    narrow = kernels.without_wide_rounds(wanted)
    order = [wanted, kernels.with_assembled_rounds(wanted), narrow,
             kernels.with_assembled_rounds(narrow)]
    first = next((c for c in order if tuning.hardware_rounds_work(device, c)), None)
    chosen = tuning.launch_config(device)
    assert chosen == (first or kernels.without_hardware_rounds(wanted))
    assert kernels.core_variant(device, kernels.aes_options(14, "host", chosen)) == \
        kernels.requested_variant(chosen)


def test_aes_instructions_that_the_kernels_did_not_get_are_not_used(
        device, own_cache, monkeypatch):
    if device.type != "cpu" or "aes" not in kernels.cpu_features():
        pytest.skip("needs a CPU device whose host CPU has the AES instructions")
    # With $AESCL_HARDWARE_ROUNDS=0 the checking process builds the tables instead, and
    # says that the instructions asked for did not run.
    monkeypatch.setattr(tuning, "_rounds_checked", {})
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")
    asked = replace(kernels.default_config(device), hardware_rounds=True, wide_rounds=0)
    assert tuning.hardware_rounds_work(device, asked) is False
