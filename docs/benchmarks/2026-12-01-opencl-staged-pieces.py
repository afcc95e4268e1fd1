"""Issue 57, item 1 ("pinned and ordinary", both engines): the first OpenCL GPU's jobs on
ordinary numpy arrays (pages touched) and on its pinned memory, at 64 MiB, 256 MiB and 2
GiB: CTR-128, sealing and opening with ``output=``, best of 3 after a warm-up, GB/s.
``$PROBE_SLOTS`` sets the pipeline's pieces in flight (its own by default). Prints JSON,
labelled with the first argument (which build ran it).

    python3 docs/benchmarks/2026-12-01-opencl-staged-pieces.py LABEL
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from one_gpu_jobs import OrdinaryJobs, PinnedJobs, best, first_device

from aescl.engines.opencl import pipeline


def main(label: str) -> None:
    if os.environ.get("PROBE_SLOTS"):
        pipeline.SLOTS = int(os.environ["PROBE_SLOTS"])
    spec = first_device("opencl")
    figures: dict[str, Any] = {"build": label, "device": spec, "slots": pipeline.SLOTS}
    for mib in (64, 256, 2048):
        os.environ["PROBE_MIB"] = str(mib)
        for memory, data in (("ordinary", OrdinaryJobs(spec, mib << 20)),
                             ("pinned", PinnedJobs(spec))):
            figures[f"{mib} MiB {memory}"] = {name: data.gb_s(best(job))
                                              for name, job in data.jobs().items()}
            assert data.opened_intact()
            del data
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
