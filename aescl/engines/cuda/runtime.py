"""The CUDA engine's runtime: the one module that holds the driver's state for the
engine. A GPU as the engine uses it (:class:`Gpu`: its primary context, SM count,
round tables, kernels looked up once, the stream-ordered memory pool, GHASH's sums
buffer), a driver call's result checked (:func:`checked`), and kernel launches through
cuLaunchKernel (:func:`launch_kernel`). The kernels' sources and builds are
``kernels.py``'s; what runs over them, ``workers.py``'s.
"""

from __future__ import annotations

import array
import ctypes
import functools
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import DeviceUnavailable
from .kernels import TABLE_KERNELS, cuda_defines, module, round_tables_for, table_bytes

if TYPE_CHECKING:
    from ...devices import Device


def ordinal_of(device: Device) -> int:
    """The CUDA ordinal of a ``cuda:N`` device."""
    return int(device.id.partition(":")[2])


@functools.cache
def cuda_driver() -> Any:
    """cuda.bindings' driver module, for the calls of a small message's path (an import
    statement in a function costs about a microsecond at each call; aescl imports the
    CUDA packages only when CUDA work comes)."""
    from cuda.bindings import driver

    return driver


def checked(result: Any) -> Any:
    """The values of a cuda.bindings call; raises on an error code."""
    error, *values = result if isinstance(result, tuple) else (result,)
    if error:  # (CUDA_SUCCESS is 0; the import stays off the path of a call that worked)
        from cuda.bindings import driver

        _, name = driver.cuGetErrorName(error)
        raise RuntimeError(f"CUDA: {name.decode() if name else error}")
    return values[0] if len(values) == 1 else values


@functools.cache
def _driver_pointer_attribute() -> Any:
    import ctypes
    import sys

    library = ctypes.WinDLL("nvcuda.dll") if sys.platform == "win32" else \
        ctypes.CDLL("libcuda.so.1")
    function = library.cuPointerGetAttribute
    function.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64)
    function.restype = ctypes.c_int
    return function


def pointer_gpu(pointer: int) -> int:
    """The ordinal of the GPU whose memory ``pointer`` points into: the driver's
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, asked of the driver library itself. cuda.bindings'
    own call reads it back from a field the driver never wrote and says 0 for every GPU
    (NVIDIA/cuda-python#2928), which on 2 x H200 sent work on GPU 1's arrays to GPU 0."""
    import ctypes

    from cuda.bindings import driver

    ordinal = ctypes.c_int(-1)
    attribute = int(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
    error = _driver_pointer_attribute()(ctypes.byref(ordinal), attribute, pointer)
    if error:
        checked((driver.CUresult(error),))
    return ordinal.value


def launch_function(kernel: Any, name: str, shared_bytes: int) -> Any:
    """The driver's function of a cuda.core kernel, for cuLaunchKernel: a library's
    kernel is looked up as its function in the current context. A kernel that stages
    the round tables may then use ``shared_bytes`` of dynamic shared memory (beyond the
    48 KiB a launch gets without asking)."""
    from cuda.bindings import driver

    handle = kernel.handle
    function = handle if isinstance(handle, driver.CUfunction) else \
        checked(driver.cuKernelGetFunction(handle))
    if name in TABLE_KERNELS:
        checked(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared_bytes))
    return function


def launch_kernel(function: Any, grid: int, threads: int, shared_bytes: int, stream: int,
                  *arguments: Any) -> None:
    """Enqueue a kernel through cuLaunchKernel on the stream with handle ``stream``, with
    ``shared_bytes`` of dynamic shared memory. Each argument is passed as its bytes:
    an int as 64 bits (a pointer, or a 64-bit value), a numpy scalar or array as it is
    (a 32-bit value; a vector or the key argument by value)."""
    storage, pointers = kernel_parameters(arguments)
    from cuda.bindings import driver

    checked(driver.cuLaunchKernel(function, max(1, grid), 1, 1, threads, 1, 1, shared_bytes,
                                 driver.CUstream(stream), pointers.buffer_info()[0], 0))
    del storage  # (held until here: the launch copies the values from it)


