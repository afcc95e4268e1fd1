"""Each device's measured rate, kept between runs beside the tuning data.

The scheduler chooses the default device by these (:class:`aescl.scheduler.DefaultTeam`)
and sizes a split job's first ranges by them. A rate is GB/s from host memory to host
memory for one kind of work: ``blocks`` (ECB, CTR) or ``chunks`` (the chunked format,
AES-256-GCM), and each from memory the device reads directly (``blocks-pinned``,
``chunks-pinned``: a GPU's pinned memory, the host engine's shared memory), which the
scheduler uses for jobs on such arrays. ``aescl bench`` stores its host->host and
pinned->pinned figures at the largest size it measured. A record is keyed by what the
device is (vendor, name, driver), so a new driver, or a new ``cryptography`` for the
host engine, starts unmeasured.

No numpy or OpenCL here: the default choice for a small job must not need them.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from .devices import Device

PINNED = "-pinned"  # the same from memory the device reads directly (pinned->pinned)
KINDS = ("blocks", "chunks", "blocks" + PINNED, "chunks" + PINNED)
# Below this size a figure says more about call overhead than about the device.
MIN_MEASURED_BYTES = 16 << 20


def rates_path() -> Path:
    from ._cache import cache_root

    return cache_root() / "tuning" / "rates.json"


def device_key(device: Device) -> str:
    return f"{device.vendor}|{device.name}|{device.driver_version}"


_loaded: dict[str, dict[str, Any]] = {}  # path -> its records, read once per process


def _load() -> dict[str, Any]:
    from ._cache import disk_cache_enabled

    if not disk_cache_enabled():
        return {}
    path = str(rates_path())
    if path not in _loaded:
        try:
            data = json.loads(rates_path().read_text())
        except (OSError, ValueError):
            data = {}
        _loaded[path] = data if isinstance(data, dict) else {}
    return _loaded[path]


def stored_rate(device: Device, kind: str) -> float | None:
    """The stored GB/s of ``device`` for ``kind`` of work, if it was measured."""
    record = _load().get(device_key(device), {})
    rate = record.get(kind) if isinstance(record, dict) else None
    return float(rate) if isinstance(rate, int | float) and rate > 0 else None


def store_rates(device: Device, rates: dict[str, float], nbytes: int) -> bool:
    """Keep ``rates`` (kind -> GB/s, measured on ``nbytes`` of input) for ``device``.
    Figures from inputs below :data:`MIN_MEASURED_BYTES` are not kept. Returns whether
    anything was stored."""
    from ._cache import disk_cache_enabled, write_cache_file

    kept = {kind: round(rate, 3) for kind, rate in rates.items()
            if kind in KINDS and rate and rate > 0}
    if not kept or nbytes < MIN_MEASURED_BYTES or not disk_cache_enabled():
        return False
    data = dict(_load())
    record = data.get(device_key(device))
    record = dict(record) if isinstance(record, dict) else {}
    record.update(kept)
    record["bytes"] = nbytes
    record["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data[device_key(device)] = record
    write_cache_file(rates_path(), json.dumps(data, indent=1, sort_keys=True).encode())
    _loaded[str(rates_path())] = data
    return True
