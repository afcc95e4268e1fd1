"""aescl/engines/cuda/workers.py: what the kernels keep on a GPU from call to call (the
GHASH tables of recent hash keys, each opening's verdict).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from cuda_arrays import (
    libraries,
    needs_gpu,
    to_gpu,
    to_host,
)

import aescl


@needs_gpu
def test_the_ghash_tables_of_the_last_four_hash_keys_stay_on_the_gpu():
    """A GCM message is a new cipher: the GHASH tables of its key's H are kept for the
    next message under that key, for the four keys used last on each GPU."""
    torch = pytest.importorskip("torch")
    from aescl import ghash
    from aescl.engines.cuda import workers

    keys = [os.urandom(16) for _ in range(5)]
    text = torch.zeros(4096, dtype=torch.uint8, device="cuda")
    for key in keys:
        aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12)).encrypt(text)
    on_gpu = text.device.index or 0
    kept = [h for (gpu, h) in workers._tables_kept if gpu == on_gpu]
    assert kept == [ghash.hash_subkey(key) for key in keys[1:]]


@needs_gpu
@pytest.mark.parametrize("library", libraries())
def test_chunked_openings_on_cuda_arrays_each_get_their_own_verdict(library):
    """The fused kernel lowers a verdict word kept from call to call (workers.
    CudaChunkKernels.verdict): four threads open messages of whole chunks in turn intact
    and damaged (a chunk, or the empty final chunk's tag, compared on the host); each
    intact one comes back as sealed, each damaged one names its chunk, and a word a
    failed opening lowered serves no later one."""
    key = os.urandom(32)

    def opener(worker: int) -> list[str]:
        wrong = []
        for n in range(6):
            data = os.urandom(3 * 16384)
            sealed = bytearray(aescl.chunked.encrypt(key, data, device="host"))
            chunk = None if n % 2 == 0 else (n // 2 + worker) % 4  # (3: the final tag)
            if chunk is not None:
                sealed[-1 if chunk == 3 else 56 + chunk * 16400 + 9] ^= 2
            try:
                opened = to_host(aescl.chunked.decrypt(key, to_gpu(library, bytes(sealed))))
            except aescl.AuthenticationError as error:
                if error.chunk != chunk:
                    wrong.append(f"worker {worker}, message {n}: {error}")
                continue
            if opened != data or chunk is not None:
                wrong.append(f"worker {worker}, message {n}: opened wrongly")
        return wrong

    with ThreadPoolExecutor(4) as pool:
        assert [w for found in pool.map(opener, range(4)) for w in found] == []