def kernel_parameters(arguments: Any) -> tuple[bytearray, array.array]:
    """cuLaunchKernel's kernelParams for ``arguments`` (as :func:`launch_kernel` takes
    them): their bytes side by side in one buffer, each at a multiple of 16 bytes, and
    the address of each, as a void** array. Keep both until the launch has returned.

    Asking numpy for each argument's address (.ctypes) cost 3-4 µs apiece, 70 µs for
    gcm_crypt_hash's 27 (H100 host, 2026-11-25); numpy arithmetic on the offsets and
    each scalar through ascontiguousarray were half of the 48 µs left (the CI kind's
    host, 2026-11-26). Packing each argument's bytes and padding them one by one cost
    18 µs for those 27 on the CI kind; one ``struct`` format a kind of argument list,
    made once, packs them in 12 (2026-11-27): the set-up of each piece of a team's job
    runs under the GIL that the feeding threads of every GPU share."""
    shape = _shape(arguments)
    layout = _layouts.get(shape)
    if layout is None:
        layout = _layouts[shape] = _layout(arguments)
    packer, offsets = layout
    storage = bytearray(packer.size)
    packer.pack_into(storage, 0, *[argument.tobytes() if type(argument) is np.ndarray
                                   else int(argument) for argument in arguments])
    base = ctypes.addressof(ctypes.c_char.from_buffer(storage)) if storage else 0
    return storage, array.array("Q", [base + offset for offset in offsets])


class KeptLaunch:
    """A launch of one kernel made once and enqueued many times (packing
    gcm_crypt_hash's 27 arguments anew took about 11 µs of a 4 KiB message's call, whose
    GPU work is about 20): the arguments as :func:`launch_kernel` takes them, packed
    once, of which only those at positions ``changing`` are given again at each
    :meth:`launch` (an int, or bytes of the argument's size), on the stream ``stream``
    (whose GPU's context must be current). Thread-safe: the one buffer is packed and
    launched under a lock."""

    def __init__(self, function: Any, grid: int, threads: int, shared_bytes: int,
                 stream: int, *arguments: Any, changing: tuple[int, ...]) -> None:
        from cuda.bindings import driver

        self._storage, self._pointers = kernel_parameters(arguments)
        _, offsets = _layouts[_shape(arguments)]
        self._fields = [(struct.Struct("<Q" if isinstance(arguments[at], int)
                                       else f"<{arguments[at].nbytes}s"), offsets[at])
                        for at in changing]
        self._call = (function, max(1, grid), 1, 1, threads, 1, 1, shared_bytes,
                      driver.CUstream(stream), self._pointers.buffer_info()[0], 0)
        self._launch = driver.cuLaunchKernel
        self._lock = threading.Lock()

    def launch(self, *values: Any) -> None:
        """Enqueue the kernel, the ``changing`` arguments set to ``values`` (in order)."""
        with self._lock:
            for (field, offset), value in zip(self._fields, values, strict=True):
                field.pack_into(self._storage, offset, value)
            checked(self._launch(*self._call))


def _shape(arguments: Any) -> tuple[Any, ...]:
    """The kind of each argument (a numpy array's size, else its type): the key of
    :data:`_layouts`."""
    return tuple(argument.nbytes if type(argument) is np.ndarray else type(argument)
                 for argument in arguments)


# (the kind of each argument: a numpy array's size, else its type) -> (format, offsets)
_layouts: dict[tuple[Any, ...], tuple[struct.Struct, list[int]]] = {}


