"""CUDA device arrays as the CUDA engine takes them: any object with
``__cuda_array_interface__`` (PyTorch, CuPy, JAX, Numba), or that exports only DLPack
from CUDA memory (cuda.core's Buffer), its bytes in C order. A
result for a JAX array is made in CuPy and handed to JAX by DLPack (JAX arrays are
immutable: no ``output=``).

Any dtype is taken as its bytes: a float32 tensor of n elements is 4n bytes, and
the result has the input's dtype and shape. Arrays must be C-contiguous, and an
``output=`` writable. Work is enqueued on the stream the array's library is
working on (PyTorch's or CuPy's current stream for that GPU; for others the stream
the interface names, else the legacy default stream), so it follows the work that
produced the input and precedes the work the caller enqueues next on that stream.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from ... import ghash, keyschedule
from ..._arrays import check_in_place_or_apart
from ...chunkformat import TAG_SIZE
from ..device_arrays import cuda_nbytes, dlpack_gpu, is_torch_tensor, on_cuda
from ..interface import BLOCK_SIZE, BlockTransform
from ..programs import device_chunks, device_messages
from .runtime import CudaBytes, checked, cuda_device, keeps_callers_context, pointer_gpu
from .workers import CudaBlocks, CudaChunkKernels, CudaGhash, KeyTables, StreamMemory


def _library(obj: Any) -> str:
    return "jax" if _is_jax(obj) else type(obj).__module__.split(".")[0]


def _is_jax(obj: Any) -> bool:
    """Whether ``obj`` is a JAX array, told without importing JAX."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(obj, jax.Array)


def _cupy_for_jax() -> Any:
    """CuPy, which makes the results of calls on JAX arrays (JAX arrays are immutable:
    a result is written in CuPy's memory, then handed to JAX by DLPack, zero-copy)."""
    try:
        import cupy
    except ImportError:
        raise TypeError("a call on JAX arrays needs CuPy beside JAX (aescl writes the "
                        "result there and hands it to JAX by DLPack): pip install "
                        "cupy-cuda12x or cupy-cuda13x") from None
    return cupy


def as_kind_of(like: Any, result: Any) -> Any:
    """``result`` (a new array aescl made) as an array of ``like``'s library: a JAX array
    for a JAX input, by DLPack (JAX waits, on its own stream, for the work aescl queued
    on CuPy's current stream); others are already of their input's library."""
    if result is None or not _is_jax(like):
        return result
    return sys.modules["jax"].dlpack.from_dlpack(result)


# Arrays whose memory aescl's work may still use, of libraries that may hand it out
# again before that work is done: (an event recorded after the work, the arrays),
# oldest first (_hold_until_done).
_held: list[tuple[Any, tuple[Any, ...]]] = []
_held_lock = threading.Lock()
_HELD_MOST = 8  # calls' arrays held at most: past them, the oldest's work is waited for
_AAD_PIECE_BYTES = 64 << 20  # AAD in host memory uploaded at a time to be hashed


def _reused_after_the_stream(obj: Any) -> bool:
    """Whether ``obj``'s memory, once freed, goes to no new array before the work already
    on the stream aescl uses for it: torch's and CuPy's allocators hand memory out again
    in the order of the stream it was allocated on, which is their current stream, and
    so aescl's, in the usual case (an array used on another stream needs what their own
    operations need there: docs/gpu-arrays.md); and aescl's own spans (staged host
    data) are kept by the engine."""
    return isinstance(obj, CudaBytes) or is_torch_tensor(obj) or _library(obj) == "cupy"


