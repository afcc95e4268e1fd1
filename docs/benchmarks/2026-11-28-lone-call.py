"""Issue 56 (item 3): where one small ``aescl.AESGCM.encrypt`` on a torch tensor spends its
time, the GPU's and the host's apart. Calls are queued behind ``torch.cuda._sleep`` (the
GPU held busy), so the host's time a call is timed alone, and CUDA events time the GPU's
over the queued calls. Microseconds a call, the best of three rounds. Prints one JSON
object.

    python3 docs/benchmarks/2026-11-28-lone-call.py [VARIANT]   # GPU / host us by size
    python3 docs/benchmarks/2026-11-28-lone-call.py parts       # the host's steps, 4 KiB

VARIANT (default ``base``) edits ``cl/aes_gcm.cl``'s gcm_crypt_hash in this process
before the build, to see what each part of the kernel costs (the results are wrong):
``nopair`` skips the pairing of the work-items' sums (ghash_pair_sums), ``notag`` the
tag's two products, ``noaes`` the AES of each block, ``bare`` all three. The variants
edit the pairing's lines, which the lone build no longer compiles after ``06890ee``:
their figures in docs/benchmarks are of ``8478fc6``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

import aescl
from aescl import aead
from aescl.engines.cuda import arrays as cuda_arrays
from aescl.engines.cuda import kernels
from aescl.engines.registry import array_kind_of

PAIR = "const ulong2 partial = ghash_pair_sums(sum, scratch, here, t, items, positions);"
TAG = """            const ulong2 hash =
                ghash_multiply_positions_global(partial, positions + 2u * GHASH_POSITION_ENTRIES)
                ^ ghash_multiply_positions_global(AES_ULONG2(0ul, 8ul * bytes), positions);"""
AES = "uint4 block = text ^ aes_encrypt_block(gcm_counter(j0, 1u + j), rk, te);"
EDITS = {
    "base": [],
    "nopair": [(PAIR, "const ulong2 partial = sum;")],
    "notag": [(TAG, "            const ulong2 hash = partial;")],
    "noaes": [(AES, "uint4 block = text ^ gcm_counter(j0, 1u + j);")],
}
EDITS["bare"] = EDITS["nopair"] + EDITS["notag"] + EDITS["noaes"]


def queued_us(call, calls: int = 400) -> tuple[float, float]:
    """(GPU us, host us) a call, ``calls`` queued behind a sleeping kernel."""
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    gpu = host = float("inf")
    for _ in range(3):
        torch.cuda._sleep(100_000_000)
        began, ended = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began.record()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        host = min(host, (time.perf_counter() - start) * 1e6 / calls)
        ended.record()
        torch.cuda.synchronize()
        gpu = min(gpu, began.elapsed_time(ended) * 1e3 / calls)
    return round(gpu, 1), round(host, 2)


def by_size(variant: str) -> dict[str, object]:
    built = kernels.load_source

    def edited(name: str) -> str:
        text = built(name)
        for old, new in EDITS[variant] if name == "aes_gcm.cl" else []:
            if text.count(old) != 1:
                raise SystemExit(f"{variant}: the kernel's lines are not there to edit")
            text = text.replace(old, new)
        return text

    kernels.load_source = edited
    cipher, nonce = aescl.AESGCM(os.urandom(32)), os.urandom(12)
    figures: dict[str, object] = {"variant": variant}
    for size in (64, 1024, 4096, 16384):
        x = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
        figures[f"{size} B: GPU, host us"] = queued_us(lambda x=x: cipher.encrypt(nonce, x, None))
    y = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    figures["torch.bitwise_xor 4 KiB: GPU, host us"] = queued_us(lambda: torch.bitwise_xor(y, y))
    return figures


def parts() -> dict[str, float]:
    """The host's us of each step of a 4 KiB call, each timed alone."""
    from cuda.bindings import driver

    cipher, nonce = aescl.AESGCM(os.urandom(32)), os.urandom(12)
    x = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    queued_us(lambda: cipher.encrypt(nonce, x, None))  # (the kept launch made)
    kind = array_kind_of(x)
    job = cipher._rows_job(kind)
    checked = aead._check_nonce(nonce)
    plan = cipher._one_plan(checked, None, 4096)
    kernels_, source, result, target = job._lone(x, 4112)
    j0, gpu = bytes(plan.j0s), kernels_._gpu
    kept = kernels_._kept_lone(4096, True)

    def launch() -> None:
        callers = gpu.enter()
        kept.launch(source, target, j0, target + 4096)
        gpu.leave(callers)

    def driver_launch() -> None:
        callers = gpu.enter()
        driver.cuLaunchKernel(*kept._call)
        gpu.leave(callers)

    steps = {
        "AESGCM.encrypt": lambda: cipher.encrypt(nonce, x, None),
        "array_kind_of": lambda: array_kind_of(x),
        "_check_nonce": lambda: aead._check_nonce(nonce),
        "kind.nbytes": lambda: kind.nbytes(x),
        "_one_plan": lambda: cipher._one_plan(checked, None, 4096),
        "job.seal_messages": lambda: job.seal_messages(x, plan),
        "job._lone (the result made)": lambda: job._lone(x, 4112),
        "torch.empty(4112)": lambda: torch.empty(4112, dtype=torch.uint8, device=x.device),
        "cuda_bytes": lambda: cuda_arrays.cuda_bytes(x, "the input"),
        "kernels.seal_lone": lambda: kernels_.seal_lone(source, target, 4096, j0),
        "enter, KeptLaunch.launch, leave": launch,
        "enter, cuLaunchKernel alone, leave": driver_launch,
        "enter, leave": lambda: gpu.leave(gpu.enter()),
        "KeyTables.used": lambda: kernels_._tables.used(gpu, kernels_._like, current=True),
        "kind.finish": lambda: kind.finish(x, result),
        "torch.bitwise_xor 4 KiB": lambda: torch.bitwise_xor(x, x),
    }
    return {name: queued_us(step)[1] for name, step in steps.items()}


if __name__ == "__main__":
    argument = sys.argv[1] if len(sys.argv) > 1 else "base"
    print(json.dumps(parts() if argument == "parts" else by_size(argument)))
