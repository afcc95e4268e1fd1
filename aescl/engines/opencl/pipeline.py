"""Overlapped streaming of host data through a device, with pinned staging (private).

Host data moves through the device in pieces, and every piece passes five stages:

1. load: the host copies the piece into a pinned staging buffer (a host-allocated
   OpenCL buffer, mapped), or reads a file straight into it;
2. upload: DMA from pinned memory to the device (pageable memory would make the
   driver stage it again, at a third of the speed);
3. compute: the mode's kernels;
4. download: DMA into a second pinned staging buffer;
5. store: the host copies the result out, or writes it to a file.

Pieces overlap. Uploads, kernels and downloads each have their own queue, so
that both DMA directions and the kernels all run at once and an upload never
waits for the kernel before it; meanwhile the host loads the next piece and,
in the background, stores the oldest. Up to SLOTS pieces are in flight.
Host copies are split across a few threads, because one core copies at a fraction
of the PCIe rate. Memory that :func:`pinned_empty` allocated is pinned already:
pieces in it skip the staging copies entirely.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

try:
    import fcntl
except ImportError:  # not POSIX: files are written with positional writes
    fcntl = None  # type: ignore[assignment]

from ..._arrays import default_slice_bytes, input_array, wipe
from ...devices import Device
from ..host_copies import copy_parts, host_pool
from .runtime import DeviceRuntime, device_runtime, one_job_per_device

PIECE_BYTES = 32 << 20  # big enough to keep PCIe busy, small enough to overlap four
# A piece of host data that goes through the staging copies (ordinary memory) carries a
# cost of its own that the copies' rate does not hide, about 0.65 ms on one H200: 2 GiB
# sealed from ordinary memory ran 10.9 GB/s in pieces of 16 MiB, 13.5 in 32 and 16.4 in
# 64, the CUDA engine's rate there; from pinned memory 47.4-48.2 in each. But a job
# of one piece overlaps nothing: 64 MiB of CTR in one piece ran 8.8-9.1 GB/s against
# 10.8-11.9 in two (docs/benchmarks, 2026-12-01).
STAGED_PIECE_BYTES = 64 << 20
SLOTS = 6  # pieces in flight: loading, on the device (4), storing


# ---- Pinned host memory ------------------------------------------------------------

# device id -> {id(root array): (first address, end address)} of live pinned arrays
_pinned_ranges: dict[str, dict[int, tuple[int, int]]] = {}


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def pinned_empty(nbytes: int, device: Device) -> np.ndarray:
    """A uint8 array of ``nbytes`` in page-locked host memory that ``device``'s DMA
    engines read and write directly. Data in it moves at the full PCIe rate."""
    rt = device_runtime(device)
    buffer = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR,
                       max(1, nbytes))
    mapped, _ = cl.enqueue_map_buffer(
        rt.queue, buffer, cl.map_flags.READ | cl.map_flags.WRITE, 0, (max(1, nbytes),), np.uint8,
        is_blocking=True,
    )
    _remember_pinned(mapped, mapped, device)
    return mapped[:nbytes]


def _remember_pinned(owner: Any, array: np.ndarray, device: Device) -> None:
    """Record ``array`` as pinned for ``device`` until ``owner`` (its memory) is freed."""
    ranges = _pinned_ranges.setdefault(device.id, {})
    start = _address(array)
    ranges[id(owner)] = (start, start + array.nbytes)
    weakref.finalize(owner, ranges.pop, id(owner), None)


class _Pins:
    """The base of an array pinned by :func:`pin_host_memory`: it holds the buffers that
    pin the memory (CL_MEM_USE_HOST_PTR, one a device), so that they go when the last
    array over it goes. The buffers hold the memory, never this object or the array:
    before, a finalizer of the memory held them, they held the memory, and neither was
    ever freed (a pinned_empty of a team, each call, for the process's life)."""

    def __init__(self, memory: np.ndarray, keepers: list[Any]) -> None:
        self.__array_interface__ = memory.__array_interface__
        self._keepers = keepers  # (they hold ``memory``)


def pin_host_memory(memory: Any, devices: Sequence[Device]) -> np.ndarray:
    """``memory`` (a buffer another part of aescl allocated: the host engine's shared
    memory, or memory one device pinned) as a uint8 array that each of ``devices``' DMA
    engines read and write directly, for as long as the array lives. A device whose
    driver will not pin it stages its copies.

    A buffer over the memory with CL_MEM_USE_HOST_PTR, kept while the array lives, is
    what pins it: the NVIDIA driver page-locks such memory, and copies from it then ran
    at the pinned rate (H200: 55.5 GB/s each way, against 9-17 from ordinary memory).
    The buffer itself is never used; the kernels' copies go from the host address.
    """
    array = np.frombuffer(memory, np.uint8)
    keepers, pinned_for = [], []
    for device in devices:
        try:
            keepers.append(cl.Buffer(device_runtime(device).context,
                                     cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                                     hostbuf=array))
        except cl.Error:
            continue
        pinned_for.append(device)
    pins = _Pins(array, keepers)
    pinned = np.asarray(pins)
    for device in pinned_for:
        _remember_pinned(pins, pinned, device)
    return pinned


def stages(device: Device, arrays: Sequence[Any]) -> bool:
    """Whether a job on these host arrays goes through the staging copies: on a device
    apart from host memory, unless every array is pinned for it."""
    if device.type == "cpu" or shares_host_memory(device):
        return False
    return not all(is_pinned(input_array(a), device) for a in arrays)


def piece_bytes(device: Device, arrays: Sequence[Any], direct_bytes: int) -> int:
    """The bytes of a piece of a job on these host arrays (the whole job's):
    ``direct_bytes`` where the device reads and writes them directly; where they go
    through the staging copies, more, up to STAGED_PIECE_BYTES or half the job,
    whichever is less. Never more than one allocation."""
    wanted = direct_bytes
    if stages(device, arrays):
        half_job = min(input_array(a).nbytes for a in arrays) // 2
        wanted = max(direct_bytes, min(STAGED_PIECE_BYTES, half_job))
    return min(wanted, default_slice_bytes(device))


def is_pinned(array: np.ndarray, device: Device) -> bool:
    """Whether all of ``array`` lies in memory :func:`pinned_empty` allocated for ``device``."""
    start = _address(array)
    end = start + array.nbytes
    # (a copy of the ranges: other threads add and free pinned arrays meanwhile)
    ranges = list(_pinned_ranges.get(device.id, {}).values())
    return any(lo <= start and end <= hi for lo, hi in ranges)


# ---- Pieces and the pipeline --------------------------------------------------------------

# (queue, device input buffer, device output buffer, slot scratch) -> the event of the
# last command. The scratch is a dict the launch may keep device buffers in: it
# belongs to the piece's slot, so the next piece that finds it there starts only
# after this one has finished.
Launch = Callable[[Any, Any, Any, dict[str, Any]], Any]
# a host action on a pinned staging view: fill it (load) or consume it (store)
HostAction = Callable[[np.ndarray], list[Callable[[], None]]]


@dataclass
class Piece:
    """One piece of work: where its input comes from, its kernels, where its output goes.

    Input is either ``upload_from`` (pinned memory, uploaded directly) or ``load``,
    which returns the host tasks that fill a pinned staging view of ``in_bytes``.
    Output is ``download_to`` (pinned memory) or ``store``, which returns the host
    tasks that consume a pinned view of ``out_bytes`` (``out_bytes`` may be 0).
    """

    in_bytes: int
    out_bytes: int
    launch: Launch
    load: HostAction | None = None
    upload_from: np.ndarray | None = None
    store: HostAction | None = None
    download_to: np.ndarray | None = None
    # Host arrays the kernels use in place, on a device that shares host memory.
    use_in: np.ndarray | None = None
    use_out: np.ndarray | None = None
    # Output released only once checked (an opening's plaintext, once its tags matched):
    # the bytes from ``check_from`` on are downloaded first and given to ``check``, which
    # raises to withhold the rest; then the bytes before them go straight from the
    # device to ``download_to`` (pinned). Through staging and a host copy instead, a
    # pinned opening on an H200 ran at 11 GB/s against 44 for sealing.
    check: Callable[[np.ndarray], None] | None = None
    check_from: int = 0
    # With ``check``: the bytes before ``check_from`` (all of ``download_to``) go there
    # at once, beside the checked bytes, not after the host has checked them; where the
    # check fails, ``download_to`` is zeroed once they have landed, and so is that of
    # every such piece still in flight (Pipeline.run), before the failure is raised. The
    # host's wait between a piece's tags and its copy out held a one-GPU opening at
    # 28.6-30.3 GB/s against 41.0-41.9 without it (H200, docs/benchmarks).
    copy_before_check: bool = False

    @classmethod
    def through(cls, device: Device, source: np.ndarray, target: np.ndarray,
                launch: Launch, writes_input: bool = False) -> Piece:
        """A piece from one host array to another (the device output is all of
        ``target``), staged as needed. ``writes_input``: the launch works in place
        in its input buffer, which must then never be the caller's array."""
        piece = cls(source.nbytes, target.nbytes, launch)
        piece.read_from(device, source, writes_input)
        if usable_in_place(target, device, writable=True):
            piece.use_out = target
        elif is_pinned(target, device):
            piece.download_to = target
        else:
            piece.store = lambda staging: copy_parts(target, staging)
        return piece

    def read_from(self, device: Device, source: np.ndarray, writes_input: bool = False) -> None:
        """Take the input from a host array: directly if it is pinned or the device
        can use it in place, else staged."""
        if not writes_input and usable_in_place(source, device, writable=False):
            self.use_in = source
        elif is_pinned(source, device):
            self.upload_from = source
        else:
            self.load = lambda staging: copy_parts(staging, source)


def shares_host_memory(device: Device) -> bool:
    """Whether ``device`` computes in host memory itself (a CPU device), so that its
    kernels can work on the caller's arrays with no copy in or out."""
    if device.type != "cpu":
        return False
    try:
        return bool(device.cl_device.host_unified_memory)
    except (cl.Error, AttributeError):
        return False


def usable_in_place(array: np.ndarray, device: Device, writable: bool) -> bool:
    """Whether the kernels may use ``array`` itself as a buffer (CL_MEM_USE_HOST_PTR):
    a device that shares host memory, and an array aligned for the kernels' 16-byte
    loads. Elsewhere the runtime would copy it anyway, or the loads could fault."""
    return (array.nbytes > 0 and _address(array) % 16 == 0 and array.flags.c_contiguous
            and (array.flags.writeable or not writable) and shares_host_memory(device))


class _Slot:
    """Device buffers and pinned staging for one piece in flight, grown on demand."""

    def __init__(self) -> None:
        self.device_in: Any = None
        self.device_out: Any = None
        self.device_bytes = (0, 0)
        self.staging: dict[str, np.ndarray] = {}
        self.scratch: dict[str, Any] = {}  # the launches' own (Launch)


@dataclass
class _InFlight:
    piece: Piece
    slot: _Slot
    download: Any  # event, or None when the piece has no output
    # The output mapped back to the host (a kernel's writes to a buffer over host
    # memory are the host's only once mapped), to release after the store.
    mapped: Any = None
    copied: Any = None  # event of a copy_before_check piece's copy to download_to
    # The upload's event, held until the piece has landed. pyopencl's event of a copy
    # from host memory waits, when it is freed, until the copy is done, holding the GIL
    # all the while. Freed as soon as it was enqueued, it held the thread that feeds the
    # device for each piece's whole upload (no piece enqueued ahead), and every other
    # thread of the process with it. On one H200, pinned, 2 GiB: sealing 43.3-43.8 GB/s
    # against 47.8-48.4 now, opening 39.5-40.9 against 47.3-48.0 (docs/benchmarks).
    upload: Any = None

    def landed(self) -> None:
        """Wait until nothing of the device's reads or writes this piece's host memory any
        more (waits that let other threads run meanwhile)."""
        for event in (self.upload, self.download, self.copied):
            if event is not None:
                event.wait()


class Pipeline:
    """Streams pieces through one device, one run at a time (a run holds the device's
    lock: its slots and queues serve one run). Kernels go on the runtime's queue;
    uploads and downloads each on a queue of their own."""

    def __init__(self, device: Device) -> None:
        self._device = device
        self.runtime: DeviceRuntime = device_runtime(device)
        # Kernels go on the runtime's queue, which the modes (GCM's constants among
        # them) enqueue on. In one in-order queue with the kernels, each upload
        # would wait for the kernel before it, leaving the bus idle meanwhile.
        self._compute_queue = self.runtime.queue
        self._upload_queue = cl.CommandQueue(self.runtime.context, device.cl_device)
        self._download_queue = cl.CommandQueue(self.runtime.context, device.cl_device)
        self._release_queue: Any = None  # (made for the first checked piece)
        self._slots = [_Slot() for _ in range(SLOTS)]

    def _device_buffers(self, slot: _Slot, piece: Piece) -> tuple[Any, Any]:
        need = (max(1, piece.in_bytes), max(1, piece.out_bytes))
        if need[0] > slot.device_bytes[0] or need[1] > slot.device_bytes[1]:
            size = (max(need[0], slot.device_bytes[0]), max(need[1], slot.device_bytes[1]))
            flags = cl.mem_flags.READ_WRITE
            slot.device_in = cl.Buffer(self.runtime.context, flags, size[0])
            slot.device_out = cl.Buffer(self.runtime.context, flags, size[1])
            slot.device_bytes = size
        return slot.device_in, slot.device_out

    def _staging(self, slot: _Slot, which: str, nbytes: int) -> np.ndarray:
        array = slot.staging.get(which)
        if array is None or array.nbytes < nbytes:
            array = pinned_empty(nbytes, self._device)  # pinned memory is RSS: no slack
            slot.staging[which] = array
        return array[:nbytes]

    def _in_place(self, array: np.ndarray, flags: Any) -> Any:
        return cl.Buffer(self.runtime.context, flags | cl.mem_flags.USE_HOST_PTR, hostbuf=array)

    def _enqueue(self, piece: Piece, slot: _Slot) -> _InFlight:
        if piece.use_in is None or piece.use_out is None:
            device_in, device_out = self._device_buffers(slot, piece)
        queue = self._compute_queue
        upload = None
        if piece.use_in is not None:
            device_in = self._in_place(piece.use_in, cl.mem_flags.READ_ONLY)
        elif piece.in_bytes:
            source = piece.upload_from
            if source is None:
                source = self._staging(slot, "in", piece.in_bytes)
            upload = cl.enqueue_copy(self._upload_queue, device_in, source, is_blocking=False)
            self._upload_queue.flush()
            cl.enqueue_barrier(queue, wait_for=[upload])  # the kernels start after it
        if piece.use_out is not None:
            device_out = self._in_place(piece.use_out, cl.mem_flags.READ_WRITE)
        done = piece.launch(queue, device_in, device_out, slot.scratch)
        download = None
        if piece.use_out is not None:
            mapped, download = cl.enqueue_map_buffer(
                self._download_queue, device_out, cl.map_flags.READ, 0, (piece.out_bytes,),
                np.uint8, wait_for=[done], is_blocking=False)
            queue.flush()
            self._download_queue.flush()
            return _InFlight(piece, slot, download, mapped, upload=upload)
        if piece.check is not None:
            download = cl.enqueue_copy(
                self._download_queue,
                self._staging(slot, "out", piece.out_bytes - piece.check_from), device_out,
                src_offset=piece.check_from, is_blocking=False, wait_for=[done])
            if piece.copy_before_check:
                copied = cl.enqueue_copy(self._download_queue, piece.download_to, device_out,
                                         is_blocking=False, wait_for=[done])
                queue.flush()
                self._download_queue.flush()
                return _InFlight(piece, slot, download, copied=copied, upload=upload)
        elif piece.out_bytes:
            target = piece.download_to
            if target is None:
                target = self._staging(slot, "out", piece.out_bytes)
            download = cl.enqueue_copy(self._download_queue, target, device_out,
                                       is_blocking=False, wait_for=[done])
        queue.flush()
        self._download_queue.flush()
        return _InFlight(piece, slot, download, upload=upload)

    def _store_tasks(self, flight: _InFlight) -> list[Callable[[], None]]:
        # (a copy_before_check piece's plaintext too: waited for here, as a sealed
        # piece's download is, not in a task of the pool a piece)
        flight.landed()
        if flight.mapped is not None:
            flight.mapped.base.release(self._download_queue)
            flight.mapped = None
        piece = flight.piece
        if piece.copy_before_check:
            try:
                piece.check(self._staging(flight.slot, "out", piece.out_bytes - piece.check_from))
            except BaseException:
                wipe(memoryview(piece.download_to))
                raise
            return []
        if piece.check is not None:
            piece.check(self._staging(flight.slot, "out", piece.out_bytes - piece.check_from))
            # (a queue of its own: behind the next pieces' checked bytes on the download
            # queue, each release would wait for their kernels)
            if self._release_queue is None:
                self._release_queue = cl.CommandQueue(self.runtime.context,
                                                      self._device.cl_device)
            release = cl.enqueue_copy(self._release_queue, piece.download_to,
                                      flight.slot.device_out, is_blocking=False)
            self._release_queue.flush()
            return [release.wait]
        if piece.store is None:
            return []
        return piece.store(self._staging(flight.slot, "out", piece.out_bytes))

    @one_job_per_device
    def run(self, pieces: Iterable[Piece]) -> None:
        """Process every piece; returns when all outputs are stored.

        The host's stores run in the background, one piece at a time and in
        order, while the next pieces load and go to the device: waiting for the
        slowest load or store of every piece left cores idle (docs/benchmarks).
        An exception from a host task stops the stream: no later piece's stores
        start, what is in flight drains, and the exception is raised here.
        """
        pool = host_pool()
        in_flight: deque[_InFlight] = deque()
        loading: list[Future[None]] = []
        storing: list[Future[None]] = []  # the latest piece out's stores
        try:
            for index, piece in enumerate(pieces):
                slot = self._slots[index % SLOTS]
                if piece.load is not None and piece.in_bytes:
                    loading = _submit(pool, piece.load(self._staging(slot, "in", piece.in_bytes)))
                if len(in_flight) == SLOTS - 2:  # the rest stay queued on the device
                    storing = self._store_next(pool, in_flight, storing)
                _finish(loading)
                in_flight.append(self._enqueue(piece, slot))
            while in_flight:
                storing = self._store_next(pool, in_flight, storing)
            _finish(storing)
        except BaseException:
            # After an error nothing may still use the staging: host tasks first...
            for future in (*loading, *storing):
                future.exception()
            for flight in in_flight:  # ...then the device's downloads into it
                flight.landed()
                if flight.piece.copy_before_check:  # (copied out, never checked)
                    wipe(memoryview(flight.piece.download_to))
            raise
        finally:
            self._upload_queue.finish()
            self._compute_queue.finish()

    def _store_next(self, pool: ThreadPoolExecutor, in_flight: deque[_InFlight],
                    storing: list[Future[None]]) -> list[Future[None]]:
        """Start storing the oldest piece in flight once the piece before it is
        stored. That wait also frees the earlier piece's slot, which the next
        piece to load reuses."""
        _finish(storing)
        return _submit(pool, self._store_tasks(in_flight.popleft()))


def _submit(pool: ThreadPoolExecutor, tasks: list[Callable[[], None]]) -> list[Future[None]]:
    return [pool.submit(task) for task in tasks]


def _finish(futures: list[Future[None]]) -> None:
    """Wait for every task; raise the first failure."""
    for future in futures:
        future.result()


_pipelines: dict[str, Pipeline] = {}


def pipeline(device: Device) -> Pipeline:
    """The device's pipeline, created once per runtime (its buffers are reused)."""
    existing = _pipelines.get(device.id)
    if existing is None or existing.runtime is not device_runtime(device):
        existing = _pipelines[device.id] = Pipeline(device)
    return existing
