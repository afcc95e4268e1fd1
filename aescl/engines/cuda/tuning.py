"""The CUDA engine's launch shape per GPU: threads per block and blocks per SM for the
kernels that stage the round tables, measured once per GPU and kept beside the cubins.

Like the OpenCL engine's tuning (aescl/engines/opencl/tuning.py): on a GPU's first use
AES-128 CTR runs over 256 MiB of device memory under each candidate, timed by CUDA
events, and the fastest whose output matches pycryptodome's is kept; ``$AESCL_TUNE=0``
keeps the default, and ``aescl bench --tune`` measures again. Every shape gives the
same bytes (the kernels stride over any grid); only the speed differs. On the H100 the
default, one block of 1024 threads per SM, was the fastest of the sweep in
docs/benchmarks; a GPU whose blocks hold fewer round tables (kernels.round_tables_for)
leaves room for more blocks per SM, which is what the other candidates are for.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import keyschedule
from ..._cache import (
    cache_root,
    disk_cache_enabled,
    read_cache_json,
    say_once,
    write_cache_file,
)
from ..interface import tuning_enabled
from ..sources import load_source
from ..tuning_record import TuningRecord
from .kernels import module, nvrtc_version
from .runtime import checked, cuda_device, launch_function

TUNING_VERSION = 1
THREADS = (256, 512, 1024)
BLOCKS_PER_SM = (1, 2, 4)
_TUNE_BYTES = 256 << 20
_REPEATS = 3

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LaunchShape:
    """Threads per block and blocks per SM of a table kernel's launch."""

    threads: int
    blocks_per_sm: int


DEFAULT = LaunchShape(1024, 1)


@dataclass(frozen=True)
class Trial:
    """One candidate's measurement: AES-128 CTR, kernel time, best of a few launches."""

    threads: int
    blocks_per_sm: int
    gb_s: float | None  # None: the shape could not launch on this GPU
    verified: bool | None = None  # output compared with pycryptodome (the winner only)

    @property
    def shape(self) -> LaunchShape:
        return LaunchShape(self.threads, self.blocks_per_sm)


@dataclass(frozen=True)
class Tuning(TuningRecord):
    """The result of tuning one GPU: the chosen shape and every trial."""

    TRIAL = Trial
    VERSION = TUNING_VERSION


def candidates() -> list[LaunchShape]:
    """The shapes tuning tries, the default first."""
    shapes = [DEFAULT]
    shapes += [LaunchShape(t, b) for t in THREADS for b in BLOCKS_PER_SM
               if LaunchShape(t, b) != DEFAULT]
    return shapes


def _driver_version() -> str:
    from cuda.bindings import driver

    version = checked(driver.cuDriverGetVersion())
    return f"CUDA {version // 1000}.{version % 1000 // 10}"


