"""The CUDA engine's block worker: ECB and CTR over CUDA device arrays, in place or
into another array, ordered on the stream the data's producer works on.

Memory is the caller's: a torch tensor, a CuPy array or any object with
``__cuda_array_interface__``; no byte of it passes through host memory. What
crosses to the device is the key's round keys (once per worker) and, for a CTR
call that starts or ends inside a block, nothing but that block's position: the
partial block is copied into a one-block scratch buffer on the device, run
through the same kernel and copied back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import keyschedule
from ..interface import BLOCK_SIZE, BlockTransform
from .kernels import cuda_defines, module

_THREADS_PER_BLOCK = 256
_GRID_BLOCKS_PER_SM = 8  # resident thread blocks a launch asks for, per SM


def _check(result: Any) -> Any:
    """The values of a cuda.bindings call; raises on an error code."""
    from cuda.bindings import driver

    error, *values = result if isinstance(result, tuple) else (result,)
    if error != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(error)
        raise RuntimeError(f"CUDA: {name.decode() if name else error}")
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class CudaBytes:
    """The bytes of a CUDA device array: where they are and the stream to order on."""

    pointer: int
    nbytes: int
    device: int  # CUDA device ordinal
    stream: int  # handle of the stream the array's producer works on (0: legacy default)
    readonly: bool

    def at(self, offset: int, nbytes: int) -> CudaBytes:
        return CudaBytes(self.pointer + offset, nbytes, self.device, self.stream, self.readonly)


class _Device:
    """One GPU as the engine uses it: its primary context, SM count and architecture."""

    def __init__(self, ordinal: int) -> None:
        from cuda.core import Device

        self.core = Device(ordinal)
        self.core.set_current()
        self.arch = self.core.arch
        self.sms = self.core.properties.multiprocessor_count
        self.lock = threading.RLock()


_devices: dict[int, _Device] = {}
_devices_lock = threading.Lock()


def cuda_device(ordinal: int) -> _Device:
    with _devices_lock:
        if ordinal not in _devices:
            _devices[ordinal] = _Device(ordinal)
        return _devices[ordinal]


class CudaBlocks:
    """One key's ECB or CTR kernel on one GPU, over device arrays."""

    def __init__(self, transform: BlockTransform, ordinal: int) -> None:
        from cuda.bindings import driver

        self._transform = transform
        self._gpu = cuda_device(ordinal)
        self._gpu.core.set_current()
        rounds = keyschedule.rounds_for_key(transform.key)
        if transform.is_ctr:
            filename, name, decrypt = "aes_ctr.cl", "aes_ctr_xor", False
        else:
            filename, decrypt = "aes_ecb.cl", transform.decrypt
            name = "aes_ecb_decrypt" if decrypt else "aes_ecb_encrypt"
        self._kernel = module(filename, cuda_defines(rounds), self._gpu.arch).get_kernel(name)
        round_keys = np.ascontiguousarray(
            keyschedule.kernel_key_material(transform.key, "host", decrypt), dtype="<u4")
        # Allocated outside any stream's order: freeing it waits for the GPU, so a
        # worker dropped while its launches run cannot pull the keys from under them.
        self._free = driver.cuMemFree  # (held: at interpreter exit imports fail)
        self._keys = _check(driver.cuMemAlloc(round_keys.nbytes))
        _check(driver.cuMemcpyHtoD(self._keys, round_keys, round_keys.nbytes))
        self._keys_bytes = round_keys.nbytes

    def __del__(self) -> None:
        keys = getattr(self, "_keys", None)
        if keys is not None:
            self._free(keys)

    @property
    def ordinal(self) -> int:
        return self._gpu.core.device_id

    def _kernel_args(self, first_block: int) -> tuple[np.uint64, ...]:
        if not self._transform.is_ctr:
            return ()
        block = self._transform.counter_at(first_block)
        mask = (1 << self._transform.counter_bits) - 1
        return tuple(np.uint64(v) for v in (block >> 64, block & (2**64 - 1),
                                            mask >> 64, mask & (2**64 - 1)))

    def _launch(self, stream: Any, source: int, target: int, blocks: int,
                first_block: int) -> None:
        from cuda.core import LaunchConfig, launch

        grid = max(1, min(-(-blocks // _THREADS_PER_BLOCK), self._gpu.sms * _GRID_BLOCKS_PER_SM))
        launch(stream, LaunchConfig(grid=grid, block=_THREADS_PER_BLOCK), self._kernel,
               np.uint64(source), np.uint64(target), np.uint64(blocks),
               *self._kernel_args(first_block), np.uint64(int(self._keys)))

    def run(self, source: CudaBytes, target: CudaBytes, first_block: int, skip: int = 0) -> None:
        """``source`` into ``target`` (the same length; may be the same memory) on the
        source's stream. The data starts ``skip`` bytes into block ``first_block`` of the
        keystream (CTR; ECB takes whole blocks from 0). Returns once it is enqueued."""
        from cuda.bindings import driver
        from cuda.core import Stream

        with self._gpu.lock:
            self._gpu.core.set_current()
            stream = Stream.from_handle(source.stream)
            done, length = 0, source.nbytes
            if skip and length:  # the rest of a block an earlier call began
                done = min(length, BLOCK_SIZE - skip)
                self._through_scratch(stream, source.at(0, done), target.at(0, done),
                                      first_block, skip)
                first_block += 1
            whole = (length - done) // BLOCK_SIZE * BLOCK_SIZE
            if whole:
                src, dst = source.at(done, whole), target.at(done, whole)
                if src.pointer % BLOCK_SIZE or dst.pointer % BLOCK_SIZE:
                    # The kernels load whole 16-byte blocks, which must be aligned.
                    scratch = _check(driver.cuMemAllocAsync(whole, source.stream))
                    _check(driver.cuMemcpyDtoDAsync(scratch, src.pointer, whole, source.stream))
                    self._launch(stream, int(scratch), int(scratch), whole // BLOCK_SIZE,
                                 first_block)
                    _check(driver.cuMemcpyDtoDAsync(dst.pointer, scratch, whole, source.stream))
                    _check(driver.cuMemFreeAsync(scratch, source.stream))
                else:
                    self._launch(stream, src.pointer, dst.pointer, whole // BLOCK_SIZE,
                                 first_block)
                first_block += whole // BLOCK_SIZE
                done += whole
            if done < length:  # a partial last block
                self._through_scratch(stream, source.at(done, length - done),
                                      target.at(done, length - done), first_block, 0)

    def _through_scratch(self, stream: Any, source: CudaBytes, target: CudaBytes,
                         block: int, skip: int) -> None:
        """Less than a block, ``skip`` bytes into keystream block ``block``, through a
        one-block scratch buffer on the device."""
        from cuda.bindings import driver

        handle = source.stream
        scratch = _check(driver.cuMemAllocAsync(BLOCK_SIZE, handle))
        _check(driver.cuMemsetD8Async(scratch, 0, BLOCK_SIZE, handle))
        _check(driver.cuMemcpyDtoDAsync(int(scratch) + skip, source.pointer, source.nbytes,
                                        handle))
        self._launch(stream, int(scratch), int(scratch), 1, block)
        _check(driver.cuMemcpyDtoDAsync(target.pointer, int(scratch) + skip, source.nbytes,
                                        handle))
        _check(driver.cuMemFreeAsync(scratch, handle))
