"""aescl/engines/cuda/workers.py: what the kernels keep on a GPU from call to call (the
GHASH tables of recent hash keys, each opening's verdict), and the fused kernel's
threads a chunk.
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


def test_the_kept_lone_launches_set_the_kernels_own_parameters():
    """A kept lone launch (_kept_lone) sets its changing arguments by their positions in
    gcm_crypt_hash's parameter list: they must still name the input, the output, J0
    and the tag's place (sealing), or the received tag's place and the verdict word
    (opening), as the kernel declares them in cl/aes_gcm.cl."""
    import re

    pytest.importorskip("cuda.bindings", reason="the CUDA engine's packages are not installed")
    from aescl.engines.cuda import workers
    from aescl.engines.sources import load_source

    source = load_source("aes_gcm.cl")
    declared = re.search(r"__kernel void gcm_crypt_hash\((.*?)\)\s*\{", source, re.S)
    assert declared is not None
    names = [re.findall(r"\w+", parameter)[-1]
             for parameter in declared.group(1).split(",")]
    assert [names[at] for at in workers._LONE_SEALING_CHANGES] == [
        "input", "output", "base_j0", "tags"]
    assert [names[at] for at in workers._LONE_OPENING_CHANGES] == [
        "input", "output", "base_j0", "received", "verdict"]


@needs_gpu
def test_a_short_run_of_chunks_spreads_over_more_threads_and_seals_alike(monkeypatch):
    """A chunk run too short to fill the GPU at 8 threads a chunk (256 chunks: 2 of an
    H200's 132 SMs; a team's last pieces are such runs) gets more threads a chunk
    (device_chunks.message_items), with the reference's bytes."""
    from chosen_items import seal_and_open_recording_items

    from aescl.engines.cuda import workers

    chosen = seal_and_open_recording_items(monkeypatch, workers, "cuda:0", 256)
    assert chosen and max(chosen) > 8, chosen
