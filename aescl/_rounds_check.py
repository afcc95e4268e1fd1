"""``python -m aescl._rounds_check DEVICE_ID``: whether a CPU device runs
the AES instructions (AES-NI, or the wide VAES rounds; cl/aes_vendor.h) correctly, in
a process of its own.

It runs the public API, so it sits at the top of the house, beside the bench (the
layers contract in pyproject.toml), not in the OpenCL engine it checks, which starts it
by name. aescl.engines.opencl.tuning.hardware_rounds_work starts it with the rounds
requested (``$AESCL_WIDE_ROUNDS``: 0 for the 128-bit instructions;
``$AESCL_ASSEMBLED_ROUNDS``: those as inline assembly), and keeps the
answer: exit
status 0 when the device's kernels compiled to those rounds, and CTR, ECB both ways
(both key schedules, every key size) and the chunked format both ways give on the
device what pycryptodome and the host engine give. A compiler that cannot generate
the instructions aborts this process, not the one that asked: PoCL 3.1's
``pthread-haswell`` target did so for the 128-bit ones on an AMD EPYC (Zen 3) that
has them.
"""

from __future__ import annotations

import os
import sys

from Crypto.Cipher import AES

import aescl
from aescl import chunked
from aescl.engines.interface import KEY_SCHEDULES
from aescl.engines.opencl import kernels, tuning


def works(device: aescl.Device) -> bool:
    config = tuning.launch_config(device)  # (as $AESCL_WIDE_ROUNDS and the rest ask)
    options = kernels.aes_options(14, "host", config)
    if not config.hardware_rounds \
            or kernels.core_variant(device, options) != kernels.requested_variant(config):
        return False  # (the settings asked for did not give those rounds)
    # Several runs of blocks and chunks per work-item, and a partial last one of each.
    data = os.urandom(3 * chunked.CHUNK_SIZE + 16 * 77 + 5)
    whole = data[: len(data) // 16 * 16]
    for size in (16, 24, 32):
        key, iv = os.urandom(size), os.urandom(16)
        expected_ctr = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
        expected_ecb = AES.new(key, AES.MODE_ECB).encrypt(whole)
        for key_schedule in KEY_SCHEDULES:
            ctr = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv, device=device,
                            key_schedule=key_schedule)
            ecb = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
            if (ctr.encrypt(data) != expected_ctr or ecb.encrypt(whole) != expected_ecb
                    or ecb.decrypt(expected_ecb) != whole):
                return False
    key, nonce = os.urandom(32), os.urandom(12)
    sealed = chunked.encrypt_raw(key, nonce, data, device="host")
    return (chunked.encrypt_raw(key, nonce, data, device=device) == sealed
            and chunked.decrypt_raw(key, nonce, sealed, device=device) == data)


if __name__ == "__main__":
    sys.exit(0 if works(aescl.get_device(sys.argv[1])) else 1)
