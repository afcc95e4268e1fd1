"""aescl/engines/cuda/kernels.py: the cl/ kernels through NVRTC, for every architecture,
round-table count and key size, and the round tables a GPU's blocks hold. No GPU is
needed: NVRTC alone (the test extra brings it), skipped, visibly, without it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from cuda_arrays import (
    needs_nvrtc,
)

import aescl


@needs_nvrtc
@pytest.mark.parametrize("arch, tables", [("75", 1), ("80", 4), ("86", 2), ("90", 4)])
@pytest.mark.parametrize("rounds", [10, 12, 14])
def test_every_cuda_kernel_compiles_from_the_one_core(arch, tables, rounds):
    from aescl.engines.cuda import KERNELS, compile_cubin, cuda_defines
    from aescl.engines.cuda.kernels import crypt_hash_defines
    from aescl.engines.cuda.workers import _CRYPT_HASH_SHAPE, _LONE_CRYPT_HASH_SHAPE

    # gcm_crypt_hash's own builds too: its tables, block and stride tables as the engine
    # sets them, on a GPU whose blocks hold ``tables``; and a lone message's build, which
    # asks nothing of the GPU's shared memory, on one architecture. (Several compiles at
    # a time: one after another, this test took a minute of the suite on the 2-core CI
    # kind.)
    builds = [(filename, cuda_defines(rounds, tables), names)
              for filename, names in KERNELS.items()]
    shapes = [_CRYPT_HASH_SHAPE] + ([_LONE_CRYPT_HASH_SHAPE] if arch == "90" else [])
    for most_tables, threads, in_local, lanes, sums_by_powers in shapes:
        builds.append(("aes_gcm.cl", crypt_hash_defines(rounds, min(tables, most_tables),
                                                        threads, in_local, lanes,
                                                        sums_by_powers),
                       ("gcm_crypt_hash",)))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        cubins = list(pool.map(lambda build: compile_cubin(build[0], build[1], arch), builds))
    for (filename, _, names), cubin in zip(builds, cubins, strict=True):
        assert cubin[:4] == b"\x7fELF", filename
        for name in names:  # extern "C": the OpenCL kernel names, unmangled
            assert name.encode() + b"\0" in cubin, (filename, name)


@pytest.mark.parametrize("block_shared_kib, tables", [
    (227, 4), (163, 4), (129, 4), (128, 2), (99, 2), (96, 2), (65, 2), (64, 1), (48, 1)])
def test_a_gpu_gets_the_round_tables_its_blocks_hold(block_shared_kib, tables):
    from aescl.engines.cuda.kernels import round_tables_for, table_bytes

    assert round_tables_for(block_shared_kib * 1024) == tables
    assert table_bytes(tables) < block_shared_kib * 1024


@pytest.mark.parametrize("block_shared_kib, tables", [
    (227, 4), (163, 4), (153, 4), (152, 2), (129, 2), (99, 2), (89, 2), (88, 1), (64, 1)])
def test_the_fused_gcm_kernel_gets_the_round_tables_its_blocks_hold_beside_its_sums(
        block_shared_kib, tables):
    """gcm_crypt_hash's blocks of 1024 threads keep 16 KiB of sums and 8 KiB of stride
    tables beside the round tables: a GPU whose blocks hold 4 tables for the other
    kernels (129 KiB) may hold only 2 for this one."""
    from aescl.engines.cuda.kernels import crypt_hash_tables, table_bytes

    assert crypt_hash_tables(block_shared_kib * 1024, 4, 1024, 1) == tables
    assert table_bytes(tables) + (16 + 8 + 1) * 1024 <= block_shared_kib * 1024 or tables == 1
    assert crypt_hash_tables(227 * 1024, 2, 1024, 1) == 2  # never more than the GPU's own


@needs_nvrtc
def test_a_cuda_build_error_carries_nvrtcs_log(monkeypatch):
    from aescl.engines import sources
    from aescl.engines.cuda import compile_cubin

    monkeypatch.setattr(sources, "load_source", lambda _: "__kernel void k() { nope; }")
    monkeypatch.setattr("aescl.engines.cuda.kernels.load_source", sources.load_source)
    with pytest.raises(aescl.KernelBuildError) as caught:
        compile_cubin("broken.cl", {}, "90")
    assert "nope" in caught.value.build_log
