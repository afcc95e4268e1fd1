"""Issue 57: one job over the GPUs of the host (2 GiB of ``aescl.pinned_empty(n, spec)`` in
and out, CTR-128 and the chunked format through the public API, best of 3 after a
warm-up) for one OpenCL GPU, the OpenCL team, one CUDA GPU, the CUDA team and ``all``,
against the N-process yardstick (one process a GPU, each CTR-128 on its own pinned
memory, started together, best rates summed); and the OpenCL team on memory pinned for
its first GPU only, as before 65e0501. Prints the figures as JSON.

    python3 docs/benchmarks/2026-11-27-gpu-team.py        # $TEAM_GIB: 2 by default
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import aescl
from aescl.timing import wall

NBYTES = int(os.environ.get("TEAM_GIB", "2")) << 30


def rate(run, tries: int = 3) -> float:
    """GB/s of the best of ``tries`` runs after a warm-up."""
    run()
    return round(NBYTES / min(wall(run) for _ in range(tries)) / 1e9, 1)


def team_figures(spec, key: bytes, nonce: bytes, source=None) -> tuple[float, float]:
    """(CTR-128, chunked) GB/s of one job on ``spec``, from ``source`` (default: pinned
    for ``spec``) into memory pinned for ``spec``."""
    source = source if source is not None else aescl.pinned_empty(NBYTES, spec)
    out = aescl.pinned_empty(NBYTES, spec)
    sealed = aescl.pinned_empty(aescl.chunked.sealed_size(NBYTES), spec)
    ctr = rate(lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce, device=spec)
               .encrypt(source, output=out))
    chunked = rate(lambda: aescl.chunked.encrypt(key, source, device=spec, output=sealed))
    return ctr, chunked


def yardstick_process(spec: str, start: float) -> None:
    """One process of the yardstick: CTR-128 on ``spec`` alone, from wall time ``start``."""
    key, nonce = os.urandom(16), os.urandom(8)
    source, out = aescl.pinned_empty(NBYTES, spec), aescl.pinned_empty(NBYTES, spec)

    def run() -> None:
        aescl.new(key, aescl.MODE_CTR, nonce=nonce, device=spec).encrypt(source, output=out)
    run()
    while time.time() < start:
        time.sleep(0.001)
    rates = []
    for _ in range(3):
        began = time.perf_counter()
        run()
        rates.append(NBYTES / (time.perf_counter() - began) / 1e9)
    print(json.dumps(rates))


def yardstick(specs: list[str]) -> list[float]:
    start = time.time() + 25  # (every process started and warmed up by then)
    processes = [subprocess.Popen([sys.executable, __file__, "yardstick", spec, str(start)],
                                  stdout=subprocess.PIPE, text=True) for spec in specs]
    return [round(max(json.loads(p.communicate()[0].strip().splitlines()[-1])), 1)
            for p in processes]


def main() -> None:
    from aescl.engines.opencl import pinned_empty as pinned_for_one
    from aescl.engines.opencl.pipeline import is_pinned

    key, nonce = os.urandom(32), os.urandom(8)
    opencl = [d.id for d in aescl.devices() if d.is_opencl and d.type == "gpu"]
    cuda = [d.id for d in aescl.devices() if d.is_cuda]
    figures: dict[str, object] = {"devices": [d.id for d in aescl.devices()]}
    for kind, specs in (("opencl", opencl), ("cuda", cuda)):
        each = yardstick(specs)
        figures[f"yardstick {kind}, {len(specs)} processes, CTR GB/s"] = round(sum(each), 1)
        figures[f"yardstick {kind}, each"] = each
    for spec in (opencl[:1], opencl, cuda[:1], cuda, "all"):
        label = spec if isinstance(spec, str) else ",".join(spec)
        figures[f"{label}: CTR, chunked GB/s"] = team_figures(spec, key, nonce)
    first_only = pinned_for_one(NBYTES, aescl.get_device(opencl[0]))
    figures["OpenCL team, memory pinned for its first GPU only"] = team_figures(
        opencl, key, nonce, source=first_only)
    probe = aescl.pinned_empty(1 << 20, opencl)
    figures["pinned for each OpenCL GPU"] = [is_pinned(probe, aescl.get_device(i))
                                             for i in opencl]
    print(json.dumps(figures))


if __name__ == "__main__":
    if sys.argv[1:2] == ["yardstick"]:
        yardstick_process(sys.argv[2], float(sys.argv[3]))
    else:
        main()
