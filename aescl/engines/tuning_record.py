"""What an engine's tuning of one device keeps: the chosen launch settings and every
trial, as stored beside the kernel binaries. Each GPU engine tunes its own settings
(aescl/engines/opencl/tuning.py, aescl/engines/cuda/tuning.py); the record is one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar


def _is(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the type named ``kind`` (a bool is not a number here)."""
    if kind == "None":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, int | float) and math.isfinite(value)
    return kind == "str" and isinstance(value, str)


def _stored_trial(trial_type: type, values: Any) -> Any:
    """A trial from its stored form, each field of its declared type (else TypeError):
    a record is read from disk, where anything may be written."""
    if not isinstance(values, dict):
        raise TypeError("a stored trial is not a mapping")
    for each in fields(trial_type):
        if each.name in values and not any(
                _is(values[each.name], kind.strip()) for kind in str(each.type).split("|")):
            raise TypeError(f"a stored trial's {each.name} is not {each.type}")
    return trial_type(**values)


@dataclass(frozen=True)
class TuningRecord:
    """The result of tuning one device. A subclass names its trial type (``TRIAL``, a
    dataclass) and the version its stored form carries (``VERSION``)."""

    TRIAL: ClassVar[type]
    VERSION: ClassVar[int]

    device: str
    driver: str
    date: str
    data_bytes: int
    seconds: float
    chosen: Any
    default: Any
    trials: list[Any] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        stored = {k: v for k, v in data.items() if k != "version"}
        return cls(**{**stored, "chosen": _stored_trial(cls.TRIAL, data["chosen"]),
                      "default": _stored_trial(cls.TRIAL, data["default"]),
                      "trials": [_stored_trial(cls.TRIAL, t) for t in data["trials"]]})
