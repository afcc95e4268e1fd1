"""The OpenCL engine: a device's kernels behind the engine interface (aescl.engines),
its workers in workers.py, its own figures for ``aescl bench`` in measure.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._arrays import default_slice_bytes, input_array
from ...devices import Device
from ..interface import BlockTransform
from ..start_up import start_seconds
from . import measure, tuning
from .gcm import OpenclHostGcm
from .pipeline import PIECE_BYTES, pinned_empty, shares_host_memory, stages
from .workers import OpenclBlocks, OpenclHostChunks


class OpenclEngine:
    """The engine of one OpenCL device."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.piece_bytes = min(PIECE_BYTES, default_slice_bytes(device))
        self.holds_gil_for: frozenset[str] = frozenset()  # waits and copies release it
        self.on_host_cores = device.type == "cpu"

    def stages(self, *arrays: Any) -> bool:
        return stages(self.device, arrays)

    def in_interpreter(self, *arrays: Any) -> bool:
        return False  # the runtime's own threads compute; waits and copies release the GIL

    def host_array(self, nbytes: int) -> Any:
        """Host memory the device reads and writes directly: pinned for a device apart
        from host memory, ordinary memory for one that computes in it."""
        if self.on_host_cores or shares_host_memory(self.device):
            return np.empty(nbytes, np.uint8)
        return pinned_empty(nbytes, self.device)

    def blocks(self, transform: BlockTransform) -> OpenclBlocks:
        return OpenclBlocks(self.device, transform)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int) -> OpenclHostChunks:
        return OpenclHostChunks(key, base_nonce, self.device, batch_chunks)

    def gcm(self, key: bytes, nonce: bytes | None, mac_len: int, key_schedule: str,
            threads: int | None = None) -> OpenclHostGcm:  # (no host threads)
        return OpenclHostGcm(key, nonce, mac_len, self.device, key_schedule)

    def retune(self, progress: Any) -> None:
        if not self.device.is_simulator:  # (its settings are for coverage, not speed)
            tuning.store(self.device, tuning.tune(self.device, progress=progress))

    def device_figures(self, nbytes: int, min_seconds: float) -> dict[str, Any]:
        return {"build": measure.build_times(self.device),
                "start_s": start_seconds(self.device),
                "launch": tuning.describe(self.device),
                "transfer": measure.transfer_rates(self.device, nbytes, min_seconds)}

    def resident_seconds(self, mode: str, key: bytes, iv: bytes, data: Any,
                         output_bytes: int, min_seconds: float) -> tuple[float, float]:
        return measure.resident_seconds(self.device, mode, key, iv, input_array(data),
                                        output_bytes, min_seconds)