def _hold_until_done(span: CudaBytes, *arrays: Any) -> None:
    """Hold those of ``arrays`` (a call's input and ``output=``, or None) whose library
    may reuse their memory before the work just queued on ``span``'s stream is done,
    until it is. JAX frees an array's memory as soon as nothing of JAX's uses it, and
    aescl's work on JAX arrays runs on CuPy's stream, which JAX knows nothing of: an
    input the caller dropped as the call returned went back to JAX's allocator at once,
    and the next JAX array made there was written while aescl's kernel still read it
    (wrong bytes, silently: an H100 with eight test workers on it, 2026-11-26).
    cuda.core frees a Buffer on the stream it was allocated on, which aescl's work
    (on the legacy default stream) need not precede, and others may do the like. Those
    held are let go of at later calls once their work is done, or past _HELD_MOST, the
    oldest after a wait for its work."""
    held = tuple(array for array in arrays
                 if array is not None and not _reused_after_the_stream(array))
    if not held:
        return
    from cuda.bindings import driver

    cuda_device(span.device).core.set_current()
    event = checked(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    checked(driver.cuEventRecord(event, span.stream))
    done = []
    with _held_lock:
        _held.append((event, held))
        waiting = []
        for entry in _held:
            status = driver.cuEventQuery(entry[0])[0]
            if status == driver.CUresult.CUDA_ERROR_NOT_READY:
                waiting.append(entry)
            else:
                checked((status,))
                done.append(entry)
        while len(waiting) > _HELD_MOST:
            checked(driver.cuEventSynchronize(waiting[0][0]))
            done.append(waiting.pop(0))
        _held[:] = waiting
    for event, _ in done:
        checked(driver.cuEventDestroy(event))


def _torch_stream(device: int) -> int:
    """The handle of torch's current stream on a GPU. torch.cuda.current_stream builds
    a Stream object (7 µs on the H100 host, a quarter of a small call); the raw handle
    comes from the call torch's own compiled code uses, where this torch has it."""
    raw = _torch_raw_stream()
    if raw is not None:
        return int(raw(device))
    return int(sys.modules["torch"].cuda.current_stream(device).cuda_stream)


@functools.cache
def _torch_raw_stream() -> Any:
    return getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)


def _producer_stream(obj: Any, device: int, interface: dict[str, Any]) -> int:
    library = _library(obj)
    if library == "torch":
        return _torch_stream(device)
    if library in ("cupy", "jax"):  # (JAX: the results are CuPy's until handed back)
        cupy = sys.modules["cupy"] if library == "cupy" else _cupy_for_jax()
        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    # The interface's stream (version 3): 1 and 2 are the legacy and per-thread default
    # streams, which the driver takes as these very handles; None asks for no ordering.
    return int(interface.get("stream") or 0)


def cuda_bytes(obj: Any, what: str, writable: bool = False, stream: int | None = None
               ) -> CudaBytes:
    """The bytes of a CUDA device array. Raises ValueError for one that is not
    C-contiguous, or read-only where it is written (``what`` names it). ``stream``: the
    stream to order on, when the caller knows it (else the producer's, looked up)."""

    if isinstance(obj, CudaBytes):  # (already the engine's own span: staged host data)
        return obj
    if is_torch_tensor(obj):
        return _torch_bytes(obj, what, stream)
    if _is_jax(obj):
        if writable:
            raise TypeError(f"{what} is a JAX array, which is immutable: leave output= "
                            "out (the result is a new JAX array)")
        # JAX's interface names no stream: its work that makes the array is waited for
        # here, on the host (block_until_ready), before aescl's work is queued.
        obj.block_until_ready()
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is None:  # (an object that only DLPack describes: on_cuda)
        return _dlpack_bytes(obj, what, writable, stream)
    pointer, readonly = interface["data"]
    shape = tuple(interface["shape"])
    itemsize = int(interface["typestr"][2:])  # (the bytes of one element)
    _check_contiguous(shape, interface.get("strides"), itemsize, what)
    if writable and readonly:
        raise ValueError(f"{what} is read-only")
    nbytes = cuda_nbytes(obj)
    device = _gpu_of(obj, int(pointer), nbytes)
    if stream is None:
        stream = _producer_stream(obj, device, interface)
    return CudaBytes(int(pointer), nbytes, device, stream, bool(readonly))


def _check_contiguous(shape: tuple[int, ...], strides: Any, unit: int, what: str) -> None:
    """Refuse an array whose ``strides`` (None: C order; counted in ``unit``s of bytes
    per element step, as its interface counts them) are not those of C order."""
    if strides is None:
        return
    expected, step = [], unit
    for extent in reversed(shape):
        expected.append(step)
        step *= extent
    if any(extent > 1 and got != want
           for extent, got, want in zip(shape, strides, reversed(expected), strict=True)):
        raise ValueError(f"{what} is not contiguous: pass a C-contiguous array "
                         f"(e.g. .contiguous() or cupy.ascontiguousarray)")


