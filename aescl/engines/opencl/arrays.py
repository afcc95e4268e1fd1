"""pyopencl arrays as the OpenCL engine takes them: ECB and CTR on data already on an
OpenCL device, in the context and on the queue the caller made.

An input is a ``pyopencl.array.Array`` (a ``cl.Buffer`` with an offset and a size
is one: ``pyopencl.array.Array(queue, size, numpy.uint8, data=buffer,
offset=offset)``). Any dtype is taken as its bytes, in C order; the result is a
new array like the input (its queue, dtype and shape), or the caller's ``output=``
array, which may be the input itself. The call runs on the input's device, in its
context, enqueued on its queue after the events both arrays carry (pyopencl's rule
for out-of-order queues) and recorded on both; it returns once the work is
enqueued. No data byte passes through host memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl

from ... import ghash
from ..._arrays import check_in_place_or_apart
from ...devices import Device, opencl_devices
from ..device_arrays import on_opencl
from ..interface import BLOCK_SIZE, BlockTransform
from ..programs import device_chunks, device_messages
from ..programs.device_runs import run_blocks
from .gcm_kernels import GcmKernels
from .workers import BufferSpan, OpenclBlocks, OpenclChunkKernels


def _span(array: Any, what: str) -> BufferSpan:
    if not array.flags.c_contiguous:
        raise ValueError(f"{what} is not contiguous: pass a C-contiguous array")
    if array.queue is None:
        raise ValueError(f"{what} has no queue: give it one (array.with_queue(queue))")
    buffer, offset = _cl_buffer(array.base_data), array.offset
    if buffer is not None:
        # A sub-buffer is taken as the part of its parent it is: OpenCL makes no
        # sub-buffer of a sub-buffer (a slice of such an array failed with
        # INVALID_MEM_OBJECT), and overlap is told within one memory object.
        parent = buffer.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT)
        if parent is not None:
            offset += buffer.get_info(cl.mem_info.OFFSET)
            buffer = parent
    return BufferSpan(buffer, offset, array.nbytes)


def _same_buffer(one: BufferSpan, other: BufferSpan) -> bool:
    return None not in (one.buffer, other.buffer) and one.buffer.int_ptr == other.buffer.int_ptr


def _cl_buffer(memory: Any) -> Any:
    """An array's memory as a ``cl.Buffer``: a pyopencl memory pool's PooledBuffer has no
    sub-regions, so it is taken by its handle (retained while the Buffer lives). An
    empty array has none (None)."""
    if memory is None or isinstance(memory, cl.Buffer):
        return memory
    return cl.Buffer.from_int_ptr(memory.int_ptr, retain=True)


def device_of(array: Any) -> Device:
    """aescl's Device for the OpenCL device an array's queue runs on."""
    found = array.queue.device
    for device in opencl_devices():
        if device.cl_device == found:
            return device
    raise ValueError(f"the array's device ({found.name}) is not one aescl lists")


class _QueueMemory:
    """One call's memory operations (device_runs.DeviceMemory), chained on its queue."""

    def __init__(self, worker: OpenclBlocks, queue: Any, wait_for: list[Any]) -> None:
        self._worker, self._queue = worker, queue
        self._context = queue.context
        self._align = queue.device.mem_base_addr_align // 8  # (given in bits)
        self.events = list(wait_for)

    def _then(self, event: Any) -> None:
        self.events = [event]

    def _buffer(self, span: BufferSpan) -> Any:
        if span.offset == 0 and span.nbytes == span.buffer.size:
            return span.buffer
        return span.buffer.get_sub_region(span.offset, span.nbytes)

    def aligned(self, span: BufferSpan) -> bool:
        return span.offset % self._align == 0

    def launch(self, source: BufferSpan, target: BufferSpan, blocks: int,
               first_block: int) -> None:
        src = self._buffer(source)
        dst = src if target == source else self._buffer(target)
        self._then(self._worker.launcher.enqueue(
            self._queue, src, dst, blocks, self._worker.kernel_args(first_block),
            wait_for=self.events))

    def scratch(self, nbytes: int) -> BufferSpan:
        buffer = cl.Buffer(self._context, cl.mem_flags.READ_WRITE, nbytes)
        self._then(cl.enqueue_fill_buffer(self._queue, buffer, b"\0", 0, nbytes,
                                          wait_for=self.events))
        return BufferSpan(buffer, 0, nbytes)

    def copy(self, target: BufferSpan, source: BufferSpan) -> None:
        self._then(cl.enqueue_copy(self._queue, target.buffer, source.buffer,
                                   byte_count=source.nbytes, src_offset=source.offset,
                                   dst_offset=target.offset, wait_for=self.events))

    def release(self, span: BufferSpan) -> None:
        pass  # OpenCL frees a released buffer once the commands that use it are done


