"""The round implementations of cl/aes_core.cl, and which one a device gets.

CPU devices ask for the AES instructions (AES_HARDWARE_ROUNDS); x86 CPUs with
AES-NI grant it, and those with VAES and VPCLMULQDQ get the wide forms
(AES_WIDE_ROUNDS) once a separate process found them working (aescl.engines.opencl.tuning), so
on such a machine the rest of the suite runs those on PoCL. The 128-bit
instructions stay covered on the same CPU here, with ``$AESCL_WIDE_ROUNDS=0``, those
as inline assembly (where a compiler drops the builtins' target attribute) with
``$AESCL_ASSEMBLED_ROUNDS``, and the T-table rounds with ``$AESCL_HARDWARE_ROUNDS=0``
and everywhere on GPUs and the simulator.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest
from Crypto.Cipher import AES

import aescl
from aescl import engines, keyschedule
from aescl.engines.opencl import kernels, tuning
from aescl.engines.opencl import runtime as opencl_runtime
from vectors import load


def _variant(device: aescl.Device, rounds: int = 10, key_schedule: str = "host") -> str:
    options = kernels.aes_options(rounds, key_schedule, tuning.launch_config(device))
    return kernels.core_variant(device, options)


def _host_cpu_has_aes_ni() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return "aes" in flags.split()


def test_gpus_and_the_simulator_use_the_table_rounds(device):
    if device.type == "cpu":
        pytest.skip("CPU devices are checked by the next test")
    assert _variant(device) == "t-tables"


def test_a_pocl_cpu_with_aes_ni_uses_the_instructions(device):
    if device.type != "cpu" or device.vendor != "pocl":
        pytest.skip("the instructions are requested from CPU devices; PoCL is the one known here")
    if not _host_cpu_has_aes_ni():
        pytest.skip("this host's CPU has no AES-NI, so the table rounds are right")
    config = tuning.launch_config(device)  # (tests/test_tuning.py checks the choice)
    if not config.hardware_rounds:  # only where a separate process could not run them
        narrow = kernels.without_wide_rounds(kernels.default_config(device))
        assert tuning.hardware_rounds_work(device, narrow) is False
        assembled = kernels.with_assembled_rounds(narrow)
        assert tuning.hardware_rounds_work(device, assembled) is False
    for rounds in (10, 12, 14):
        for key_schedule in engines.KEY_SCHEDULES:
            assert _variant(device, rounds, key_schedule) == kernels.requested_variant(config)


# Each way of a CPU device's rounds: the settings that ask for it, and what it compiles to.
_ROUNDS = {
    "t-tables": ({"AESCL_HARDWARE_ROUNDS": "0"}, "t-tables"),
    "x86-aes-ni": ({"AESCL_WIDE_ROUNDS": "0"}, "x86-aes-ni"),
    "x86-aes-ni-asm-sse": ({"AESCL_WIDE_ROUNDS": "0", "AESCL_ASSEMBLED_ROUNDS": "1"},
                           "x86-aes-ni-asm"),
    "x86-aes-ni-asm-vex": ({"AESCL_WIDE_ROUNDS": "0", "AESCL_ASSEMBLED_ROUNDS": "2"},
                           "x86-aes-ni-asm"),
    # (the wide rounds beside the assembled ones, where the CPU has VAES)
    "x86-vaes-asm": ({"AESCL_ASSEMBLED_ROUNDS": "2"}, None),
}


@pytest.fixture(params=list(_ROUNDS))
def other_rounds_cpu(request, device, monkeypatch):
    """A CPU device held to the T-table rounds, or to the 128-bit AES instructions (as
    builtins, or as inline assembly in either encoding)."""
    if device.type != "cpu":
        pytest.skip("only CPU devices choose between the round implementations")
    settings, variant = _ROUNDS[request.param]
    if variant != "t-tables" and not (_host_cpu_has_aes_ni() and device.vendor == "pocl"):
        pytest.skip("the 128-bit instructions need PoCL on a CPU with AES-NI")
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    if variant is None:
        width = kernels.wide_rounds_wanted()
        if not width:
            pytest.skip("this host's CPU has no VAES with VPCLMULQDQ")
        variant = f"x86-vaes-{width}"
    if kernels.requested_variant(tuning.launch_config(device)) != variant:
        pytest.skip("a separate process found that PoCL cannot run these AES "
                    "instructions on this machine (tuning.hardware_rounds_work)")
    assert _variant(device) == variant
    return device


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_other_rounds_on_a_cpu_pass_the_nist_ecb_vectors(other_rounds_cpu, key_schedule, bits):
    vectors = [v for kind in ("GFSbox", "KeySbox")
               for v in load("ciphers", "AES", "ECB", f"ECB{kind}{bits}.rsp")]
    assert vectors
    for vector in vectors:
        cipher = aescl.new(vector.bytes("KEY"), aescl.MODE_ECB, device=other_rounds_cpu,
                           key_schedule=key_schedule)
        plaintext, ciphertext = vector.bytes("PLAINTEXT"), vector.bytes("CIPHERTEXT")
        if vector.section == "ENCRYPT":
            assert cipher.encrypt(plaintext) == ciphertext, vector.id
        else:
            assert cipher.decrypt(ciphertext) == plaintext, vector.id


@pytest.mark.parametrize("size", [16, 24, 32])
def test_every_round_implementation_agrees_with_pycryptodome(device, monkeypatch, size):
    if device.type != "cpu":
        pytest.skip("only CPU devices choose between the round implementations")
    key, nonce, data = os.urandom(size), os.urandom(8), os.urandom(16 * 1000 + 7)
    want_ctr = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data)
    want_ecb = AES.new(key, AES.MODE_ECB).encrypt(data[:16000])
    want_gcm = AES.new(key, AES.MODE_GCM, nonce=nonce * 2).encrypt_and_digest(data)
    for setting in [settings for settings, _ in _ROUNDS.values()] + [{}]:
        with monkeypatch.context() as patch:
            for name, value in setting.items():
                patch.setenv(name, value)
            ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=device)
            ecb = aescl.new(key, aescl.MODE_ECB, device=device)
            gcm = aescl.new(key, aescl.MODE_GCM, nonce=nonce * 2, device=device)
            assert ctr.encrypt(data) == want_ctr, setting
            assert ecb.encrypt(data[:16000]) == want_ecb, setting
            assert ecb.decrypt(want_ecb) == data[:16000], setting
            assert gcm.encrypt_and_digest(data) == want_gcm, setting


# The round-table layouts (AES_ROUND_TABLES tables, AES_TABLE_LANES copies each, in
# __local memory): the CUDA engine runs all four tables in 32 copies, the OpenCL engine
# one table on GPUs unless $AESCL_ROUND_TABLES asks for more. Each layout runs here,
# on whatever OpenCL device there is, against pycryptodome: ECB both ways and CTR
# across a carry out of the counter's low 64 bits.
@pytest.mark.parametrize("tables, lanes, size", [
    (1, 32, 16), (2, 1, 24), (2, 16, 32), (2, 32, 16), (4, 8, 24), (4, 32, 32)])
def test_every_round_table_layout_agrees_with_pycryptodome(device, tables, lanes, size):
    if device.local_mem_bytes < 1024 * tables * lanes + 4096:
        pytest.skip(f"{device.name} has {device.local_mem_bytes} bytes of __local memory")
    key, data = os.urandom(size), os.urandom(16 * 777)
    counter = (1 << 64) - 300  # (block 300 carries into the high half)
    config = kernels.LaunchConfig(64, 4, True, lanes, tables)
    options = kernels.aes_options(keyschedule.rounds_for_key(key), "host", config)
    rt = opencl_runtime.device_runtime(device)
    flags = cl.mem_flags

    def run(filename: str, name: str, decrypt: bool, *counter_args: int) -> bytes:
        with rt.lock:
            source = cl.Buffer(rt.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=data)
            target = cl.Buffer(rt.context, flags.WRITE_ONLY, len(data))
            kernel = kernels.kernel(device, filename, options, name)
            kernel(rt.queue, (64 * 4,), (64,), source, target, np.uint64(len(data) // 16),
                   *(np.uint64(v) for v in counter_args),
                   kernels.key_argument(key, "host", decrypt))
            out = bytearray(len(data))
            cl.enqueue_copy(rt.queue, out, target)
        return bytes(out)

    ecb = AES.new(key, AES.MODE_ECB)
    assert run("aes_ecb.cl", "aes_ecb_encrypt", False) == ecb.encrypt(data)
    assert run("aes_ecb.cl", "aes_ecb_decrypt", True) == ecb.decrypt(data)
    ctr = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=counter)
    assert run("aes_ctr.cl", "aes_ctr_xor", False, 0, counter, 2**64 - 1, 2**64 - 1) == \
        ctr.encrypt(data)