# The stream for an array that only DLPack describes, when no other array of the call
# names one: the legacy default stream, which every blocking stream of its GPU waits
# for and is waited on by. DLPack asks the consumer to name its stream (where 1 is
# that one, and 0 is not allowed), and the producer then orders its pending work
# before it.
_LEGACY_DEFAULT_STREAM = 1


def _dlpack_bytes(obj: Any, what: str, writable: bool, stream: int | None) -> CudaBytes:
    """:func:`cuda_bytes` of an object that exports only DLPack from CUDA memory
    (cuda.core's Buffer, for one), viewed through cuda.core's StridedMemoryView."""
    from cuda.core.utils import StridedMemoryView

    stream = stream or _LEGACY_DEFAULT_STREAM  # (0, the null stream, is 1 to DLPack)
    view = StridedMemoryView.from_dlpack(obj, stream)
    _check_contiguous(tuple(view.shape), view.strides, 1, what)
    if writable and view.readonly:
        raise ValueError(f"{what} is read-only")
    return CudaBytes(int(view.ptr), int(view.size) * view.dtype.itemsize, int(view.device_id),
                     stream, bool(view.readonly))


def _torch_bytes(tensor: Any, what: str, stream: int | None) -> CudaBytes:
    """:func:`cuda_bytes` of a torch tensor, from its own attributes: what its array
    interface says, without the dict torch builds for it in Python at each look (a
    small call looks a few times). A torch tensor is never read-only."""
    if not tensor.is_contiguous():
        raise ValueError(f"{what} is not contiguous: pass a C-contiguous array "
                         f"(e.g. .contiguous() or cupy.ascontiguousarray)")
    device = tensor.device.index
    if stream is None:
        stream = _torch_stream(device)
    return CudaBytes(int(tensor.data_ptr()), int(tensor.nbytes), device, stream, False)


def _gpu_of(obj: Any, pointer: int, nbytes: int) -> int:
    """The GPU an array lies on, as its library says it through DLPack's
    ``__dlpack_device__`` where it does (CuPy, JAX), else as the driver says it of the
    pointer (runtime.pointer_gpu)."""
    said = dlpack_gpu(obj)
    if said is not None:
        return said
    if nbytes == 0:
        return _empty_array_device(obj)
    return pointer_gpu(pointer)


def _empty_array_device(obj: Any) -> int:
    device = getattr(obj, "device", None)
    index = getattr(device, "index", None) if device is not None else None
    if index is None:
        index = getattr(device, "id", 0) if device is not None else 0
    return int(index or 0)


# Numba's CUDA arrays, by the top module of their type (numba-cuda's own package too).
_NUMBA = ("numba", "numba_cuda")


def _numba_empty(device: int, shape: Any, dtype: Any) -> Any:
    """A new Numba device array on GPU ``device`` (Numba allocates outside any stream)."""
    from numba import cuda

    with cuda.gpus[device]:
        return cuda.device_array(shape, dtype)


def empty_like(obj: Any, device: int) -> Any:
    """A new array of ``obj``'s library, dtype and shape on GPU ``device``."""
    library = _library(obj)
    if library == "torch":
        return sys.modules["torch"].empty_like(obj)
    if library in ("cupy", "jax"):
        cupy = sys.modules["cupy"] if library == "cupy" else _cupy_for_jax()
        with cupy.cuda.Device(device):
            return cupy.empty(obj.shape, obj.dtype)
    if library in _NUMBA:
        return _numba_empty(device, obj.shape, obj.dtype)
    raise TypeError(f"aescl cannot make a {type(obj).__module__}.{type(obj).__name__} "
                    "for the result: pass output= (a writable CUDA array of the same size)")


def empty_bytes(obj: Any, device: int, nbytes: int) -> Any:
    """A new flat uint8 array of ``nbytes`` of ``obj``'s library on GPU ``device``."""
    if is_torch_tensor(obj):  # (first, and cheaper than naming its library)
        torch = sys.modules["torch"]
        return torch.empty(nbytes, dtype=torch.uint8, device=obj.device)
    library = _library(obj)
    if library in ("cupy", "jax"):
        cupy = sys.modules["cupy"] if library == "cupy" else _cupy_for_jax()
        with cupy.cuda.Device(device):
            return cupy.empty(nbytes, cupy.uint8)
    if library in _NUMBA:
        return _numba_empty(device, nbytes, "uint8")
    raise TypeError(f"aescl cannot make a {type(obj).__module__}.{type(obj).__name__} "
                    "for the result: pass output= (a writable CUDA array of the result's "
                    "size)")


