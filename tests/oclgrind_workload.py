"""Run the kernels on the Oclgrind simulator; run by test_oclgrind.py in a subprocess.

No argument: ECB and CTR. ``gcm``: GCM and the chunked format.

With ``control`` as the argument it instead runs a kernel with a deliberate data
race and out-of-bounds write, to prove that the harness notices such bugs.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from Crypto.Cipher import AES

import aescl
from aescl.engines.opencl import kernels, tuning
from aescl.engines.opencl import runtime as opencl_runtime

device = aescl.get_device("oclgrind")

if sys.argv[1:] == ["control"]:
    # The bug class the AES setup barrier prevents: reading a neighbour's
    # __local entry with no barrier after the writes. Plus one write past the end.
    bad = """__kernel void bad(__global uint *out) {
        __local uint shared[8];
        shared[get_local_id(0)] = get_local_id(0);
        out[get_global_id(0) + 1] = shared[(get_local_id(0) + 1) % 8];
    }"""
    program = kernels.build_source(device, bad, "", "control.cl")
    rt = opencl_runtime.device_runtime(device)
    out = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, 4 * 8)
    cl.Kernel(program, "bad")(rt.queue, (8,), (8,), out)
    rt.queue.finish()
    print("control ran")
    sys.exit(0)

if sys.argv[1:] == ["gcm"]:
    # GCM: AAD and text off block boundaries, a GHASH over several work-groups
    # with its __local tree reduction, and the chunked format's batch path.
    for size in (16, 24, 32):
        for key_schedule in ("host", "device"):
            key = os.urandom(size)
            data = np.frombuffer(os.urandom(16 * 37 + 5), np.uint8)
            nonce = os.urandom(12)
            gcm = aescl.new(key, aescl.MODE_GCM, nonce=nonce, device=device,
                            key_schedule=key_schedule)
            gcm.update(data[:21])
            reference = AES.new(key, AES.MODE_GCM, nonce=nonce)
            reference.update(data[:21].tobytes())
            assert gcm.encrypt_and_digest(data) == reference.encrypt_and_digest(data.tobytes())
    key = os.urandom(32)
    message = os.urandom(2 * 16384 + 100)
    sealed = aescl.chunked.encrypt(key, message, device=device)
    assert aescl.chunked.decrypt(key, sealed, device=device) == message
    # The same on arrays: CTR, GHASH and the tags in one pass (gcm_crypt_hash), with
    # its groups of several messages when they fit.
    queue = cl.CommandQueue(cl.Context([device.cl_device]))
    salt = os.urandom(24)
    array = cl_array.to_device(queue, np.frombuffer(message, np.uint8))
    sealed_array = aescl.chunked.encrypt(key, array, salt=salt)
    assert sealed_array.get().tobytes() == aescl.chunked.encrypt(key, message, salt=salt,
                                                                 device="host")
    assert aescl.chunked.decrypt(key, sealed_array).get().tobytes() == message
    print("all kernels ran")
    sys.exit(0)

# 37 blocks on groups of 16 items, at most 3 groups: partial groups, items with
# no block, and grid-stride steps all occur. The CTR counters start near wraps.
print(f"round tables: {tuning.launch_config(device).round_tables}")
for size in (16, 24, 32):
    for key_schedule in ("host", "device"):
        key = os.urandom(size)
        blocks = os.urandom(16 * 37)
        ecb = aescl.new(key, aescl.MODE_ECB, device=device, key_schedule=key_schedule)
        assert ecb.encrypt(blocks) == AES.new(key, AES.MODE_ECB).encrypt(blocks)
        assert ecb.decrypt(blocks) == AES.new(key, AES.MODE_ECB).decrypt(blocks)
        data = np.frombuffer(os.urandom(16 * 37 + 5), np.uint8)
        for nonce, initial in ((b"", 2**64 - 3), (b"\x07" * 15, 250)):
            ctr = aescl.new(key, aescl.MODE_CTR, nonce=nonce, initial_value=initial,
                            device=device, key_schedule=key_schedule)
            expected = AES.new(key, AES.MODE_CTR, nonce=nonce, initial_value=initial)
            assert ctr.encrypt(data[:7]) + ctr.encrypt(data[7:]) == expected.encrypt(data.tobytes())
        print(f"AES-{size * 8} {key_schedule}: ok")

print("all kernels ran")
