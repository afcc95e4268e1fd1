"""What the CUDA engine's tests share: whether NVRTC and a GPU are here (the marks that
skip, visibly, without them), the array libraries each array test runs for, moving bytes
to and from their arrays, and a kernel that holds a stream busy."""

from __future__ import annotations

import pytest

KEY_BITS = [128, 192, 256]
# Message sizes of the chunked format's tests: empty, short, one chunk, a partial final
# chunk, whole chunks only.
CHUNK_SIZES = [0, 5, 16384, 3 * 16384 + 100, 5 * 16384]


def nvrtc_available() -> bool:
    try:
        from aescl.engines.cuda.kernels import nvrtc_version

        nvrtc_version()
    except Exception:  # noqa: BLE001 - any failure to load NVRTC means "absent"
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not nvrtc_available(),
                                 reason="NVRTC (pip install 'aescl[cuda]') is not installed")


def cuda_gpu_present() -> bool:
    if not nvrtc_available():
        return False
    try:
        from cuda.core import Device

        Device(0)
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return False
    return True


needs_gpu = pytest.mark.skipif(not cuda_gpu_present(), reason="no CUDA GPU on this machine")


def numba_library():
    """Numba's CUDA arrays, as the tests below use a library (``asarray``, ``float32``,
    ``__name__``)."""
    import types

    import numpy as np
    from numba import cuda

    return types.SimpleNamespace(__name__="numba", asarray=cuda.to_device, float32=np.float32)


def libraries() -> list:
    found = []
    for name in ("torch", "cupy", "numba"):
        try:
            library = numba_library() if name == "numba" else __import__(name)
            found.append(pytest.param(library, id=name))
        except ImportError:
            found.append(pytest.param(None, id=name, marks=pytest.mark.skip(
                reason=f"{name} is not installed")))
    return found


def to_gpu(library, data: bytes):
    import numpy as np

    host = np.frombuffer(data, np.uint8).copy()
    return library.from_numpy(host).cuda() if library.__name__ == "torch" else \
        library.asarray(host)


def to_host(array) -> bytes:
    if type(array).__module__.startswith("torch"):
        return array.cpu().numpy().tobytes()
    if hasattr(array, "copy_to_host"):  # (Numba's)
        return array.copy_to_host().tobytes()
    return array.get().tobytes()


def check_driver(result: tuple) -> None:
    from cuda.bindings import driver

    assert result[0] == driver.CUresult.CUDA_SUCCESS, result


def to_jax(jax, gpu, data: bytes):
    import numpy as np

    return jax.device_put(np.frombuffer(data, np.uint8).copy(), gpu)


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}"""


class LibraryStream:
    """A stream of torch's or CuPy's own (not the default one), made current for that
    library: what the library enqueues next, and aescl's work on its arrays, go on it."""

    def __init__(self, library) -> None:
        import cupy

        self._library = library
        if library.__name__ == "torch":
            self._stream = library.cuda.Stream()
            self._context = library.cuda.stream(self._stream)
            self.handle = self._stream.cuda_stream
        else:
            self._stream = self._context = cupy.cuda.Stream(non_blocking=True)
            self.handle = self._stream.ptr
        self.as_cupy = cupy.cuda.ExternalStream(self.handle)

    def __enter__(self) -> LibraryStream:
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def done(self) -> bool:
        return self._stream.query() if self._library.__name__ == "torch" else self._stream.done

    def copy(self, array):
        return array.clone() if self._library.__name__ == "torch" else array.copy()

    def zeros_like(self, array):
        return self._library.zeros_like(array)