def tune(ordinal: int, shapes: list[LaunchShape] | None = None,
         data_bytes: int = _TUNE_BYTES, progress: Progress = lambda message: None) -> Tuning:
    """Time AES-128 CTR on GPU ``ordinal`` under each of ``shapes`` (default
    :func:`candidates`, whose first is the default, reported as such) and choose the
    fastest whose output matches pycryptodome's."""
    started = time.perf_counter()
    shapes = shapes or candidates()
    gpu = cuda_device(ordinal)
    data_bytes -= data_bytes % 16
    with gpu.lock:
        gpu.core.set_current()
        bench = _CtrBench(ordinal, data_bytes)
        try:
            trials: dict[LaunchShape, Trial] = {}
            for index, shape in enumerate(shapes):
                progress(f"cuda:{ordinal}: tuning, shape {index + 1} of {len(shapes)}")
                seconds = bench.best_seconds(shape)
                trials[shape] = Trial(shape.threads, shape.blocks_per_sm,
                                      None if seconds is None else
                                      round(data_bytes / seconds / 1e9, 2))
            chosen = None
            for trial in sorted((t for t in trials.values() if t.gb_s is not None),
                                key=lambda t: -(t.gb_s or 0.0)):
                verified = bench.matches_reference(trial.shape)
                trials[trial.shape] = Trial(trial.threads, trial.blocks_per_sm, trial.gb_s,
                                            verified)
                if verified:
                    chosen = trial.shape
                    break
        finally:
            bench.close()
    if chosen is None:
        raise RuntimeError(f"no launch shape of AES-128 CTR on cuda:{ordinal} matched "
                           "pycryptodome's output")
    return Tuning(
        device=gpu.core.name, driver=_driver_version(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        data_bytes=data_bytes, seconds=round(time.perf_counter() - started, 3),
        chosen=trials[chosen], default=trials[shapes[0]],
        trials=sorted(trials.values(), key=lambda t: -(t.gb_s or 0.0)),
    )


class _CtrBench:
    """AES-128 CTR over zeros in device memory (so the output is the keystream), launched
    as the engine launches it (workers.CudaBlocks) but with the shape given."""

    def __init__(self, ordinal: int, data_bytes: int) -> None:
        from cuda.bindings import driver

        self._gpu = gpu = cuda_device(ordinal)
        # (the counter's low 64 bits carry into the high ones after 5 blocks)
        self._key, self._counter = bytes(range(16)), (1 << 64) - 5
        kernel = module("aes_ctr.cl", gpu.defines(10), gpu.arch).get_kernel("aes_ctr_xor")
        self._kernel = kernel  # (its module stays loaded while this launches it)
        self._function = launch_function(kernel, "aes_ctr_xor", gpu.table_bytes)
        self._bytes = data_bytes
        self._source = int(checked(driver.cuMemAlloc(data_bytes)))
        self._target = int(checked(driver.cuMemAlloc(data_bytes)))
        checked(driver.cuMemsetD8(self._source, 0, data_bytes))
        self._stream = int(checked(driver.cuStreamCreate(0)))
        self._events = [checked(driver.cuEventCreate(0)) for _ in range(2)]
        values = [np.array(v, np.uint64) for v in (
            self._source, self._target, data_bytes // 16, self._counter >> 64,
            self._counter % 2**64, 2**64 - 1, 2**64 - 1)]
        values.append(keyschedule.kernel_key_argument(self._key, "host", False))
        self._values = values  # (the launch reads them through the pointers below)
        self._pointers = np.array([v.ctypes.data for v in values], np.uint64)

    def _launch(self, shape: LaunchShape) -> None:
        from cuda.bindings import driver

        grid = min(-(-self._bytes // 16 // shape.threads), self._gpu.sms * shape.blocks_per_sm)
        checked(driver.cuLaunchKernel(self._function, grid, 1, 1, shape.threads, 1, 1,
                                     self._gpu.table_bytes, driver.CUstream(self._stream),
                                     self._pointers.ctypes.data, 0))

    def best_seconds(self, shape: LaunchShape) -> float | None:
        """The fastest of a few launches, after one to warm up; None if it cannot run."""
        from cuda.bindings import driver

        start, end = self._events
        try:
            self._launch(shape)
            best = float("inf")
            for _ in range(_REPEATS):
                checked(driver.cuEventRecord(start, self._stream))
                self._launch(shape)
                checked(driver.cuEventRecord(end, self._stream))
                checked(driver.cuEventSynchronize(end))
                best = min(best, checked(driver.cuEventElapsedTime(start, end)) / 1e3)
        except RuntimeError:  # (this GPU cannot launch the shape)
            return None
        return max(best, 1e-9)

    def matches_reference(self, shape: LaunchShape) -> bool:
        from Crypto.Cipher import AES
        from cuda.bindings import driver

        checked(driver.cuMemsetD8(self._target, 0, self._bytes))
        self._launch(shape)
        checked(driver.cuStreamSynchronize(self._stream))
        out = np.empty(self._bytes, np.uint8)
        checked(driver.cuMemcpyDtoH(out, self._target, self._bytes))
        reference = AES.new(self._key, AES.MODE_CTR, nonce=b"", initial_value=self._counter)
        return bool(np.array_equal(out, np.frombuffer(reference.encrypt(bytes(self._bytes)),
                                                      np.uint8)))

    def close(self) -> None:
        from cuda.bindings import driver

        driver.cuStreamSynchronize(self._stream)
        for event in self._events:
            driver.cuEventDestroy(event)
        driver.cuStreamDestroy(self._stream)
        driver.cuMemFree(self._source)
        driver.cuMemFree(self._target)


# ---- stored results ---------------------------------------------------------------------


def tuning_path(ordinal: int) -> Path:
    """Where a GPU's tuning is kept: beside the cubins, under a key that changes with the
    GPU, the driver, NVRTC, the AES kernel source and its build options."""
    gpu = cuda_device(ordinal)
    identity = {"version": TUNING_VERSION, "name": gpu.core.name, "uuid": str(gpu.core.uuid),
                "driver": _driver_version(), "nvrtc": nvrtc_version(),
                "source": load_source("aes_ctr.cl"), "defines": sorted(gpu.defines(10).items())}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return cache_root() / "cuda" / "tuning" / f"{key}.json"


_memory: dict[int, Tuning] = {}  # ordinal -> tuning, for AESCL_NO_CACHE=1 and this process
_lock = threading.Lock()


def stored(ordinal: int) -> Tuning | None:
    """The GPU's stored tuning, if there is a readable one."""
    if ordinal in _memory or not disk_cache_enabled():
        return _memory.get(ordinal)
    data = read_cache_json(tuning_path(ordinal))
    try:
        if not isinstance(data, dict) or data.get("version") != TUNING_VERSION:
            return None
        tuning = Tuning.from_dict(data)
    except (ValueError, KeyError, TypeError):
        return None  # missing or damaged: tune again
    shape = tuning.chosen.shape
    if not (32 <= shape.threads <= 1024 and shape.threads % 32 == 0
            and 1 <= shape.blocks_per_sm <= 64):
        say_once(f"ignoring the stored tuning of CUDA GPU {ordinal}: its launch shape is "
                 "out of range; tuning again")
        return None
    _memory[ordinal] = tuning
    return tuning


def store(ordinal: int, tuning: Tuning) -> None:
    """Keep a tuning for later runs (in memory only when the disk cache is off)."""
    _memory[ordinal] = tuning
    if disk_cache_enabled():
        write_cache_file(tuning_path(ordinal), json.dumps(tuning.to_dict(), indent=1).encode())


def launch_shape(ordinal: int) -> LaunchShape:
    """The shape the table kernels launch with on GPU ``ordinal``: the default under
    ``$AESCL_TUNE=0``, else the stored tuning's, tuning the GPU now (once) if it has none.
    A tuning that cannot run (the GPU's memory is taken) leaves the default, for now."""
    if not tuning_enabled():
        return DEFAULT
    with _lock:
        tuning = stored(ordinal)
        if tuning is None:
            try:
                tuning = tune(ordinal)
            except RuntimeError:  # (CUDA's errors, out of memory among them)
                return DEFAULT
            store(ordinal, tuning)
    return tuning.chosen.shape