def _device_within(array: Any, devices: list[Device] | None) -> Device:
    """The device of a pyopencl array, which must be one of ``devices`` (the devices a
    call was made for; None: any)."""
    device = device_of(array)
    if devices is not None and device not in devices:
        raise ValueError(f"the input is on {device.name} ({device.id}); the call was made for "
                         + ", ".join(f"{d.name} ({d.id})" for d in devices))
    return device


class OpenclArrayBlocks:
    """A block job (ECB or CTR) over pyopencl arrays: a worker per (context, device),
    made when an array there first comes. ``devices``, when the cipher named some, are
    the only ones an array may be on."""

    def __init__(self, transform: BlockTransform, devices: list[Device] | None = None) -> None:
        self._transform = transform
        self._devices = devices
        self._workers: dict[tuple[int, str], OpenclBlocks] = {}

    def _worker(self, device: Device, context: Any) -> OpenclBlocks:
        key = (context.int_ptr, device.id)
        if key not in self._workers:
            self._workers[key] = OpenclBlocks(device, self._transform, context)
        return self._workers[key]

    def __call__(self, data: Any, output: Any, first_block: int = 0, skip: int = 0) -> Any:
        """``data`` through the kernel into ``output`` or a new array like ``data``;
        returns that new array, or None when ``output`` was given."""
        import pyopencl.array as cl_array

        source = _span(data, "the input")
        device = _device_within(data, self._devices)
        result = None
        if output is None:
            result = output = cl_array.empty_like(data)
        target = _output_span(output, data)
        if target.nbytes != source.nbytes:
            raise ValueError(f"output has {target.nbytes} bytes; the input has {source.nbytes}")
        if _same_buffer(source, target):
            check_in_place_or_apart(source.offset, target.offset, source.nbytes)
        if source.nbytes:
            worker = self._worker(device, data.context)
            memory = _QueueMemory(worker, data.queue, [*data.events, *output.events])
            with worker.launcher.runtime.lock:  # (the kernel object's arguments)
                run_blocks(memory, source, target, first_block, skip)
            for array in (data, output) if output is not data else (data,):
                for event in memory.events:
                    array.add_event(event)
        return result