def _layout(arguments: Any) -> tuple[struct.Struct, list[int]]:
    """The ``struct`` format of :func:`kernel_parameters`'s buffer for arguments of these
    kinds: an int as 64 bits, a numpy scalar as its own size, an array as its bytes,
    each padded to a multiple of 16 bytes; and where each starts."""
    codes, offsets, at = ["<"], [], 0
    for argument in arguments:
        if isinstance(argument, int):
            size, code = 8, "Q"
        elif type(argument) is np.ndarray:
            size = argument.nbytes
            code = f"{size}s"
        else:
            size = argument.dtype.itemsize
            code = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
        padded = -(-size // 16) * 16
        codes.append(code + (f"{padded - size}x" if padded > size else ""))
        offsets.append(at)
        at += padded
    return struct.Struct("".join(codes)), offsets


class CudaBytes(NamedTuple):
    """The bytes of a CUDA device array: where they are and the stream to order on. (A
    named tuple: made a few times in every call, where a frozen dataclass's fields cost
    a call each to set.)"""

    pointer: int
    nbytes: int
    device: int  # CUDA device ordinal
    stream: int  # handle of the stream the array's producer works on (0: legacy default)
    readonly: bool

    def at(self, offset: int, nbytes: int) -> CudaBytes:
        return CudaBytes(self.pointer + offset, nbytes, self.device, self.stream, self.readonly)


class Gpu:
    """One GPU as the engine uses it: its primary context, SM count, architecture, and
    the round tables its blocks hold (kernels.round_tables_for)."""

    def __init__(self, ordinal: int) -> None:
        from cuda.bindings import driver
        from cuda.core import Device

        self.core = Device(ordinal)
        # Its primary context, made current only to be read: the caller's is put back, as
        # keeps_callers_context does (listing the GPUs left the last one's current, and
        # then the caller's next torch or CuPy array went there).
        callers = checked(driver.cuCtxGetCurrent())
        try:
            self.core.set_current()
        except Exception as exc:  # (cuda.core's CUDAError: no room for a context)
            checked(driver.cuCtxSetCurrent(callers))
            raise DeviceUnavailable(f"cannot start cuda:{ordinal}: {exc}") from exc
        self._context = checked(driver.cuCtxGetCurrent())
        self._set_current = driver.cuCtxSetCurrent
        checked(self._set_current(callers))
        self.arch = self.core.arch
        properties = self.core.properties
        self.sms = properties.multiprocessor_count
        self.shared_optin = properties.max_shared_memory_per_block_optin
        self.round_tables = round_tables_for(self.shared_optin)
        self.table_bytes = table_bytes(self.round_tables)
        self.lock = threading.RLock()
        self._sums: Any = None  # (sums_buffer)
        self._sums_bytes = 0
        self._kernels: dict[tuple[str, str, int | None], tuple[Any, Any]] = {}
        self._pool: Any = None  # (memory_pool)
        # Openings' verdicts as the kernels left them after every tag matched, ready for
        # later ones (CudaChunkKernels.verdict): device pointers.
        self.verdicts: list[int] = []

    def make_current(self) -> None:
        """Make this GPU's context the calling thread's, before driver calls on its memory
        or streams. A stream handle of 0 (CuPy's and others' default stream) names the
        *current* context's default stream, and a kernel runs in the current context: a
        call into an array's library between aescl's driver calls may have made another
        GPU's context current (2 x H200: kernels on GPU 1's memory launched in GPU 0's
        context read out of bounds, and copies on the wrong default stream raced the
        kernels they should have followed). Cheaper than cuda.core's set_current: one
        driver call."""
        checked(self._set_current(self._context))

    def enter(self) -> Any:
        """Make this GPU's context the calling thread's for a call, where it is not
        already: what :meth:`leave` takes to put the caller's back (None where nothing
        changed). Where it was current, as a torch user's current GPU's context is, a
        small call spends one driver call on it, not the three of make_current inside
        keeps_callers_context."""
        callers = checked(cuda_driver().cuCtxGetCurrent())
        if int(callers) == int(self._context):
            return None
        checked(self._set_current(self._context))
        return callers

    def leave(self, callers: Any) -> None:
        """Put back the caller's context that :meth:`enter` returned."""
        if callers is not None:
            checked(self._set_current(callers))

    def kernel(self, filename: str, name: str, rounds: int | None) -> tuple[Any, Any]:
        """A kernel of the engine's build for ``rounds`` here (None: a file with no AES,
        built without the core's defines), and its driver function (launch_function), looked
        up once: a GCM message makes a new CTR worker, and a chunked call new chunk
        kernels, for which the lookups cost about 0.1 ms."""
        key = (filename, name, rounds)
        with self.lock:
            if key not in self._kernels:
                self.make_current()  # (the module loads, and its function is, per context)
                defines = {} if rounds is None else self.defines(rounds)
                kernel = module(filename, defines, self.arch).get_kernel(name)
                self._kernels[key] = kernel, launch_function(kernel, name, self.shared_bytes(name))
            return self._kernels[key]

    def memory_pool(self) -> Any:
        """aescl's stream-ordered memory pool on this GPU, which keeps up to POOL_KEEPS
        bytes of freed memory mapped. The device's default pool keeps none: it gives
        freed memory back to the driver at the next synchronization, so every call that
        waits (opening, which waits for its tags) mapped its scratch anew, 15-25 µs an
        allocation on the H100 host."""
        from cuda.bindings import driver

        with self.lock:
            if self._pool is None:
                properties = driver.CUmemPoolProps()
                properties.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
                properties.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
                properties.location.id = self.core.device_id
                pool = checked(driver.cuMemPoolCreate(properties))
                checked(driver.cuMemPoolSetAttribute(
                    pool, driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    driver.cuuint64_t(POOL_KEEPS)))
                self._pool = pool
            return self._pool

    def sums_buffer(self, nbytes: int) -> int:
        """Device memory for GHASH's partial sums, kept from call to call: allocating it
        in a stream's order each time cost 0.1-0.2 ms a call on the H100 host. The
        caller holds the lock, and has synchronized its stream before letting go."""
        from cuda.bindings import driver

        if nbytes > self._sums_bytes:
            self.make_current()
            if self._sums is not None:
                checked(driver.cuMemFree(self._sums))
            self._sums = checked(driver.cuMemAlloc(nbytes))
            self._sums_bytes = nbytes
        return int(self._sums)

    def table_grid(self, items: int, shape: Any) -> int:
        """Blocks of a table kernel's launch over ``items`` work-items."""
        return max(1, min(-(-items // shape.threads), self.sms * shape.blocks_per_sm))

    def defines(self, rounds: int) -> dict[str, int]:
        return cuda_defines(rounds, self.round_tables)

    def shared_bytes(self, kernel_name: str) -> int:
        """Dynamic shared memory of a launch of the kernel: the tables', or none."""
        return self.table_bytes if kernel_name in TABLE_KERNELS else 0


# Freed scratch memory a GPU's pool keeps (Gpu.memory_pool): a chunked call on 1 GiB
# takes about 4 MiB of it, one through staging (arrays at odd offsets) up to 128 MiB.
POOL_KEEPS = 64 << 20
_devices: dict[int, Gpu] = {}
_devices_lock = threading.Lock()


def keeps_callers_context(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (a call of aescl's on CUDA memory) leaves the calling thread's current
    context as it found it: torch and CuPy take the current context's GPU as the current
    device, so a call on GPU 1's tensor must not move the caller's next ``torch.empty(...,
    device="cuda")`` there."""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        driver = cuda_driver()
        callers = checked(driver.cuCtxGetCurrent())
        try:
            return method(*args, **kwargs)
        finally:
            checked(driver.cuCtxSetCurrent(callers))
    return call


def cuda_device(ordinal: int) -> Gpu:
    with _devices_lock:
        if ordinal not in _devices:
            _devices[ordinal] = Gpu(ordinal)
        return _devices[ordinal]
