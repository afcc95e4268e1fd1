"""Issue 56's worked example (docs/gpu-arrays.md, "A model's KV cache at rest"): the KV
cache of a model as a 2-D tensor of blocks on the GPU, sealed there with
``aescl.AESGCM.encrypt_many``, written to a file, read back, and opened on the GPU with
``decrypt_many``; then one block moved to another block's place, which must fail by its
index. Prints one JSON object: each step's time and GB/s.

    python3 docs/benchmarks/2026-11-27-kv-cache.py [blocks] [KiB a block]   # 4096 x 64

The key of a snapshot is its own: HKDF-SHA256 of a long-lived key and a random salt
written in the file's header. Under a key used for one snapshot only, block i's nonce
can be i itself (96 bits, big-endian): no nonce repeats, none is stored, and a block
read back in another block's place fails its tag.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

import aescl

SALT_BYTES = 32


def snapshot_key(master: bytes, salt: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt, b"kv-cache snapshot").derive(master)


def block_nonces(count: int) -> np.ndarray:
    """Block i's nonce: i as 12 big-endian bytes (one row each)."""
    nonces = np.zeros((count, 12), np.uint8)
    nonces[:, 4:] = np.arange(count, dtype=">u8").view(np.uint8).reshape(count, 8)
    return nonces


def timed(step):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = step()
    torch.cuda.synchronize()
    return result, time.perf_counter() - start


def main(count: int, block_kib: int) -> None:
    block = block_kib << 10
    master = os.urandom(32)
    # The cache: `count` blocks of K and V values (fp16) for a run of tokens, on the GPU.
    cache = torch.randn(count, block // 2, dtype=torch.float16, device="cuda")
    rows = cache.view(torch.uint8)  # (count x block bytes: one message a row)
    nonces = block_nonces(count)
    figures: dict[str, float] = {"blocks": count, "KiB a block": block_kib}
    total = count * block

    salt = os.urandom(SALT_BYTES)
    aead = aescl.AESGCM(snapshot_key(master, salt))
    # (first use: the kernels built, not timed; a throwaway key, so no nonce is used twice)
    aescl.AESGCM(os.urandom(32)).encrypt_many(nonces[:2], rows[:2])
    sealed, seconds = timed(lambda: aead.encrypt_many(nonces, rows))
    figures["seal GB/s"] = round(total / seconds / 1e9, 1)

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kv.sealed")

        def write() -> None:
            host = sealed.cpu().numpy()
            with open(path, "wb") as file:
                file.write(salt)
                file.write(host.data)
        _, seconds = timed(write)
        figures["to host and written GB/s"] = round(total / seconds / 1e9, 2)

        def read() -> tuple[bytes, torch.Tensor]:
            with open(path, "rb") as file:
                header = file.read(SALT_BYTES)
                body = np.fromfile(file, np.uint8).reshape(count, block + 16)
            return header, torch.from_numpy(body).to("cuda")
        (header, read_back), seconds = timed(read)
        figures["read and to the GPU GB/s"] = round(total / seconds / 1e9, 2)

    opener = aescl.AESGCM(snapshot_key(master, header))
    opened, seconds = timed(lambda: opener.decrypt_many(nonces, read_back))
    figures["open GB/s"] = round(total / seconds / 1e9, 1)
    assert torch.equal(opened.view(torch.float16).reshape(cache.shape), cache)

    swapped = read_back.clone()
    swapped[7] = read_back[3]  # (block 3's sealed bytes put in block 7's place)
    try:
        opener.decrypt_many(nonces, swapped)
    except InvalidTag as failure:  # (aescl's names the failed blocks)
        assert failure.failed == [7]
        assert not failure.results[7].any()  # (its row zeroed: nothing of it released)
        figures["moved block found"] = 7
    print(json.dumps(figures))


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    main(*(arguments or [4096, 64]))
