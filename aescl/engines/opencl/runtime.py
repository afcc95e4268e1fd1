"""The OpenCL engine's runtime: the one module that holds the driver's state for the
engine. A device's context and in-order queue (:func:`device_runtime`, one per device
and process, and one per context a caller's arrays live in), its built programs and
kernels, the lock that gives one job at a time a device (:func:`one_job_per_device`),
and scratch buffers kept for later calls. The sources, options and builds are
``kernels.py``'s; what runs over them, ``workers.py``'s and ``pipeline.py``'s.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

import pyopencl as cl

from ...devices import Device
from ...errors import DeviceUnavailable


@dataclass(frozen=True)
class BuildRecord:
    """One program build: how long it took and whether the disk cache served it."""

    label: str
    options: str
    seconds: float
    from_disk_cache: bool
    compiler_log: str = ""  # what a successful build said, if anything


@dataclass(eq=False)  # (each runtime is itself: compared and hashed by identity)
class DeviceRuntime:
    """The OpenCL context and queue aescl uses for one device, and its built programs.

    ``lock`` is held by every job on the device, so that jobs from several threads run
    one after another: they share the kernel objects (whose arguments are set just
    before each launch), the pipeline's staging and device buffers, and the in-order
    queue. Measured against a pipeline per caller in docs/benchmarks (2026-11-24): one
    job at a time already keeps the device busy.
    """

    device: Device
    context: Any
    queue: Any
    programs: dict[str, Any] = field(default_factory=dict)  # by cache key
    kernels: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # (file, options, name)
    build_log: list[BuildRecord] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    spare: dict[int, list[Any]] = field(default_factory=dict)  # scratch let go, by size
    # GHASH's tables of the bases used last (H, or a power of H that folds sums), for
    # every GCM kernel set here (gcm_kernels.py, GcmKernels._power_tables_of), the most recent last.
    ghash_tables: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Small buffers whose first word is an opening's verdict as a kernel left it after
    # every tag matched: its value before the kernels (workers.py, OpenclChunkKernels).
    verdicts: list[Any] = field(default_factory=list)
    # What is made once from this runtime's kernels (gcm_kernels.py: launch shapes), kept
    # here so that it goes when the runtime goes, with the context it holds.
    made: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def take_scratch(self, nbytes: int) -> Any:
        """A buffer of at least ``nbytes`` (a power of two) in this context, one given
        back earlier where there is one: freeing a buffer waits, in NVIDIA's OpenCL,
        for all the work on the device, which calls that let go of scratch often (the
        chunked format's, arrays.py) would otherwise wait for."""
        size = 1 << max(4, (nbytes - 1).bit_length())
        with self.lock:
            if self.spare.get(size):
                return self.spare[size].pop()
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size)

    def give_back_scratch(self, buffers: list[Any]) -> None:
        """Buffers of take_scratch whose work is done, for later calls (a few of each
        size; the rest are freed)."""
        with self.lock:
            for buffer in buffers:
                kept = self.spare.setdefault(buffer.size, [])
                if len(kept) < _SPARE_SCRATCH_PER_SIZE:
                    kept.append(buffer)


_SPARE_SCRATCH_PER_SIZE = 8
_runtimes: dict[str, DeviceRuntime] = {}
_runtimes_lock = threading.Lock()  # two threads' first jobs must not make two contexts
# Runtimes in contexts that callers made (their pyopencl arrays'), by (context, device),
# the most recently used last: programs are built per context. A runtime holds its
# context, so no other context can take its handle while it is kept here. Only the last
# few are kept: every context holds device memory, and a caller that makes a context per
# job filled the GPU (pytest -n 8 on 4 H200s, docs/benchmarks). A context used again
# after its runtime was let go gets a new one (its programs come again from the disk
# cache); work of the old one holds what it uses until it is done.
_caller_runtimes: OrderedDict[tuple[int, str], DeviceRuntime] = OrderedDict()
_CALLER_RUNTIMES_KEPT = 4


@contextmanager
def _started(device: Device) -> Iterator[None]:
    """A driver's refusal to make a context or queue, as DeviceUnavailable: NVIDIA's
    OpenCL answers CL_OUT_OF_HOST_MEMORY when the GPU has no room for another context."""
    try:
        yield
    except cl.Error as exc:
        raise DeviceUnavailable(f"cannot start {device.id} ({device.name}): {exc}") from exc


def device_runtime(device: Device, context: Any = None) -> DeviceRuntime:
    """The shared context and in-order queue for a device (created once per process);
    or, given a caller's ``context`` other than that one, a runtime in that context
    (its programs and kernels; its ``queue`` is aescl's own in that context, for
    setup work; callers' arrays run on their own queues)."""
    rt = _runtimes.get(device.id)
    if rt is None:
        with _runtimes_lock:
            rt = _runtimes.get(device.id)
            if rt is None:
                with _started(device):
                    context_of_aescl = cl.Context([device.cl_device])
                    # Profiling lets aescl.bench time kernels by their events; its cost
                    # is negligible.
                    queue = cl.CommandQueue(
                        context_of_aescl, device.cl_device,
                        properties=cl.command_queue_properties.PROFILING_ENABLE)
                rt = _runtimes[device.id] = DeviceRuntime(device, context_of_aescl, queue)
    if context is None or context == rt.context:
        return rt
    key = (context.int_ptr, device.id)
    with _runtimes_lock:
        found = _caller_runtimes.get(key)
        if found is None:
            with _started(device):
                queue = cl.CommandQueue(context, device.cl_device)
            found = _caller_runtimes[key] = DeviceRuntime(device, context, queue)
            while len(_caller_runtimes) > _CALLER_RUNTIMES_KEPT:
                _caller_runtimes.popitem(last=False)
        _caller_runtimes.move_to_end(key)
        return found


_Method = TypeVar("_Method", bound=Callable[..., Any])
_Value = TypeVar("_Value")


def kept_per_object(method: Callable[[Any], _Value]) -> Any:
    """A property made once per object, the device's lock (``self.runtime``) held while it
    is made, then kept. Not functools.cached_property: on Python 3.11 that holds one
    lock for every object of the class while it makes the value, so a thread holding a
    device's lock that asked for it waited on a thread that was making it and waited
    for the device's lock (a deadlock, tests/test_threads.py on PoCL)."""
    key = f"_kept_{method.__name__}"

    @wraps(method)
    def kept(self: Any) -> _Value:
        found = self.__dict__.get(key, _NOT_MADE)
        if found is _NOT_MADE:
            with self.runtime.lock:
                found = self.__dict__.get(key, _NOT_MADE)
                if found is _NOT_MADE:
                    found = self.__dict__[key] = method(self)
        return found  # type: ignore[no-any-return]
    return property(kept)


_NOT_MADE = object()


def one_job_per_device(method: _Method) -> _Method:
    """Run ``method`` holding the device's lock (:class:`DeviceRuntime`); its object
    names the device's runtime as ``self.runtime``."""
    @wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.runtime.lock:
            return method(self, *args, **kwargs)
    return locked  # type: ignore[return-value]