def _on_gpu(span: Any, ordinal: int | None) -> Any:
    """``span``, which must lie on GPU ``ordinal`` (the GPU a call was made for; None:
    any)."""
    if ordinal is not None and span.device != ordinal:
        raise ValueError(f"the input is on GPU {span.device}; the call was made for "
                         f"cuda:{ordinal}")
    return span


class CudaArrayBlocks:
    """A block job (ECB or CTR) over CUDA device arrays: a worker per GPU, made when an
    array on that GPU first comes."""

    def __init__(self, transform: BlockTransform, device: int | None = None) -> None:
        self._transform = transform
        self._device = device  # the only GPU allowed, when the cipher named one
        self._workers: dict[int, CudaBlocks] = {}

    @keeps_callers_context
    def __call__(self, data: Any, output: Any, first_block: int = 0, skip: int = 0) -> Any:
        """``data`` through the kernel into ``output`` or a new array like ``data``;
        returns that new array, or None when ``output`` was given."""
        source = _on_gpu(cuda_bytes(data, "the input"), self._device)
        result = None
        if output is None:
            result = empty_like(data, source.device)
            output = result
        target = _output_bytes(output, source)
        if target.nbytes != source.nbytes:
            raise ValueError(f"output has {target.nbytes} bytes; the input has {source.nbytes}")
        check_in_place_or_apart(source.pointer, target.pointer, source.nbytes)
        if source.nbytes:
            worker = self._workers.get(source.device)
            if worker is None:
                worker = self._workers[source.device] = CudaBlocks(self._transform,
                                                                   source.device)
            worker.run(source, target, first_block, skip)
            _hold_until_done(source, data, None if result is not None else output)
        return as_kind_of(data, result)