class OpenclArrayGhash:
    """GHASH partial sums of ciphertext in pyopencl arrays (GCM on device arrays), for
    one key: a GCM engine per (context, device), made when an array there first comes."""

    def __init__(self, key: bytes, multipliers: Any = None) -> None:
        self._key = key  # (the device expands H's tables from it: multipliers unused)
        self._engines: dict[tuple[int, str], GcmKernels] = {}

    def _engine(self, array: Any) -> GcmKernels:
        device = device_of(array)
        key = (array.context.int_ptr, device.id)
        if key not in self._engines:
            self._engines[key] = GcmKernels(self._key, device, "host", array.context)
        return self._engines[key]

    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        """The partial sum of bytes ``offset .. offset + nbytes`` (whole blocks) of an
        array, once the work on its queue is done (this waits for it)."""
        span = _span(data, "the input").at(offset, nbytes)
        if not nbytes:
            return 0
        engine = self._engine(data)
        data.finish()  # (the array's events; GHASH runs on the engine's queue)
        data.queue.finish()
        align = data.queue.device.mem_base_addr_align // 8
        step = engine.slice_bytes - engine.slice_bytes % align
        total = 0
        for start in range(0, nbytes, step):
            piece = span.at(start, min(step, nbytes - start))
            if piece.offset % align:  # a sub-buffer must start aligned: copy the piece
                buffer = cl.Buffer(data.context, cl.mem_flags.READ_WRITE, piece.nbytes)
                cl.enqueue_copy(engine.runtime.queue, buffer, piece.buffer,
                                byte_count=piece.nbytes, src_offset=piece.offset)
            else:
                buffer = piece.buffer.get_sub_region(piece.offset, piece.nbytes)
            blocks = piece.nbytes // BLOCK_SIZE
            total = engine.times_power(total, blocks) ^ engine.partial_sum(buffer, blocks)
        return total

    def host_partial_sum(self, like: Any, blocks: memoryview) -> int:
        """The partial sum of whole blocks in host memory (AAD), hashed on the device of
        ``like`` (a pyopencl array), in its context."""
        return self._engine(like).host_partial_sum(np.frombuffer(blocks, np.uint8))

    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        """Bytes ``offset .. offset + nbytes`` of an array (a few bytes of ciphertext),
        after the work before them on its queue."""
        return read_array(data, offset, nbytes)


# Calls that returned before their work was done, with what that work uses: (the
# event of its end, the call's kernels object, which holds its engine and buffers).
_parked: list[tuple[Any, Any]] = []
_parked_lock = threading.Lock()
_PARKED_MOST = 4  # calls held at most before those done are let go regardless


def _park(done: Any, holder: Any) -> None:
    """Hold what a call's work uses until that work is done. Freeing device memory in
    NVIDIA's OpenCL waits for all the work on the device (as cuMemFree does): freed as
    the call returned, it made a 1 GiB seal as slow as a blocking one."""
    with _parked_lock:
        _parked.append((done, holder))


def _let_go_of_parked() -> None:
    """At the start of a call, before its work: let go of what earlier calls held once
    all of their work is done (then freeing waits for nothing of aescl's), or, past
    _PARKED_MOST calls, of those that are done."""
    complete = cl.command_execution_status.COMPLETE
    with _parked_lock:
        if not _parked:
            return
        if _parked[-1][0].command_execution_status == complete:
            done, _parked[:] = _parked[:], []
        elif len(_parked) > _PARKED_MOST:
            done = [(event, holder) for event, holder in _parked
                    if event.command_execution_status == complete]
            _parked[:] = [(event, holder) for event, holder in _parked
                          if event.command_execution_status != complete]
        else:
            return
    for _, holder in done:
        holder.release()


def _output_span(output: Any, data: Any) -> BufferSpan:
    """The span of a caller's ``output=``, which must be a pyopencl array in the input's
    context and on its device (checked before any work)."""
    if not on_opencl(output):
        raise TypeError("output= must be a pyopencl array like the input (host memory "
                        "takes a host input)")
    target = _span(output, "output")  # (first: it refuses an array without a queue)
    if output.context != data.context or output.queue.device != data.queue.device:
        raise ValueError("output is in another context or on another device than the input")
    return target


def _chunked_output(output: Any, data: Any, source: BufferSpan, out_bytes: int
                    ) -> BufferSpan:
    """The span of a caller's ``output=`` for a chunked call on ``data``
    (:func:`_output_span`), checked to be of the result's size and apart from the input."""
    target = _output_span(output, data)
    same = _same_buffer(source, target)
    device_chunks.check_output(source.offset, source.nbytes, target.offset, target.nbytes,
                               out_bytes, same)
    return target


