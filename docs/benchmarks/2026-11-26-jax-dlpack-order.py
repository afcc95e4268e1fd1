"""An experiment (not kept): JAX inputs ordered on the GPU through DLPack, in place of
aescl's wait on the host. ``__dlpack__(stream=s)`` asks JAX to make stream ``s`` (CuPy's
current stream, where aescl works for JAX arrays) wait for the work that makes the
array; the pointer then comes from its CUDA interface, which does not wait.

Prints what ``__dlpack__(stream=...)`` costs on an array still being made and once
ready; CTR on six arrays just made (when the call returns, and whether its bytes are
pycryptodome's); CTR-128 on a ready 1 GiB array, ten calls a round, both ways.

    python3 2026-11-26-jax-dlpack-order.py
"""
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import cupy  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from Crypto.Cipher import AES  # noqa: E402

import aescl  # noqa: E402
from aescl.engines.cuda import arrays  # noqa: E402

gpu = jax.devices("gpu")[0]
stream = cupy.cuda.get_current_stream()
print("cupy current stream", stream.ptr)
waiting = arrays.cuda_bytes


def ordered(obj, what, writable=False, stream=None):
    """cuda_bytes with a JAX input ordered through DLPack instead of waited for."""
    if not (arrays._is_jax(obj) and not writable):
        return waiting(obj, what, writable, stream)
    device = int(obj.__dlpack_device__()[1])
    with cupy.cuda.Device(device):
        order_on = int(cupy.cuda.get_current_stream().ptr)
    obj.__dlpack__(stream=order_on or 1)  # (1: the legacy default stream, to DLPack)
    pointer = obj.__cuda_array_interface__["data"][0]
    return arrays.CudaBytes(int(pointer), int(obj.nbytes), device, order_on, False)


with jax.default_device(gpu):
    a = jax.random.normal(jax.random.key(0), (8192, 8192), dtype=jnp.float32)
    made = jax.jit(lambda a, k: ((a @ a @ a @ a) * k).reshape(-1).view(jnp.uint8)[: 1 << 26])
    made(a, 1.0).block_until_ready()
    for i in range(4):
        y = made(a, float(i))
        start = time.perf_counter()
        y.__dlpack__(stream=stream.ptr or 1)
        pending = time.perf_counter() - start
        start = time.perf_counter()
        y.block_until_ready()
        rest = time.perf_counter() - start
        start = time.perf_counter()
        y.__dlpack__(stream=stream.ptr or 1)
        ready = time.perf_counter() - start
        print(f"pending __dlpack__ {pending * 1e6:.0f} us (then {rest * 1e3:.1f} ms to ready); "
              f"ready __dlpack__ {ready * 1e6:.0f} us", flush=True)
    key, nonce = os.urandom(16), os.urandom(8)
    for name, take in (("waits on the host", waiting), ("ordered by dlpack", ordered)):
        arrays.cuda_bytes = take
        wrong, returns = 0, []
        for i in range(6):
            y = made(a, float(i + 1))
            start = time.perf_counter()
            out = aescl.new(key, aescl.MODE_CTR, nonce=nonce).encrypt(y)
            returns.append((time.perf_counter() - start) * 1e3)
            expected = AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(np.asarray(y).tobytes())
            wrong += np.asarray(out).tobytes() != expected
        print(f"{name}: call returns after {statistics.median(returns):.2f} ms (median), "
              f"wrong results {wrong}/6", flush=True)
    SIZE = 1 << 30
    x = jax.device_put(np.frombuffer(os.urandom(SIZE), np.uint8), gpu)
    for number in range(3):
        for name, take in (("waits", waiting), ("dlpack", ordered)):
            arrays.cuda_bytes = take
            aescl.new(key, aescl.MODE_CTR, nonce=bytes(8)).encrypt(x).block_until_ready()
            start = time.perf_counter()
            for _ in range(10):
                result = aescl.new(key, aescl.MODE_CTR, nonce=bytes(8)).encrypt(x)
            result.block_until_ready()
            seconds = (time.perf_counter() - start) / 10
            print(f"{number} {name}: {SIZE / seconds / 1e9:.1f} GB/s", flush=True)
