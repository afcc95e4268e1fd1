"""GPU-only checks: large inputs on a real GPU. Skipped, visibly, where there is no GPU."""

from __future__ import annotations

import os

import pytest
from Crypto.Cipher import AES

import aescl
from aescl.engines.opencl.tuning import launch_config

pytestmark = pytest.mark.slow


def test_a_gpu_stages_its_tables_in_local_memory(gpu_device):
    assert launch_config(gpu_device).tables_in_local


@pytest.mark.parametrize("size", [16, 24, 32])
def test_gpu_matches_pycryptodome_on_64_mib(gpu_device, key_schedule, size):
    key, iv = os.urandom(size), os.urandom(16)
    data = os.urandom(64 << 20)
    ctr = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device=gpu_device,
                    key_schedule=key_schedule)
    expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
    assert ctr.encrypt(data) == expected
    ecb = aescl.new(key, aescl.MODE_ECB, device=gpu_device, key_schedule=key_schedule)
    assert ecb.decrypt(data) == AES.new(key, AES.MODE_ECB).decrypt(data)
