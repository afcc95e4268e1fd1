"""The CUDA engine's CTR and ECB-decrypt kernels with 1, 2 or 4 round tables in shared
memory (cl/aes_core.cl, AES_ROUND_TABLES), over launch shapes, on GPU 0.

Run on the GPU machine with aescl installed (docs/benchmarks/README.md, "Round tables
and keys by value"): ``python3 2026-11-24-cuda-round-tables-sweep.py``. Each line: the
best of 5 launches over 1 GiB in device memory, timed by CUDA events, and whether the
first MiB equals pycryptodome's output. It reaches into aescl's private modules
(``engines.cuda.workers``), so it follows the module paths of the commit it came with.
"""

import numpy as np
from Crypto.Cipher import AES
from cuda.bindings import driver

from aescl import keyschedule
from aescl.engines.cuda.kernels import module
from aescl.engines.cuda.runtime import checked, cuda_device, launch_function

N = 1 << 30
CHECKED = 1 << 20


def defines(rounds: int, tables: int) -> dict[str, int]:
    return {"AES_ROUNDS": rounds, "AES_KEY_SCHEDULE_DEVICE": 0, "AES_TABLES_IN_LOCAL": 1,
            "AES_TABLE_LANES": 32, "AES_BYTE_PERMUTE": 1, "AES_ROUND_TABLES": tables,
            "AES_TABLES_DYNAMIC": int(tables > 1)}


def best_seconds(function, arguments, grid, threads, shared, stream, repeats=5) -> float:
    values = [np.array(a, np.uint64) if isinstance(a, int) else a for a in arguments]
    pointers = np.array([v.ctypes.data for v in values], np.uint64)
    start, end = checked(driver.cuEventCreate(0)), checked(driver.cuEventCreate(0))

    def launch() -> None:
        checked(driver.cuLaunchKernel(function, grid, 1, 1, threads, 1, 1, shared,
                                     driver.CUstream(stream), pointers.ctypes.data, 0))

    launch()
    best = float("inf")
    for _ in range(repeats):
        checked(driver.cuEventRecord(start, stream))
        launch()
        checked(driver.cuEventRecord(end, stream))
        checked(driver.cuEventSynchronize(end))
        best = min(best, checked(driver.cuEventElapsedTime(start, end)) / 1e3)
    return best


def main() -> None:
    gpu = cuda_device(0)
    data = np.random.default_rng(0).integers(0, 256, N, dtype=np.uint8)
    source, target = int(checked(driver.cuMemAlloc(N))), int(checked(driver.cuMemAlloc(N)))
    checked(driver.cuMemcpyHtoD(source, data, N))
    stream = int(checked(driver.cuStreamCreate(0)))
    counter = int.from_bytes(bytes(range(16)), "big")
    for mode in ("ctr", "ecb-decrypt"):
        for bits in (128, 256):
            key, decrypt = bytes(range(bits // 8)), mode == "ecb-decrypt"
            if decrypt:
                want = AES.new(key, AES.MODE_ECB).decrypt(data[:CHECKED].tobytes())
                filename, name = "aes_ecb.cl", "aes_ecb_decrypt"
                extra = []
            else:
                want = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=counter).encrypt(
                    data[:CHECKED].tobytes())
                filename, name = "aes_ctr.cl", "aes_ctr_xor"
                extra = [counter >> 64, counter & (2**64 - 1), 2**64 - 1, 2**64 - 1]
            arguments = [source, target, N // 16, *extra,
                         keyschedule.kernel_key_argument(key, "host", decrypt)]
            for tables in (1, 2, 4):
                code = module(filename, defines(keyschedule.rounds_for_key(key), tables),
                              gpu.arch)
                function = launch_function(code.get_kernel(name), "", 0)
                shared = 256 * 4 * 32 * tables if tables > 1 else 0
                if shared:
                    checked(driver.cuFuncSetAttribute(
                        function, driver.CUfunction_attribute
                        .CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared))
                for threads in (1024, 512):
                    for per_sm in (1, 2, 4):
                        checked(driver.cuMemsetD8(target, 0, N))
                        seconds = best_seconds(function, arguments, gpu.sms * per_sm, threads,
                                               shared, stream)
                        got = np.empty(CHECKED, np.uint8)
                        checked(driver.cuMemcpyDtoH(got, target, CHECKED))
                        print(f"{mode:12s} AES-{bits} tables {tables} threads {threads:4d} "
                              f"blocks/SM {per_sm}: {N / seconds / 1e9:6.1f} GB/s "
                              f"{'ok' if got.tobytes() == want else 'WRONG'}", flush=True)


if __name__ == "__main__":
    main()
