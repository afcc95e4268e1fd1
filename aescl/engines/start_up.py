"""A device's start-up in a fresh process, as ``aescl bench`` times it for every engine:
what a job there pays before its first byte, over what one on the host engine pays
(the default device is chosen by it: aescl.rates, aescl.teams)."""

from __future__ import annotations

from .. import _python
from ..devices import Device

_FIRST_BLOCK = """
import os, sys, time
os.environ.pop("AESCL_DEVICE", None)
started = time.perf_counter()
import aescl
aescl.new(bytes(16), aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
          device=sys.argv[1]).encrypt(bytes(16))
print(time.perf_counter() - started)
"""


def start_seconds(device: Device, runs: int = 2) -> float | None:
    """What a job on ``device`` pays in a fresh interpreter before its first byte, over
    what one on the host engine pays: ``import aescl`` to one CTR block, each in a new
    process (OpenCL's platforms, a context, the kernel from the binary cache, which
    this process's runs filled; for CUDA, the driver, a context and the cached cubin),
    the least of ``runs``. None where a run failed."""
    import subprocess

    def first_block(spec: str) -> float | None:
        done = subprocess.run([*_python.command(code=_FIRST_BLOCK), spec], check=False,
                              env=_python.environment(),
                              capture_output=True, text=True, timeout=300)
        return float(done.stdout.split()[-1]) if done.returncode == 0 else None

    on_device = [first_block(device.id) for _ in range(runs)]
    on_host = [first_block("host") for _ in range(runs)]
    if None in on_device or None in on_host:
        return None
    # (At least a millisecond: a stored figure is positive.)
    return max(0.001, min(on_device) - min(on_host))  # type: ignore[type-var]


