"""aescl/engines/cuda/measure.py: the CUDA engine's figures in ``aescl bench``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cuda_arrays import (
    needs_gpu,
)


@needs_gpu
def test_aescl_bench_reports_the_cuda_engine_and_stores_its_rates(tmp_path):
    env = {**os.environ, "AESCL_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "aescl", "bench", "--device", "cuda",
                           "--quick", "--sizes", "1M,64M", "--mode", "ctr", "--mode",
                           "gcm-chunked", "--key-bits", "256", "--json"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    gpu = json.loads(done.stdout)["targets"][0]
    assert gpu["id"] == "cuda:0" and gpu["backend"] == "cuda"
    assert gpu["build"]["cold_s"] > 0 and gpu["start_s"] > 0
    assert gpu["transfer"]["pinned_h2d_gb_s"] > 0
    for row in gpu["results"]:
        assert row["verified"] is True
        assert min(row["kernel_gb_s"], row["resident_gb_s"], row["host_gb_s"],
                   row["pinned_gb_s"]) > 0
    stored = json.loads((tmp_path / "tuning" / "rates.json").read_text())
    record = next(value for name, value in stored.items() if name.endswith("|cuda"))
    assert record["blocks"] > 0 and record["chunks"] > 0 and record["start-seconds"] > 0
    # The GPU was tuned on first use (the bench's first launch) and says so.
    tuned = gpu["launch"]["tuned"]
    assert tuned is not None and tuned["gb_s"] > 0 and tuned["trials"] == 9
    assert gpu["launch"]["round_tables"] in (1, 2, 4)
