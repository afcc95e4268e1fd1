"""cl/chunk_seal.cl: the chunked format's one-pass sealing and opening on CPU devices.

Which route a device takes, and that the one-pass route and the portable one
(the chunked format's device program,
device_chunks.py, over the GCM kernels) seal and open byte for byte alike,
against the reference built from the spec.
"""

from __future__ import annotations

import os

import pytest
from chosen_items import seal_and_open_recording_items

import aescl
import chunked_reference as reference
from aescl import chunked
from aescl.engines.opencl import OpenclHostChunks, gcm_kernels, kernels, tuning

CHUNK = chunked.CHUNK_SIZE
SEALED = chunked.SEALED_CHUNK_SIZE

# The one-pass route (on the wide instructions where the CPU has them), the same on
# the 128-bit ones; the portable route on AES-NI (12 blocks per work-item do not
# divide a chunk's 1024); the portable route on T-tables, as GPUs run it: CTR, GHASH
# and the tags in one launch (aes_gcm.cl's gcm_crypt_hash), and in three.
ROUTES = {"one-pass": {}, "one-pass-aes-ni": {"AESCL_WIDE_ROUNDS": "0"},
          "portable-aes-ni": {"AESCL_BLOCKS_PER_ITEM": "12"},
          "portable-tables": {"AESCL_HARDWARE_ROUNDS": "0"},
          "portable-tables-three-launches": {"AESCL_HARDWARE_ROUNDS": "0",
                                             "AESCL_GCM_FUSED": "0"}}
ONE_PASS = ("one-pass", "one-pass-aes-ni")


def _one_pass_expected(device: aescl.Device) -> bool:
    # (where a separate process found the instructions running: tuning.hardware_rounds_work)
    return (device.type == "cpu" and {"aes", "pclmulqdq"} <= kernels.cpu_features()
            and tuning.launch_config(device).hardware_rounds)


def test_cpu_devices_with_the_instructions_seal_in_one_pass(device, monkeypatch):
    for route, environment in ROUTES.items():
        with monkeypatch.context() as patch:
            for name, value in environment.items():
                patch.setenv(name, value)
            cipher = OpenclHostChunks(os.urandom(32), os.urandom(12), device=device)
            assert cipher.seals_in_one_pass is (route in ONE_PASS
                                                and _one_pass_expected(device)), route


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_seals_and_opens_like_the_reference(device, monkeypatch, route):
    for name, value in ROUTES[route].items():
        monkeypatch.setenv(name, value)
    chunk_key, base_nonce = os.urandom(32), os.urandom(12)
    for length in (CHUNK, 3 * CHUNK + 100, 9 * CHUNK):
        message = os.urandom(length)
        sealed = chunked.encrypt_raw(chunk_key, base_nonce, message, device=device)
        assert sealed == reference.encrypt_raw(chunk_key, base_nonce, message), length
        assert chunked.decrypt_raw(chunk_key, base_nonce, sealed, device=device) == message
    # A flipped bit in chunk 1's ciphertext, then in its tag: chunk 1 is named.
    for position in (SEALED + 5, 2 * SEALED - 1):
        damaged = bytearray(sealed)
        damaged[position] ^= 0x01
        with pytest.raises(aescl.AuthenticationError) as failure:
            chunked.decrypt_raw(chunk_key, base_nonce, bytes(damaged), device=device)
        assert failure.value.chunk == 1


def test_a_short_run_spreads_each_chunk_over_more_work_items_and_seals_alike(device,
                                                                            monkeypatch):
    """A run of fewer chunks than fill the device gets more work-items a chunk in the
    fused kernel (device_chunks.message_items), with the same bytes either way."""
    monkeypatch.setenv("AESCL_HARDWARE_ROUNDS", "0")  # (the tables route: gcm_crypt_hash)
    chosen = seal_and_open_recording_items(monkeypatch, gcm_kernels, device, 3)
    assert chosen and max(chosen) > 8, chosen
