"""A real program whose OpenCL queue waits behind a user event while one of its threads
runs aescl's work on that device: the work must wait for the queue with the GIL let go,
so that the program's main thread can open the gate.

pyopencl's event of a non-blocking copy from host memory waits, when it is freed, until
the copy is done, holding the GIL. aescl code that freed one while its copy waited held
every thread of the process meanwhile; here, that hangs the program.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# scenario(device) -> (the queue to hold, the work, a check of what the work returned)
Scenario = Callable[[Any], tuple[Any, Callable[[], Any], Callable[[Any], bool]]]


def _pipeline_piece(device: Any) -> tuple[Any, Callable[[], Any], Callable[[Any], bool]]:
    """A piece through the device's pipeline, its upload held back."""
    import numpy as np
    import pyopencl as cl

    from aescl.engines.opencl.pipeline import Piece, pipeline

    feeder = pipeline(device)
    source = np.zeros(4097, np.uint8)[1:]  # (not aligned: staged, then uploaded)
    source[:] = np.arange(4096) % 251
    target = np.zeros(4096, np.uint8)
    piece = Piece.through(device, source, target, lambda queue, device_in, device_out, _:
                          cl.enqueue_copy(queue, device_out, device_in, byte_count=4096))
    return (feeder._upload_queue, lambda: feeder.run([piece]),
            lambda _: bool(np.array_equal(target, source)))


def _gcm_keystream(device: Any) -> tuple[Any, Callable[[], Any], Callable[[Any], bool]]:
    """E(J0) of a GCM cipher (GcmKernels.keystream), behind the device's queue."""
    from Crypto.Cipher import AES

    from aescl.engines.opencl.gcm_kernels import GcmKernels

    key = bytes(range(16))
    kernels = GcmKernels(key, device, "host")
    j0 = bytes(15) + b"\x01"
    return (kernels.runtime.queue, lambda: kernels.keystream([j0], 0),
            lambda found: found == [AES.new(key, AES.MODE_ECB).encrypt(j0)])


SCENARIOS: dict[str, Scenario] = {"pipeline piece": _pipeline_piece,
                                  "gcm keystream": _gcm_keystream}


def runs_while_its_queue_waits(device_id: str, scenario: str) -> None:
    """Run ``scenario`` in a real program on ``device_id``; fail where it hangs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
    try:
        result = subprocess.run(
            [sys.executable, "-c", "import held_queue; held_queue.main()", device_id, scenario],
            capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{scenario}: a thread held the GIL while its device's queue waited")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def main() -> None:
    import pyopencl as cl

    import aescl

    device_id, scenario = sys.argv[1:3]
    device = next(d for d in aescl.devices() if d.id == device_id)
    queue, work, check = SCENARIOS[scenario](device)
    gate = cl.UserEvent(queue.context)
    cl.enqueue_barrier(queue, wait_for=[gate])
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(work()))
    worker.start()
    time.sleep(0.5)  # (the work has enqueued its copy by now)
    gate.set_status(cl.command_execution_status.COMPLETE)
    worker.join()
    print(bool(results) and check(results[0]))
