"""Each device's measured rate, kept between runs beside the tuning data.

The default device is chosen by these (:class:`aescl.teams.DefaultTeam`), and a split
job's first ranges are sized by them (:mod:`aescl.scheduler`). Here too, the policy over
them: :func:`expected_rate` (measured in this process, else stored, else guessed from
the kind of device) and :func:`rate_kind`. A rate is GB/s from host memory to host
memory for one kind of work: ``blocks`` (ECB, CTR) or ``chunks`` (the chunked format,
AES-256-GCM), and each from memory the device reads directly (``blocks-pinned``,
``chunks-pinned``: a GPU's pinned memory, the host engine's shared memory), which the
scheduler uses for jobs on such arrays. ``aescl bench`` stores its host->host and
pinned->pinned figures at the largest size it measured, and an OpenCL device's start-up
in a fresh process (:data:`START`), which with the rates gives a job's expected time on
a device (:func:`expected_seconds`). A record is keyed by what the device is (vendor,
name, driver), so a new driver, or a new ``cryptography`` for the host engine, starts
unmeasured.

No numpy or OpenCL here: the default choice for a small job must not need them.
"""

from __future__ import annotations

import datetime
import functools
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from .devices import Device
    from .engines.interface import Engine

PINNED = "-pinned"  # the same from memory the device reads directly (pinned->pinned)
KINDS = ("blocks", "chunks", "blocks" + PINNED, "chunks" + PINNED)
# Not a rate: seconds from a fresh interpreter to a device's first job (import, OpenCL's
# platforms and context, the kernel from the binary cache), which ``aescl bench`` times.
START = "start-seconds"
# Below this size a figure says more about call overhead than about the device.
MIN_MEASURED_BYTES = 16 << 20


def rates_path() -> Path:
    from ._cache import cache_root

    return _rates_under(cache_root())


@functools.lru_cache(maxsize=8)
def _rates_under(root: Path) -> Path:
    return root / "tuning" / "rates.json"


def device_key(device: Device) -> str:
    # (The same GPU under OpenCL and under CUDA is two devices, each with its figures.)
    engine = "|cuda" if device.is_cuda else ""
    return f"{device.vendor}|{device.name}|{device.driver_version}{engine}"


# path -> (the file as it was read: inode, mtime, size; its records). Read again when
# the file changes: ``aescl bench`` in another process stores figures that a long-lived
# process (a notebook, a worker) should go by from then on.
_loaded: dict[str, tuple[tuple[int, int, int] | None, dict[str, Any]]] = {}


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of the store from another: every store replaces the
    file (write_cache_file), so a new one has a new inode."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


_MOST_GB_S = 1e5  # above any device's figure: a stored one beyond is not a measurement
_MOST_START_SECONDS = 600.0


def _sane(record: Any) -> bool:
    """Whether a stored device record holds figures a measurement could give."""
    if not isinstance(record, dict):
        return False
    for kind, figure in record.items():
        if kind == "date":
            continue
        most = {START: _MOST_START_SECONDS, "bytes": float(1 << 62)}.get(kind, _MOST_GB_S)
        if isinstance(figure, bool) or not isinstance(figure, int | float) \
                or not 0 < figure <= most:
            return False
    return True


def _load() -> dict[str, Any]:
    from ._cache import disk_cache_enabled, read_cache_json, say_once

    if not disk_cache_enabled():
        return {}
    path = rates_path()
    identity = _identity(path)
    known = _loaded.get(str(path))
    if known is not None and known[0] == identity:
        return known[1]
    data = read_cache_json(path)
    records = {device: record for device, record in data.items() if _sane(record)
               } if isinstance(data, dict) else {}
    if isinstance(data, dict) and len(records) < len(data):
        say_once(f"ignoring figures in {path} that no measurement gives; `aescl bench` "
                 "measures them again")
    _loaded[str(path)] = (identity, records)
    return records


def stored_rate(device: Device, kind: str) -> float | None:
    """The stored GB/s of ``device`` for ``kind`` of work, if it was measured."""
    record = _load().get(device_key(device), {})
    rate = record.get(kind) if isinstance(record, dict) else None
    return float(rate) if isinstance(rate, int | float) and rate > 0 else None


def store_start(device: Device, seconds: float) -> bool:
    """Keep a device's start-up in a fresh process (:data:`START`)."""
    return _store(device, {START: round(seconds, 3)}) if seconds > 0 else False