class CudaArrayGhash:
    """GHASH partial sums of ciphertext in CUDA device arrays (GCM on device arrays),
    for one H (``multipliers``: aescl.ghash.PowerMultipliers, the key's): a worker per
    GPU. (The key itself is not needed here: the kernels take H's tables.)"""

    def __init__(self, key: bytes | None, multipliers: Any) -> None:
        self._multipliers = multipliers
        self._workers: dict[int, CudaGhash] = {}

    @keeps_callers_context
    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        """The partial sum of bytes ``offset .. offset + nbytes`` (whole blocks) of an
        array, after the work before it on its stream, which this waits for."""
        span = cuda_bytes(data, "the input").at(offset, nbytes)
        return self._partial_sum(span) if nbytes else 0

    def _partial_sum(self, span: CudaBytes) -> int:
        nbytes = span.nbytes
        worker = self._workers.get(span.device)
        if worker is None:
            worker = self._workers[span.device] = CudaGhash(self._multipliers, span.device)
        if span.pointer % 16 == 0:
            return worker.partial_sum(span)
        memory = StreamMemory(None, span)  # the kernel loads aligned blocks
        scratch = memory.scratch(nbytes)
        memory.copy(scratch, span)
        try:
            return worker.partial_sum(scratch)
        finally:
            memory.release(scratch)

    @keeps_callers_context
    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        """Bytes ``offset .. offset + nbytes`` of an array (a few bytes of ciphertext),
        after the work before them on its stream."""
        span = cuda_bytes(data, "the input").at(offset, nbytes)
        return CudaGhash.read(span)

    @keeps_callers_context
    def host_partial_sum(self, like: Any, blocks: memoryview) -> int:
        """The partial sum of whole blocks in host memory (AAD), hashed on the GPU of
        ``like`` (a CUDA array), uploaded a piece at a time on its stream."""
        import numpy as np
        from cuda.bindings import driver

        source = cuda_bytes(like, "the input")
        memory = StreamMemory(None, source)
        step = min(len(blocks), _AAD_PIECE_BYTES)
        scratch = memory.scratch(step, zeroed=False)
        total = 0
        try:
            for lo in range(0, len(blocks), step):
                piece = np.frombuffer(blocks[lo : lo + step], np.uint8)
                checked(driver.cuMemcpyHtoDAsync(scratch.pointer, piece, piece.nbytes,
                                                source.stream))
                partial = self._partial_sum(scratch.at(0, piece.nbytes))  # (waits for it)
                total = self._multipliers.times_power(total, piece.nbytes // 16) ^ partial
        finally:
            memory.release(scratch)
        return total


def _output_bytes(output: Any, source: CudaBytes) -> CudaBytes:
    """The bytes of a caller's ``output=``, which must be a writable CUDA array on the
    input's GPU (checked before any work); ordered on the input's stream."""
    if not on_cuda(output):
        raise TypeError("output= must be a CUDA array like the input (host memory "
                        "takes a host input)")
    target = cuda_bytes(output, "output", writable=True, stream=source.stream)
    if target.device != source.device:
        raise ValueError(f"output is on GPU {target.device}, the input on GPU {source.device}")
    return target


def _chunked_output(output: Any, source: CudaBytes, out_bytes: int) -> CudaBytes:
    """A caller's ``output=`` for a chunked call on ``source`` (:func:`_output_bytes`), of
    the result's size and apart from the input."""
    target = _output_bytes(output, source)
    device_chunks.check_output(source.pointer, source.nbytes, target.pointer, target.nbytes,
                               out_bytes)
    return target


class CudaArrayChunks:
    """The chunked format's chunks (one chunk key and base nonce) between CUDA arrays: a
    message array sealed into a new uint8 array of its library (or the caller's
    ``output=``), and opened back, on the input's stream. Sealing returns once the work
    is enqueued; opening waits for the chunks' tags at the end
    (device_chunks.open_sealed)."""

    def __init__(self, key: bytes, base_nonce: bytes, device: int | None = None,
                 kept: bool = False) -> None:
        self._key, self._base_nonce = key, base_nonce
        self._device = device  # the only GPU allowed, when the call named one
        # (H on the host: a GPU round trip for it would wait on the producer's stream)
        self._h = ghash.hash_subkey(key)
        self._key_argument = keyschedule.kernel_key_argument(key, "host", False)
        # H's tables on each GPU kept between calls, for a job its caller keeps (each
        # call's own otherwise: made in the stream's order, with no wait).
        self._tables = KeyTables(self._h, whole_gpu_at_free=True) if kept else None
        # A kept job's kernels for lone messages with no AAD, a (GPU, stream): such a
        # call keeps nothing of its own in them (no scratch, no uploads), so one serves
        # every such call there (making them was a tenth of a 4 KiB message's call).
        self._lone_kernels: dict[tuple[int, int], CudaChunkKernels] = {}

    @classmethod
    def for_messages(cls, key: bytes, device: int | None = None) -> CudaArrayChunks:
        """The job of many GCM messages under ``key`` (seal_messages, open_messages),
        made to be kept by its caller (aescl.AESGCM) across calls."""
        return cls(key, bytes(12), device, kept=True)

    def _kernels(self, source: Any, lone: bool = False) -> CudaChunkKernels:
        """The kernels of one call on ``source``'s GPU and stream; for a ``lone`` message
        with no AAD of a kept job, those kept for its GPU and stream."""
        if not (lone and self._tables is not None):
            return CudaChunkKernels(self._key, self._h, source.device, source, self._tables,
                                    self._key_argument)
        where = (source.device, source.stream)
        kernels = self._lone_kernels.get(where)
        if kernels is None:
            kernels = CudaChunkKernels(self._key, self._h, source.device, source,
                                       self._tables, self._key_argument)
            if kernels.fused:  # (the separate kernels keep H's nibble tables in scratch)
                kernels = self._lone_kernels.setdefault(where, kernels)
        return kernels

    def _run(self, data: Any, out_bytes: int, work: Any, header_bytes: int = 0,
             output: Any = None, lone: bool = False, as_callers: bool = True) -> Any:
        source = _on_gpu(cuda_bytes(data, "the input"), self._device)
        if output is None:
            # So that the chunks after a header lie aligned; not for JAX, which takes in
            # only memory that starts where an allocation may.
            lead = 0 if _is_jax(data) else -header_bytes % 16
            result = empty_bytes(data, source.device, lead + out_bytes)
            if lead:  # (Numba refuses any slice of an empty array, even the whole of it)
                result = result[lead:]
            target = cuda_bytes(result, "the result", writable=True, stream=source.stream)
        else:
            result, target = None, _chunked_output(output, source, out_bytes)
        kernels = self._kernels(source, lone)
        try:
            work(kernels, source, target)
        finally:
            kernels.release_all()
            _hold_until_done(source, data, output)
        return as_kind_of(data, result) if as_callers else result

    @keeps_callers_context
    def seal(self, message: Any, header: bytes, sealed_bytes: int, output: Any = None) -> Any:
        """A new uint8 array, or ``output`` (then None is returned): ``header`` and then
        the sealed chunks of ``message``."""
        def work(kernels: CudaChunkKernels, source: Any, target: Any) -> None:
            kernels.upload(target.at(0, len(header)), header)
            device_chunks.seal(kernels, self._base_nonce, source,
                               target.at(len(header), sealed_bytes - len(header)))
        return self._run(message, sealed_bytes, work, len(header), output)

    @keeps_callers_context
    def open(self, sealed: Any, at: int, nbytes: int, first: int, final: bool,
             out_bytes: int, output: Any = None) -> Any:
        """A new uint8 array of ``out_bytes``, or ``output`` (then None is returned): the
        plaintext of the sealed chunks in bytes ``at .. at + nbytes`` of ``sealed``,
        chunks ``first, ...`` of the message (the last of them the final one where
        ``final`` says so)."""
        def work(kernels: CudaChunkKernels, source: Any, target: Any) -> None:
            device_chunks.open_sealed(kernels, self._base_nonce, source.at(at, nbytes),
                                      target, first, final)
        return self._run(sealed, out_bytes, work, output=output)

    def seal_messages(self, rows: Any, messages: device_messages.MessagePlan) -> Any:
        """Many GCM messages under this object's key (device_messages.py): the rows of
        ``rows`` sealed into a new flat uint8 array of rows of ciphertext, then tag; None
        where the kernels cannot take them. The array is of the library aescl makes
        results in (CuPy's for JAX's arrays, which are immutable: the caller may still
        write to it, and CudaArrayBytes.finish then makes it the caller's kind)."""
        if _lone(messages):
            sealed = self._seal_lone(rows, messages)
            if sealed is not None:
                return sealed
        return self._seal_batch(rows, messages)

    @keeps_callers_context
    def _seal_batch(self, rows: Any, messages: device_messages.MessagePlan) -> Any:
        work = device_messages.Sealing(messages)
        try:
            return self._run(rows, work.result_bytes, work, lone=_lone(messages),
                             as_callers=False)
        except device_messages.NotTaken:
            return None

    def _seal_lone(self, message: Any, messages: device_messages.MessagePlan) -> Any:
        """A lone message with no AAD the short way (:meth:`_lone`,
        CudaChunkKernels.seal_lone); None where it goes the batch's way."""
        lone = self._lone(message, messages.nbytes + TAG_SIZE)
        if lone is None:
            return None
        kernels, source, result, target = lone
        kernels.seal_lone(source, target, messages.nbytes, bytes(messages.j0s))
        return result

    def _lone(self, data: Any, result_bytes: int) -> tuple[CudaChunkKernels, int, Any, int] | None:
        """What a lone message with no AAD needs to go a short way, where its GPU and
        stream have kernels kept for such (made by the first such call, the batch's way):
        what :meth:`_run` and device_messages do for it, less all a batch needs (no
        scratch, no uploads, the launch kept), for a call of about 20 µs. The kernels,
        the input's address, a new result of ``result_bytes`` and its address; None
        where it goes the batch's way: no kernels kept yet, memory off 16-byte
        boundaries, or an array whose library aescl must hold until the work is done
        (_hold_until_done)."""
        if not _reused_after_the_stream(data):
            return None
        source = _on_gpu(cuda_bytes(data, "the input"), self._device)
        kernels = self._lone_kernels.get((source.device, source.stream))
        if kernels is None or source.pointer % BLOCK_SIZE:
            return None
        result = empty_bytes(data, source.device, result_bytes)
        target = result.data_ptr() if is_torch_tensor(result) else \
            cuda_bytes(result, "the result", writable=True, stream=source.stream).pointer
        if target % BLOCK_SIZE:
            return None
        return kernels, source.pointer, result, target

    def open_messages(self, rows: Any, messages: device_messages.MessagePlan,
                      meanwhile: Callable[[], Any] | None = None) -> tuple[Any, int] | None:
        """The sealed rows of ``rows`` opened into a new flat uint8 array (of the library
        aescl makes results in, as seal_messages's), and the index of the first message
        whose tag failed (the count where none did); None where the kernels cannot take
        them. ``meanwhile``: called while the device works, before the wait for the
        verdict."""
        if _lone(messages) and meanwhile is None:
            opened = self._open_lone(rows, messages)
            if opened is not None:
                return opened
        return self._open_batch(rows, messages, meanwhile)

    def _open_lone(self, sealed: Any, messages: device_messages.MessagePlan
                   ) -> tuple[Any, int] | None:
        """:meth:`_seal_lone`'s like for opening (CudaChunkKernels.open_lone): the
        plaintext and 0 where the tag failed, else 1; None where it goes the batch's
        way."""
        lone = self._lone(sealed, messages.nbytes)
        if lone is None:
            return None
        kernels, source, result, target = lone
        return result, int(kernels.open_lone(source, target, messages.nbytes,
                                             bytes(messages.j0s)))

    @keeps_callers_context
    def _open_batch(self, rows: Any, messages: device_messages.MessagePlan,
                    meanwhile: Callable[[], Any] | None) -> tuple[Any, int] | None:
        work = device_messages.Opening(messages, meanwhile)
        try:
            return self._run(rows, work.result_bytes, work, lone=_lone(messages),
                             as_callers=False), work.first_failed
        except device_messages.NotTaken:
            return None

    @staticmethod
    @keeps_callers_context
    def read(array: Any, offset: int, nbytes: int) -> bytes:
        """Bytes of an array (a header), after the work before them on its stream."""
        return CudaGhash.read(cuda_bytes(array, "the input").at(offset, nbytes))


def _lone(messages: device_messages.MessagePlan) -> bool:
    """Whether a batch is one message with no AAD (its J0 by value: nothing uploaded)."""
    return messages.count == 1 and messages.masks is None


class CudaArrayBytes:
    """Plain bytes of CUDA arrays, for a call that lays out its own result
    (aescl.AESGCM: the ciphertext, then the tag)."""

    @staticmethod
    @keeps_callers_context
    def empty(like: Any, nbytes: int) -> Any:
        """A new flat uint8 array of ``nbytes`` of ``like``'s library, on its GPU."""
        return empty_bytes(like, cuda_bytes(like, "the input").device, nbytes)

    @staticmethod
    @keeps_callers_context
    def write(array: Any, offset: int, data: bytes) -> None:
        """``data`` into bytes ``offset ..`` of ``array``, on its stream. From pageable
        memory the driver takes the bytes before it returns (a copy it stages), so
        nothing of this call's is held past it."""
        import numpy as np
        from cuda.bindings import driver

        target = cuda_bytes(array, "the result", writable=True).at(offset, len(data))
        host = np.frombuffer(data, np.uint8).copy()
        cuda_device(target.device).core.set_current()
        checked(driver.cuMemcpyHtoDAsync(target.pointer, host, host.nbytes, target.stream))

    @staticmethod
    def finish(like: Any, result: Any) -> Any:
        """``result`` as the caller's kind of array (a JAX input's result made in CuPy
        goes back to JAX)."""
        return as_kind_of(like, result)

    @staticmethod
    def device_of(array: Any) -> int:
        """The ordinal of the GPU ``array`` lies on."""
        return cuda_bytes(array, "the input").device

    @staticmethod
    @keeps_callers_context
    def stack(arrays: list[Any]) -> Any:
        """The arrays' bytes as the rows of one new 2-D uint8 array of their library on
        their GPU, by the library's own stack (one launch of its copy kernel); None
        where the library has none here (JAX, Numba, DLPack-only objects), or the arrays
        are not all C-contiguous, of one size and on one GPU."""
        library = _library(arrays[0])
        if library not in ("torch", "cupy"):
            return None
        first = arrays[0]
        if any(a.device != first.device or a.nbytes != first.nbytes for a in arrays):
            return None
        if library == "torch":
            import torch

            if not all(a.is_contiguous() for a in arrays):
                return None
            return torch.stack([a.reshape(-1).view(torch.uint8) for a in arrays])
        import cupy

        if not all(a.flags.c_contiguous for a in arrays):
            return None
        with first.device:
            return cupy.stack([a.ravel().view(cupy.uint8) for a in arrays])
