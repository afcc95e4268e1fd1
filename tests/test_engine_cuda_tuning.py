"""aescl/engines/cuda/tuning.py: launch shapes, tuned once per GPU and read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cuda_arrays import (
    needs_gpu,
)


def test_the_cuda_launch_shapes_start_with_the_default_and_a_tuning_reads_back():
    from aescl.engines.cuda import tuning

    shapes = tuning.candidates()
    assert shapes[0] == tuning.DEFAULT and len(set(shapes)) == len(shapes) == 9
    trial = tuning.Trial(512, 2, 700.5, True)
    kept = tuning.Tuning("GPU", "CUDA 13.0", "2026-11-24T00:00:00+00:00", 1 << 28, 1.5,
                         trial, tuning.Trial(1024, 1, 690.0), [trial])
    assert tuning.Tuning.from_dict(json.loads(json.dumps(kept.to_dict()))) == kept
    assert kept.chosen.shape == tuning.LaunchShape(512, 2)


@needs_gpu
def test_a_gpu_is_tuned_once_and_later_processes_read_the_tuning(tmp_path, monkeypatch):
    """The first launch tunes the GPU (tuning.launch_shape): every candidate timed, the
    fastest checked against pycryptodome, and the result kept beside the cubins, where a
    later process finds it instead of tuning again. $AESCL_TUNE=0 keeps the default."""
    from aescl.engines.cuda import tuning

    monkeypatch.setenv("AESCL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_memory", {})
    shape = tuning.launch_shape(0)
    kept = tuning.stored(0)
    assert kept is not None and kept.chosen.shape == shape and kept.chosen.verified
    assert len(kept.trials) == 9 and all(t.gb_s for t in kept.trials)
    assert tuning.tuning_path(0).is_file()
    later = subprocess.run(
        [sys.executable, "-c", "from aescl.engines.cuda import tuning; "
         "t = tuning.stored(0); print(t.date, t.chosen.threads, t.chosen.blocks_per_sm)"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "AESCL_CACHE_DIR": str(tmp_path)})
    assert later.stdout.split() == [kept.date, str(shape.threads), str(shape.blocks_per_sm)]
    monkeypatch.setenv("AESCL_TUNE", "0")
    assert tuning.launch_shape(0) == tuning.DEFAULT
