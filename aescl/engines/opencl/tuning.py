"""Per-device autotuning of how kernels are launched.

Three launch settings matter to the AES kernels' speed and are device-specific:
the work-group size, the grid (work-groups per compute unit, which sets how
many blocks each work-item takes in the grid-stride loop) and the number of
round-table copies in __local memory (fewer copies leave room for more
resident groups; more copies remove bank conflicts).

:func:`launch_config` is what every mode launches with. On a GPU, the first
use times the AES-128 CTR kernel under each candidate setting
(:func:`candidates`) on data in device memory, keeps the fastest whose output
matches pycryptodome's, and stores the result beside the kernel binaries, keyed
like them on the device, the driver and the kernel source. Later runs read it.
CPUs keep their defaults unless tuned explicitly (``aescl bench --tune``, or
:func:`tune` and :func:`store`); the simulator always keeps its own. Every
setting gives bit-identical output; tuning changes only speed.

``$AESCL_TUNE=0`` ignores stored results and never tunes: the defaults of
:func:`.kernels.default_config` apply, as before tuning existed.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl
from Crypto.Cipher import AES

from ... import _python
from ..._cache import (
    cache_root,
    disk_cache_enabled,
    read_cache_json,
    say_once,
    write_cache_file,
)
from ...devices import Device
from ..interface import tuning_enabled
from ..tuning_record import TuningRecord
from .kernels import (
    LaunchConfig,
    aes_options,
    cache_key,
    core_variant,
    default_config,
    kernel,
    key_argument,
    load_source,
    table_lanes,
    with_assembled_rounds,
    without_hardware_rounds,
    without_wide_rounds,
)
from .runtime import device_runtime

TUNING_VERSION = 1  # bump when the candidates or the measurement change
_TUNE_BYTES = 256 << 20  # long enough for a GPU launch to dwarf its overhead
_CPU_TUNE_BYTES = 16 << 20
_REPEATS = 3
_GPU_GROUP_SIZES = (64, 128, 256, 512, 1024)
_GPU_GROUPS_PER_UNIT = (2, 4, 8, 16, 32)
_CPU_GROUP_SIZES = (16, 64, 256)
_CPU_GROUPS_PER_UNIT = (1, 4, 16)
_MOST_GROUPS_PER_UNIT = 1 << 10  # far above any candidate: a stored grid beyond is not ours

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Trial:
    """One candidate's measurement: AES-128 CTR, kernel time, best of a few runs."""

    work_group_size: int
    max_work_groups: int
    table_lanes: int
    gb_s: float | None  # None: the candidate could not run (too large for the kernel)
    verified: bool | None = None  # output compared with pycryptodome (the winner only)


@dataclass(frozen=True)
class Tuning(TuningRecord):
    """The result of tuning one device: the chosen settings and every trial."""

    TRIAL = Trial
    VERSION = TUNING_VERSION


def candidates(device: Device) -> list[LaunchConfig]:
    """The settings tuning tries on a device, the default among them."""
    base = checked_default_config(device)
    if device.type == "gpu":
        sizes, per_unit = _GPU_GROUP_SIZES, _GPU_GROUPS_PER_UNIT
    else:
        sizes, per_unit = _CPU_GROUP_SIZES, _CPU_GROUPS_PER_UNIT
    found = [base]
    for size in (s for s in sizes if s <= device.max_work_group_size):
        lane_choices = [1]
        if base.tables_in_local:
            most = table_lanes(device.local_mem_bytes, size, tables=base.round_tables)
            lane_choices = [1 << i for i in range(most.bit_length())]
        for groups in per_unit:
            for lanes in lane_choices:
                config = replace(base, work_group_size=size,
                                 max_work_groups=device.compute_units * groups, table_lanes=lanes)
                if config not in found:
                    found.append(config)
    return found


def _trial(config: LaunchConfig, gb_s: float | None, verified: bool | None = None) -> Trial:
    return Trial(config.work_group_size, config.max_work_groups, config.table_lanes, gb_s,
                 verified)


