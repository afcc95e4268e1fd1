"""What an engine's tuning of one device keeps: the chosen launch settings and every
trial, as stored beside the kernel binaries. Each GPU engine tunes its own settings
(aescl/engines/opencl/tuning.py, aescl/engines/cuda/tuning.py); the record is one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


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
        fields = {k: v for k, v in data.items() if k != "version"}
        return cls(**{**fields, "chosen": cls.TRIAL(**data["chosen"]),
                      "default": cls.TRIAL(**data["default"]),
                      "trials": [cls.TRIAL(**t) for t in data["trials"]]})