def _store(device: Device, figures: dict[str, Any]) -> bool:
    from ._cache import disk_cache_enabled, write_cache_file

    if not disk_cache_enabled():
        return False
    data = dict(_load())
    record = data.get(device_key(device))
    record = dict(record) if isinstance(record, dict) else {}
    record.update(figures)
    record["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data[device_key(device)] = record
    path = rates_path()
    write_cache_file(path, json.dumps(data, indent=1, sort_keys=True).encode())
    _loaded[str(path)] = (_identity(path), data)
    return True


def store_rates(device: Device, rates: dict[str, float], nbytes: int) -> bool:
    """Keep ``rates`` (kind -> GB/s, measured on ``nbytes`` of input) for ``device``.
    Figures from inputs below :data:`MIN_MEASURED_BYTES` are not kept. Returns whether
    anything was stored."""
    kept: dict[str, Any] = {kind: round(rate, 3) for kind, rate in rates.items()
                            if kind in KINDS and rate and rate > 0}
    if not kept or nbytes < MIN_MEASURED_BYTES:
        return False
    return _store(device, {**kept, "bytes": nbytes})


# ---- The rate policy ----------------------------------------------------------------

# Guessed rates (GB/s, host memory to host memory) of devices never measured, by kind of
# work; the host's are per core. From the figures in docs/benchmarks: a GPU behind
# pageable memory, the host engine at 2-5 GB/s per core for blocks, PoCL's CPU device at
# a tenth of that.
_GUESSED_GB_S = {
    ("gpu", "blocks"): 10.0, ("gpu", "chunks"): 8.0,
    ("accelerator", "blocks"): 5.0, ("accelerator", "chunks"): 4.0,
    ("cpu", "blocks"): 1.0, ("cpu", "chunks"): 0.1, ("cpu", "gcm"): 0.1,
    ("accelerator", "gcm"): 3.0,
}  # CPU devices guessed low: unmeasured, the host engine (no OpenCL start-up) goes first
_GUESSED_HOST_BLOCKS_GB_S_PER_CORE = 2.5
# The host engine's chunks a core: 0.85-1.1 GB/s on ordinary memory (16 cores, staged
# to its worker processes: 13.6-17.5 GB/s; the 2-core CI kind: 2.1-2.2) and 1.7-2.1 on
# shared memory (16 cores: 26.8-33.4), so 1.5 between them (2026-12-01). A
# guess of 3.0 GB/s for any number of cores, from when each AEAD call held the GIL, lost
# to PoCL's measured 5.7 on 16 cores, and ``all`` then sealed on PoCL at a third of what
# the host engine does there.
_GUESSED_HOST_CHUNKS_GB_S_PER_CORE = 1.5
# ``gcm``: one MODE_GCM stream on host data (bytes in, bytes out), which no ``aescl bench``
# figure measures, so it goes by these, taken from the plain calls on the 16-core H200
# host (1 GiB, docs/benchmarks): the host engine (pycryptodome's threads) 12.3-12.5 GB/s
# (2026-11-27); on 2026-12-02, with each engine's pieces in flight at once and their
# GHASH folded on the GPU, the CUDA engine sealed at 7.1-12.1 and opened (two passes
# over the text) at 5.9-8.7, NVIDIA's OpenCL at 6.9-7.5 and 5.2-5.6; on the 2-core CI
# kind the host engine ran 2.2-3.1. A stream is sequential, so a GPU's edge in bulk work
# does not carry over.
# The chunked format there: CUDA 7.3-7.4 against NVIDIA's OpenCL 5.5-5.7 on the same GPU.
_GUESSED_HOST_GCM_GB_S_PER_CORE = 0.75
_GUESSED_ENGINE_GB_S = {("cuda", "chunks"): 7.5, ("cuda", "gcm"): 8.0,
                        ("opencl", "gpu", "chunks"): 6.0, ("opencl", "gpu", "gcm"): 6.0}
# A GPU on pinned memory is bound by its PCIe link, which moves the input in and the
# output back at once: an H200's (PCIe 5 x16, 63 GB/s each way) ran CTR at 46.4-49.5 GB/s
# and the chunked format at 43.2-48 on memory pinned for it, 0.69-0.79 of its link
# (2026-11-27 to 2026-12-01, docs/benchmarks). Where it is not measured, 0.7 of the link.
# Behind pageable memory the link is not what bounds it, so that stays a guess by type.
_GUESSED_SHARE_OF_LINK = 0.7
# A device's start-up in a fresh process where ``aescl bench`` has not timed it: whole
# `aescl encrypt` runs on the H100 host spent 0.8-0.9 s more on the GPU than on the host
# engine for small files (docs/benchmarks).
GUESSED_START_SECONDS = 0.85
# A file job reads every byte from a file and writes one to another, on one thread each,
# whatever device computes: `cp` of 4 GiB in /dev/shm took 1.8-2.0 s on the H100 host,
# and `aescl encrypt --device host` of it 2.4-2.7 s (docs/benchmarks). No device makes
# a file job faster than this; where every candidate computes faster, start-up decides.
GUESSED_FILE_GB_S = 2.2


# (device id, kind of work) -> measured rate in bytes per second, over this process's jobs
measured: dict[tuple[str, str], float] = {}


def rate_kind(engine: Engine, kind: str, arrays: Sequence[Any]) -> str:
    """The kind of rate that describes ``engine`` doing ``kind`` of work on ``arrays``:
    ``kind + "-pinned"`` where the engine reads them directly and apart from the
    interpreter (a GPU's pinned memory, the host engine's shared memory), whose rates
    are several times its ordinary-memory ones (docs/benchmarks); else ``kind``. An
    OpenCL CPU device works the same on both."""
    if (arrays and not (engine.on_host_cores and engine.device.is_opencl)
            and not engine.stages(*arrays) and not engine.in_interpreter(*arrays)):
        return kind + PINNED
    return kind


def expected_rate(device: Device, kind: str, stored_first: bool = False) -> float:
    """Bytes per second ``device`` is expected to do ``kind`` of work at: as measured in
    this process (the conditions of now: what a split sizes its ranges by), else as
    stored (aescl.rates), else guessed from its kind. ``stored_first`` puts the stored
    figure first: ``aescl bench`` measured it on purpose, at a size that shows the device
    rather than one job's overheads (what the default device is chosen by).

    A ``-pinned`` kind (:func:`rate_kind`) that was neither measured nor stored is
    guessed from a GPU's PCIe link (:func:`pinned_guess`), else falls back to the plain
    kind."""
    stored = stored_rate(device, kind)
    plain = kind.removesuffix(PINNED)
    if plain != kind and stored is None and (device.id, kind) not in measured:
        link = pinned_guess(device)
        return link if link is not None else expected_rate(device, plain, stored_first)
    if stored is not None and stored_first:
        return stored * 1e9
    if (device.id, kind) in measured:
        return measured[device.id, kind]
    if stored is not None:
        return stored * 1e9
    if device.type == "host":
        if kind == "chunks":
            return _GUESSED_HOST_CHUNKS_GB_S_PER_CORE * device.compute_units * 1e9
        if kind == "gcm":
            return _GUESSED_HOST_GCM_GB_S_PER_CORE * device.compute_units * 1e9
        return _GUESSED_HOST_BLOCKS_GB_S_PER_CORE * device.compute_units * 1e9
    guessed = _GUESSED_ENGINE_GB_S.get((device.engine, kind)) or _GUESSED_ENGINE_GB_S.get(
        (device.engine, device.type, kind))
    return (guessed or _GUESSED_GB_S.get((device.type, kind), 1.0)) * 1e9


def pinned_guess(device: Device) -> float | None:
    """Bytes per second a GPU or accelerator never measured is guessed at on pinned
    memory (either kind of work): :data:`_GUESSED_SHARE_OF_LINK` of its PCIe link each
    way (:attr:`Device.pcie_gb_s`); None where its link is not known."""
    if device.type not in ("gpu", "accelerator") or device.pcie_gb_s is None:
        return None
    return _GUESSED_SHARE_OF_LINK * device.pcie_gb_s * 1e9


def only_guessed(device: Device, kind: str) -> bool:
    """Whether ``device``'s rate for ``kind`` of work is a guess: neither stored nor
    measured in this process."""
    return stored_rate(device, kind) is None and (device.id, kind) not in measured


def start_seconds(device: Device, started: bool) -> float:
    """What a job on ``device`` pays before its first byte: nothing on the host engine
    or once this process has ``started`` OpenCL; else the start-up ``aescl bench``
    timed for it, or :data:`GUESSED_START_SECONDS`."""
    if device.type == "host" or started:
        return 0.0
    stored = stored_rate(device, START)
    return GUESSED_START_SECONDS if stored is None else stored


def least_start_seconds() -> float:
    """The least start-up of any device timed here (the guess where none was): a job the
    host engine finishes sooner is not worth starting OpenCL to look at the devices."""
    timed = [record[START] for record in _load().values()
             if isinstance(record, dict) and isinstance(record.get(START), int | float)
             and record[START] > 0]
    return float(min(timed, default=GUESSED_START_SECONDS))


def fastest_seconds(nbytes: int, file_job: bool = False) -> float:
    """The least time any device could take over ``nbytes`` once started: none, but for
    a file job, whose bytes go no faster than the files'."""
    return nbytes / (GUESSED_FILE_GB_S * 1e9) if file_job else 0.0


def expected_seconds(device: Device, kind: str, nbytes: int, started: bool,
                     file_job: bool = False) -> float:
    """How long ``device`` is expected to take over ``nbytes`` of ``kind`` of work from
    now: its start-up (:func:`start_seconds`) and the bytes at its stored rate, at most
    the rate of reading and writing files for a ``file_job``."""
    rate = expected_rate(device, kind, stored_first=True)
    return start_seconds(device, started) + max(nbytes / rate, fastest_seconds(nbytes, file_job))