def tune(device: Device, configs: list[LaunchConfig] | None = None,
         data_bytes: int | None = None, progress: Progress = lambda message: None) -> Tuning:
    """Time AES-128 CTR under each of ``configs`` (default :func:`candidates`, whose
    first is the device's default, reported as such) and choose the fastest whose
    output matches pycryptodome's."""
    started = time.perf_counter()
    configs = configs or candidates(device)
    if data_bytes is None:
        data_bytes = _TUNE_BYTES if device.type == "gpu" else _CPU_TUNE_BYTES
        data_bytes = min(data_bytes, device.max_alloc_bytes // 4, device.global_mem_bytes // 8)
    data_bytes -= data_bytes % 16
    bench = _CtrBench(device, data_bytes)
    timed: list[tuple[float, LaunchConfig]] = []
    trials: dict[LaunchConfig, Trial] = {}
    for index, config in enumerate(configs):
        progress(f"{device.name}: tuning, setting {index + 1} of {len(configs)}")
        seconds = bench.best_seconds(config)
        trials[config] = _trial(config, None if seconds is None else data_bytes / seconds / 1e9)
        if seconds is not None:
            timed.append((seconds, config))
    chosen = None
    for _, config in sorted(timed, key=lambda pair: pair[0]):
        verified = bench.matches_reference(config)
        trials[config] = replace(trials[config], verified=verified)
        if verified:
            chosen = config
            break
    if chosen is None:
        raise RuntimeError(f"no launch setting of AES-128 CTR on {device.name} matched "
                           "pycryptodome's output")
    return Tuning(
        device=device.name, driver=device.driver_version,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        data_bytes=data_bytes, seconds=round(time.perf_counter() - started, 3),
        chosen=trials[chosen], default=trials[configs[0]],
        trials=sorted(trials.values(), key=lambda t: -(t.gb_s or 0.0)),
    )


class _CtrBench:
    """AES-128 CTR over zeros in device memory, so the output is the keystream."""

    def __init__(self, device: Device, data_bytes: int) -> None:
        self._device = device
        self._runtime = device_runtime(device)
        self._blocks = data_bytes // 16
        context = self._runtime.context
        self._key = os.urandom(16)
        self._counter = os.urandom(8) + bytes(8)
        self._source = cl.Buffer(context, cl.mem_flags.READ_ONLY, data_bytes)
        cl.enqueue_fill_buffer(self._runtime.queue, self._source, np.uint8(0), 0, data_bytes)
        self._target = cl.Buffer(context, cl.mem_flags.READ_WRITE, data_bytes)
        self._key_argument = key_argument(self._key, "host", False)

    def _launch(self, config: LaunchConfig) -> Any:
        ctr = kernel(self._device, "aes_ctr.cl", aes_options(10, "host", config), "aes_ctr_xor")
        limit = ctr.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                        self._device.cl_device)
        group = config.work_group_size
        if group > limit:
            return None
        groups = min(config.max_work_groups, -(-self._blocks // group))
        hi = int.from_bytes(self._counter[:8], "big")
        ctr.set_args(self._source, self._target, np.uint64(self._blocks), np.uint64(hi),
                     np.uint64(0), np.uint64(0), np.uint64(2**64 - 1), self._key_argument)
        return cl.enqueue_nd_range_kernel(self._runtime.queue, ctr, (groups * group,), (group,))

    def best_seconds(self, config: LaunchConfig) -> float | None:
        """The fastest of a few launches, after one to warm up; None if it cannot run."""
        try:
            warm = self._launch(config)
            if warm is None:
                return None
            warm.wait()
            times = []
            for _ in range(_REPEATS):
                event = self._launch(config)
                event.wait()
                times.append((event.profile.end - event.profile.start) * 1e-9)
        except cl.Error:  # out of resources for this shape: not a candidate here
            return None
        return max(min(times), 1e-9)

    def matches_reference(self, config: LaunchConfig) -> bool:
        self._launch(config).wait()
        out = np.empty(self._blocks * 16, np.uint8)
        cl.enqueue_copy(self._runtime.queue, out, self._target)
        reference = AES.new(self._key, AES.MODE_CTR, nonce=b"", initial_value=self._counter)
        return bool(np.array_equal(out, np.frombuffer(reference.encrypt(bytes(out.nbytes)),
                                                      np.uint8)))


# ---- stored results ---------------------------------------------------------------------


def tuning_path(device: Device) -> Path:
    """Where a device's tuning is kept: beside the kernel binaries, under a key that
    changes with the device, the driver, pyopencl and the AES kernel source."""
    options = f"tuning-v{TUNING_VERSION}"
    key = cache_key(device, load_source("aes_ctr.cl"), options)
    return cache_root() / "tuning" / f"{key}.json"


def stored(device: Device) -> Tuning | None:
    """The device's stored tuning, if there is a readable one."""
    if not disk_cache_enabled():
        return _memory.get(device.id)
    data = read_cache_json(tuning_path(device))
    try:
        if not isinstance(data, dict) or data.get("version") != TUNING_VERSION:
            return None
        tuning: Tuning = Tuning.from_dict(data)
    except (ValueError, KeyError, TypeError):
        return None  # missing or damaged: tune again
    chosen = tuning.chosen
    if not (1 <= chosen.work_group_size <= device.max_work_group_size
            and 1 <= chosen.max_work_groups <= _MOST_GROUPS_PER_UNIT * device.compute_units
            and 1 <= chosen.table_lanes <= 1 << 10):
        say_once(f"ignoring the stored tuning of {device.name}: its settings are out of "
                  "range; tuning again")
        return None
    return tuning


def store(device: Device, tuning: Tuning) -> None:
    """Keep a tuning for later runs (in memory only when the disk cache is off)."""
    _memory[device.id] = tuning
    _configs.pop(device.id, None)
    if not disk_cache_enabled():
        return
    write_cache_file(tuning_path(device), json.dumps(tuning.to_dict(), indent=1).encode())


_memory: dict[str, Tuning] = {}  # device id -> tuning, for AESCL_NO_CACHE=1
_configs: dict[str, tuple[tuple[str, ...], LaunchConfig]] = {}  # device id -> (environment, config)


def _environment() -> tuple[str, ...]:
    names = ("AESCL_TUNE", "AESCL_TABLE_LANES", "AESCL_ROUND_TABLES", "AESCL_HARDWARE_ROUNDS",
             "AESCL_BLOCKS_PER_ITEM", "AESCL_WIDE_ROUNDS", "AESCL_ASSEMBLED_ROUNDS",
             "AESCL_CACHE_DIR",
             "AESCL_NO_CACHE")
    return tuple(os.environ.get(name, "") for name in names)


# The process that checks the AES instructions sets this, so that it does not check again.
_CHECKING_ROUNDS = "_AESCL_CHECKING_ROUNDS"
_rounds_checked: dict[str, bool] = {}  # check key -> whether the rounds worked


def hardware_rounds_work(device: Device, config: LaunchConfig) -> bool:
    """Whether ``device`` builds and runs the AES instructions of ``config`` (the wide
    rounds where it asks for them, else the 128-bit ones) correctly, tried once in a
    separate process and remembered (in memory, and on disk beside the kernel
    binaries): a compiler that cannot generate them may abort the process that asks
    (aes_vendor.h), and an abort cannot be caught. The check runs CTR, ECB both ways
    and the chunked format both ways on the device, compared with pycryptodome and the
    host engine (``python -m aescl._rounds_check``)."""
    import subprocess

    if os.environ.get(_CHECKING_ROUNDS):
        return True  # (this is the checking process)
    sources = "".join(load_source(name) for name in ("aes_ctr.cl", "aes_ecb.cl",
                                                      "chunk_seal.cl"))
    key = cache_key(device, sources, aes_options(14, "host", config))
    if key in _rounds_checked:
        return _rounds_checked[key]
    path = cache_root() / "checks" / f"hardware-rounds-{key}.json"
    record = read_cache_json(path) if disk_cache_enabled() else None
    known = record.get("works") if isinstance(record, dict) else None
    if not isinstance(known, bool):
        environment = _python.environment(AESCL_WIDE_ROUNDS=str(config.wide_rounds),
                                          AESCL_ASSEMBLED_ROUNDS=str(config.assembled_rounds),
                                          AESCL_BLOCKS_PER_ITEM=str(config.blocks_per_item),
                                          **{_CHECKING_ROUNDS: "1"})
        try:
            known = subprocess.run(
                [*_python.command(module="aescl._rounds_check"), device.id],
                env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, timeout=_ROUNDS_CHECK_SECONDS).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _rounds_checked[key] = False  # (not kept on disk: it may pass next time)
            return False
        if disk_cache_enabled():
            write_cache_file(path, json.dumps({"works": known}).encode())
    _rounds_checked[key] = known
    return known


_ROUNDS_CHECK_SECONDS = 300  # a dozen kernel builds on a slow or busy machine


def checked_default_config(device: Device) -> LaunchConfig:
    """The device's defaults (kernels.default_config), on the AES instructions they ask
    for only where those were checked to work there (:func:`hardware_rounds_work`), the
    first that works of: the wide ones; the wide ones beside the 128-bit ones as inline
    assembly (where the compiler drops the builtins' target attribute: aes_vendor.h);
    the 128-bit ones; those as inline assembly. Else the portable tables."""
    config = default_config(device)
    if not config.hardware_rounds:
        return config
    tried = [config, with_assembled_rounds(config)]
    if config.wide_rounds:
        narrow = without_wide_rounds(config)
        tried += [narrow, with_assembled_rounds(narrow)]
    for candidate in dict.fromkeys(tried):  # (in order; asked for asm already: once)
        if hardware_rounds_work(device, candidate):
            return candidate
    return without_hardware_rounds(config)


def launch_config(device: Device) -> LaunchConfig:
    """The launch settings every mode uses on ``device``: the defaults, with the
    work-group size, grid and table copies of the device's tuning when there is
    one. A GPU with none is tuned now, once (a few seconds, stored). A CPU whose
    defaults ask for the AES instructions gets them once they were checked to work
    there (:func:`checked_default_config`)."""
    environment = _environment()
    known = _configs.get(device.id)
    if known is not None and known[0] == environment:
        return known[1]
    config = base = checked_default_config(device)
    if tuning_enabled() and device.type != "simulator":
        tuning = stored(device)
        if tuning is None and device.type == "gpu":
            with device_runtime(device).lock:  # one tuning, timed with the device to itself
                tuning = stored(device)
                if tuning is None:
                    tuning = tune(device)
                    store(device, tuning)
        if tuning is not None:
            chosen = tuning.chosen
            lanes = base.table_lanes
            if base.tables_in_local:
                lanes = table_lanes(device.local_mem_bytes, chosen.work_group_size,
                                    chosen.table_lanes, base.round_tables)
            config = replace(base, work_group_size=chosen.work_group_size,
                             max_work_groups=chosen.max_work_groups, table_lanes=lanes)
    _configs[device.id] = (environment, config)
    return config


def describe(device: Device) -> dict[str, Any]:
    """The settings in use on a device and where they came from, for reports."""
    config = launch_config(device)
    tuning = stored(device) if tuning_enabled() else None
    return {"work_group_size": config.work_group_size,
            "max_work_groups": config.max_work_groups,
            "table_lanes": config.table_lanes,
            "round_tables": config.round_tables,
            # What the rounds compiled to there: a CPU whose AES instructions did not
            # run (hardware_rounds_work) is on the tables, ten times slower.
            "rounds": core_variant(device, aes_options(10, "host", config)),
            "tuned": None if tuning is None else {
                "date": tuning.date, "gb_s": tuning.chosen.gb_s,
                "default_gb_s": tuning.default.gb_s, "trials": len(tuning.trials),
                "seconds": tuning.seconds}}

