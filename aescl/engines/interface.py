"""The engine interface: what every engine does, and the values it takes. It imports
nothing from aescl but the errors (and the Device type, for type checkers), so that an
engine package and the layers above it can both depend on it.

An engine runs on one :class:`~aescl.devices.Device`. The scheduler
(:mod:`aescl.scheduler`) hands every engine the same position-addressed work, so
neither modes nor the format ever ask which device they are on.

The interface, for a job the scheduler splits into ranges:

* ``engine.blocks(transform)`` -> a worker whose ``run(source, target, ranges,
  first_block)`` applies ``transform`` to the 16-byte blocks of each ``(start, stop)``
  block range it pulls from ``ranges`` (``source`` and ``target`` are whole-job
  arrays, possibly the same memory, whose block ``i`` is the transform's block
  ``first_block + i``); ``keystream(index)`` gives block ``index``'s keystream (CTR).
* ``engine.gcm(key, nonce, mac_len, key_schedule)`` -> a streaming GCM object with
  pycryptodome's calls (one sequential stream: it runs on one engine).
* ``engine.chunks(key, base_nonce, batch_chunks)`` -> a worker that seals and opens the chunked
  format's chunks: ``seal_ranges(plaintext, sealed, first, ranges)`` and
  ``open_ranges(sealed, plaintext, first, ranges)`` over whole chunks (chunk ranges
  relative to the arrays, whose chunk 0 is message chunk ``first``); ``seal`` and
  ``open`` for a short run that may end in the final chunk. ``batch_chunks`` is the
  chunks per device launch, for an engine that launches.

``ranges`` is an iterator the worker may pull from on several threads; a worker
pulls only as fast as it works, which is what lets a faster engine take more.

What the scheduler asks of an engine when it decides who takes part in a split:
``on_host_cores`` (it computes on the host's own cores: the host engine, an OpenCL
CPU device), ``stages(*arrays)`` (a job on these host arrays would pass through
staging copies made on the host's cores), ``in_interpreter(*arrays)`` (the engine's
work on these arrays runs on this interpreter's threads, so it competes for the GIL
with a GPU's feeding thread: the host engine's, unless the arrays lie in shared
memory its worker processes map) and ``host_array(nbytes)`` (host memory the engine
reads and writes directly: pinned memory for a GPU).

What ``aescl bench`` asks of an engine besides library calls: ``device_figures(nbytes,
min_seconds)`` (``build``, ``launch``, ``transfer`` and ``start_s``: kernel build times,
launch settings, transfer rates of ``nbytes``, the device's start-up in a fresh process;
empty where the engine has none) and
``resident_seconds(mode, key, iv, data, output_bytes, min_seconds)`` (the kernel-only
and the device-resident seconds of one configuration on data already on the device).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import as_bytes

if TYPE_CHECKING:
    from ..devices import Device

BLOCK_SIZE = 16
MODE_GCM = 11  # pycryptodome's value; every engine's GCM stream reports it as its .mode
KEY_SCHEDULES = ("host", "device")  # where an OpenCL kernel's round keys are expanded
DEFAULT_BATCH_CHUNKS = 1024  # chunks per batch: 16 MiB, one device launch
MAX_BATCH_CHUNKS = 1 << 16  # 1 GiB: the most one batch (and one device allocation) takes
# Block and chunk ranges: (start, stop), relative to the job's arrays.
Ranges = Iterator[tuple[int, int]]


@dataclass(frozen=True)
class BlockTransform:
    """What a block job does to each 16-byte block: ECB one way, or CTR's keystream XOR.

    For CTR, ``counter`` is the counter block of the job's block 0 as a 128-bit
    number; the low ``counter_bits`` bits count and wrap within themselves, the bits
    above them (the nonce) never change.
    """

    key: bytes = b""
    decrypt: bool = False
    counter: int | None = None
    counter_bits: int = 128
    key_schedule: str = "host"  # OpenCL only: expand round keys on the host or the device
    threads: int | None = None  # host engine only: at most this many threads (None: all)

    @property
    def is_ctr(self) -> bool:
        return self.counter is not None

    @property
    def kernel(self) -> tuple[str, str, bool]:
        """The kernel every GPU engine runs for it: its source in ``cl/``, its name, and
        whether it takes the decryption round keys."""
        if self.is_ctr:
            return "aes_ctr.cl", "aes_ctr_xor", False
        if self.decrypt:
            return "aes_ecb.cl", "aes_ecb_decrypt", True
        return "aes_ecb.cl", "aes_ecb_encrypt", False

    def counter_at(self, index: int) -> int:
        """The counter block of block ``index`` of the job."""
        assert self.counter is not None
        mask = (1 << self.counter_bits) - 1
        return (self.counter & ~mask) | ((self.counter + index) & mask)

    def blocks_before_wrap(self, index: int) -> int:
        """How many blocks from ``index`` on count up before the field wraps to zero."""
        assert self.counter is not None
        mask = (1 << self.counter_bits) - 1
        return mask - (self.counter_at(index) & mask) + 1

    def __repr__(self) -> str:  # never show key material
        kind = "ctr" if self.is_ctr else ("ecb-decrypt" if self.decrypt else "ecb-encrypt")
        return f"BlockTransform({kind}, AES-{8 * len(self.key)})"


def check_key_schedule(key_schedule: str) -> None:
    if key_schedule not in KEY_SCHEDULES:
        raise ValueError(f"key_schedule must be 'host' or 'device', not {key_schedule!r}")


def gcm_nonce(nonce: bytes | None, mac_len: int) -> bytes:
    """The nonce of a GCM stream, checked with its tag length as every engine takes them:
    ``None`` gives 16 random bytes, as pycryptodome does (its callers may store them)."""
    nonce = os.urandom(16) if nonce is None else as_bytes(nonce, "nonce")
    if not nonce:
        raise ValueError("Nonce cannot be empty")
    if not 4 <= mac_len <= 16:
        raise ValueError("Parameter 'mac_len' must be in the range 4..16")
    return nonce


class BlockWorker(Protocol):
    def run(self, source: Any, target: Any, ranges: Ranges, first_block: int = 0) -> None: ...

    def keystream(self, index: int) -> bytes: ...


class ChunkWorker(Protocol):
    def seal_ranges(self, plaintext: Any, sealed: Any, first: int, ranges: Ranges) -> None: ...

    def open_ranges(self, sealed: Any, plaintext: Any, first: int, ranges: Ranges) -> None: ...

    def seal(self, plaintext: Any, first: int, final: bool) -> Any: ...

    def open(self, ciphertext: Any, first: int, final: bool) -> Any: ...


class Engine(Protocol):
    device: Device
    # Bytes of work one pull of ``ranges`` takes (a pipeline piece, or a host thread's
    # share): the scheduler's unit of work stealing for this engine.
    piece_bytes: int
    # Kinds of work ("blocks", "chunks") during which the engine's threads hold the GIL:
    # the scheduler does not run them beside engines that need it.
    holds_gil_for: frozenset[str]
    # Whether the engine computes on the host's own cores (the host engine, OpenCL CPUs).
    on_host_cores: bool

    def stages(self, *arrays: Any) -> bool: ...

    def in_interpreter(self, *arrays: Any) -> bool: ...

    def host_array(self, nbytes: int) -> Any: ...

    def blocks(self, transform: BlockTransform) -> BlockWorker: ...

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int) -> ChunkWorker: ...

    def gcm(self, key: bytes, nonce: bytes | None, mac_len: int, key_schedule: str,
            threads: int | None = None) -> Any: ...

    # For ``aescl bench``: an engine's own figures, apart from its library calls.
    def device_figures(self, nbytes: int, min_seconds: float) -> dict[str, Any]: ...

    def retune(self, progress: Any) -> None:
        """Measure the device's launch settings again and keep them (``aescl bench
        --tune``); ``progress(message)`` hears how far it is. Nothing where there are
        none."""

    def resident_seconds(self, mode: str, key: bytes, iv: bytes, data: Any,
                         output_bytes: int, min_seconds: float) -> tuple[float, float]: ...


def tuning_enabled() -> bool:
    """``$AESCL_TUNE``: unset or 1 tunes a GPU's launch settings on first use (each
    engine its own); 0 keeps the defaults."""
    value = os.environ.get("AESCL_TUNE", "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"AESCL_TUNE must be 0 or 1, not {value!r}")
    return value != "0"