class OpenclArrayChunks:
    """The chunked format's chunks (one chunk key and base nonce) between pyopencl
    arrays: a message array sealed into a new array (or the caller's ``output=``), and
    opened back. A call runs on aescl's queue in the array's context, after the work
    before on the input's queue (and the output's); sealing returns once its work is
    enqueued, with its event added to both arrays (pyopencl's ``Array.events``, which
    later pyopencl work on them waits for) and their memory held until it is done (an
    array dropped meanwhile would go back to its memory pool for the next array);
    opening returns once its result is complete and checked."""

    def __init__(self, key: bytes, base_nonce: bytes, devices: list[Device] | None = None
                 ) -> None:
        self._key, self._base_nonce = key, base_nonce
        self._devices = devices  # the only devices an array may be on (None: any)

    @classmethod
    def for_messages(cls, key: bytes, devices: list[Device] | None = None
                     ) -> OpenclArrayChunks:
        """The job of many GCM messages under ``key`` (seal_messages, open_messages)."""
        return cls(key, bytes(12), devices)

    def _kernels(self, array: Any, device: Device) -> tuple[OpenclChunkKernels, Any]:
        engine = GcmKernels(self._key, device, "host", array.context,
                           ghash.hash_subkey(self._key))
        return OpenclChunkKernels(engine, device, array.context, self._key), engine.runtime

    def _run(self, data: Any, header_bytes: int, out_bytes: int, work: Any,
             output: Any = None, work_waits: bool = False) -> Any:
        """``work`` on aescl's queue after the work before on the arrays' queues; where
        ``work_waits`` (opening: it waits for its tags), what it used is let go at once
        and nothing is left for later work on the arrays to wait for."""
        import pyopencl.array as cl_array

        source = _span(data, "the input")
        device_of_input = _device_within(data, self._devices)
        after = [*data.events]  # (what the work waits for: pyopencl's rule)
        if output is None:
            # Placed so that what follows the header starts where a sub-buffer may.
            lead = -header_bytes % (data.queue.device.mem_base_addr_align // 8)
            # (with the input's allocator: a caller's memory pool serves the result too)
            result = cl_array.empty(data.queue, lead + out_bytes, np.uint8,
                                    allocator=data.allocator)
            if lead:
                result = result[lead:]
            target = _span(result, "the result")
        else:
            result, target = output, _chunked_output(output, data, source, out_bytes)
            after += output.events
            if output.queue != data.queue:
                after.append(cl.enqueue_marker(output.queue))
        _let_go_of_parked()
        kernels, rt = self._kernels(data, device_of_input)
        with rt.lock:
            # After the work before on the input's queue (its events, then a marker
            # there), without waiting for it here.
            cl.enqueue_barrier(rt.queue, wait_for=[*after, cl.enqueue_marker(data.queue)])
            try:
                work(kernels, source, target.at(0, out_bytes))
            except BaseException:  # (a failed opening's zeroing is done before it leaves)
                rt.queue.finish()
                kernels.release()
                raise
            if work_waits:
                # Its last command was a blocking read on this in-order queue, so all
                # of its work is done: a marker, events on the arrays and parking
                # would be host time between this opening's end and the next call's
                # first launch, in which the device idles.
                kernels.release()
                return result if output is None else None
            done = cl.enqueue_marker(rt.queue)
        for array in (data, result):  # (what pyopencl orders later work on them after)
            array.add_event(done)
        # Their memory too, until the work is done: an array the caller drops now goes
        # back to its memory pool, which serves the same memory to the next array at
        # once, written on the caller's queue while this work on aescl's still reads or
        # writes it.
        kernels.held.extend((data.base_data, result.base_data))
        _park(done, kernels)
        return result if output is None else None

    def seal(self, message: Any, header: bytes, sealed_bytes: int, output: Any = None) -> Any:
        """A new uint8 array, or ``output`` (then None is returned): ``header`` and then
        the sealed chunks of ``message``."""
        def work(kernels: OpenclChunkKernels, source: BufferSpan, target: BufferSpan) -> None:
            kernels.upload(target.at(0, len(header)), header)
            device_chunks.seal(kernels, self._base_nonce, source,
                               target.at(len(header), sealed_bytes - len(header)))
        return self._run(message, len(header), sealed_bytes, work, output)

    def open(self, sealed: Any, at: int, nbytes: int, first: int, final: bool,
             out_bytes: int, output: Any = None) -> Any:
        """A new uint8 array of ``out_bytes``, or ``output`` (then None is returned): the
        plaintext of the sealed chunks in bytes ``at .. at + nbytes`` of ``sealed``,
        chunks ``first, ...`` of the message (the last of them the final one where
        ``final`` says so)."""
        def work(kernels: OpenclChunkKernels, source: BufferSpan, target: BufferSpan) -> None:
            device_chunks.open_sealed(kernels, self._base_nonce, source.at(at, nbytes),
                                      target, first, final)
        return self._run(sealed, 0, out_bytes, work, output, work_waits=True)

    def seal_messages(self, rows: Any, messages: device_messages.MessagePlan) -> Any:
        """Many GCM messages under this object's key (device_messages.py): the rows of
        ``rows`` sealed into a new flat uint8 array of rows of ciphertext, then tag; None
        where the kernels cannot take them (a CPU device's carry-less GHASH has no
        fused kernel)."""
        work = device_messages.Sealing(messages)
        try:
            return self._run(rows, 0, work.result_bytes, work)
        except device_messages.NotTaken:
            return None

    def open_messages(self, rows: Any, messages: device_messages.MessagePlan,
                      meanwhile: Callable[[], Any] | None = None) -> tuple[Any, int] | None:
        """:class:`device_messages.Opening` of pyopencl rows: the opened rows in a new flat
        uint8 array and the first failed index, once every tag is checked (the work
        waits); None where the kernels cannot take them. ``meanwhile``: called while the
        device works, before the wait for the verdict."""
        work = device_messages.Opening(messages, meanwhile)
        try:
            return self._run(rows, 0, work.result_bytes, work, work_waits=True), \
                work.first_failed
        except device_messages.NotTaken:
            return None

    @staticmethod
    def read(array: Any, offset: int, nbytes: int) -> bytes:
        """Bytes of an array (a header), after the work before them on its queue."""
        return read_array(array, offset, nbytes)


def read_array(array: Any, offset: int, nbytes: int) -> bytes:
    """Bytes ``offset .. offset + nbytes`` of an array, after the work before them on its
    queue (a header, or the bytes of a block split between GCM calls)."""
    span = _span(array, "the input").at(offset, nbytes)
    host = np.empty(nbytes, np.uint8)
    if nbytes:
        cl.enqueue_copy(array.queue, host, span.buffer, src_offset=span.offset,
                        wait_for=array.events, is_blocking=True)
    return host.tobytes()


class OpenclArrayBytes:
    """Plain bytes of pyopencl arrays, for a call that lays out its own result
    (aescl.AESGCM: the ciphertext, then the tag)."""

    @staticmethod
    def empty(like: Any, nbytes: int) -> Any:
        """A new flat uint8 array of ``nbytes`` in ``like``'s queue (and allocator)."""
        import pyopencl.array as cl_array

        return cl_array.empty(like.queue, nbytes, np.uint8, allocator=like.allocator)

    @staticmethod
    def write(array: Any, offset: int, data: bytes) -> None:
        """``data`` into bytes ``offset ..`` of ``array``, in its queue, done on return."""
        span = _span(array, "the result")
        cl.enqueue_copy(array.queue, span.buffer, np.frombuffer(data, np.uint8).copy(),
                        dst_offset=span.offset + offset, is_blocking=True)

    @staticmethod
    def finish(like: Any, result: Any) -> Any:
        return result

    @staticmethod
    def device_of(array: Any) -> Any:
        """The OpenCL context ``array`` lies in (its device's, for aescl's arrays)."""
        return array.context

    @staticmethod
    def stack(arrays: list[Any]) -> Any:
        """The arrays' bytes as the rows of one new 2-D uint8 array in the first one's
        queue (pyopencl's stack: a copy a row); None where they are not all C-contiguous,
        of one size and in one context."""
        import pyopencl.array as cl_array

        first = arrays[0]
        if any(a.context != first.context or a.nbytes != first.nbytes
               or not a.flags.c_contiguous for a in arrays):
            return None
        return cl_array.stack([a.reshape(-1).view(np.uint8) for a in arrays],
                              queue=first.queue)
