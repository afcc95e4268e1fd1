"""The host engine: AES on the host's cores through OpenSSL (the ``cryptography`` package).

A peer of the OpenCL engine behind the same interface (aescl.engines), for the
device ``host``. Every thread of the engine pulls ranges from the job and works
on them in place in the caller's memory: no staging copies, no allocation per
call. The GIL is released inside OpenSSL, so the threads run at once.

* ECB and CTR: one ``update_into`` per piece of PIECE_BYTES. CTR starts a new
  OpenSSL context at each piece (its counter) and at a wrap of the counter
  field, which OpenSSL would carry into the nonce.
* The chunked format: ``AESGCM.encrypt_into``/``decrypt_into``, one call per
  16 KiB chunk straight into the sealed layout. This is the fastest of the
  thread routes measured (docs/benchmarks: a GCM context with ``update_into``
  per chunk is slower), but it does not scale past a few threads, because each
  call holds the GIL for as long as OpenSSL works on the chunk: 3.1 GB/s on one
  thread of the H100 host, 1.7 on 16: it runs on one thread (CHUNK_THREADS), and
  stays out of a split beside an OpenCL engine (HOLDS_GIL_FOR) unless it works
  apart from the interpreter (below). On a host of many cores (STAGE_MIN_CORES), a
  job on ordinary memory goes to the worker processes instead: they read and write
  the caller's memory straight where the kernel lets them (reach.py), else a large
  job is copied through shared memory to them, a piece at a time (_Staging). On a
  host of fewer cores (REACH_MIN_CORES) a large job goes to them only once they run,
  started by a process's second such job (HostEngine.workers_due).
* Arrays that all lie in aescl's shared memory (shared.py: ``pinned_empty`` for
  the host engine or a team with it) are worked on by worker processes instead
  (processes.py), each range cut into one piece per worker, with the
  same code: no GIL between the AEAD calls (the chunked format at 32-37 GB/s on the
  H200 host's 16 cores, against 3-4 on threads) or beside a GPU's feeding thread.
* ``aescl.new(..., MODE_GCM, device="host")``: one stream cannot be split over
  cores, so it is pycryptodome's GCM object (AES-NI and CLMUL), the calling
  convention aescl copies, for every nonce length (OpenSSL's GCM takes 8 bytes
  or more).

OpenSSL's AES is constant-time on CPUs with AES-NI; the host engine has no tables.
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Callable
from typing import Any

from ..._arrays import BytesResult, byte_view, new_buffer, output_view
from ...chunkformat import (
    CHUNK_SIZE,
    SEALED_CHUNK_SIZE,
    TAG_SIZE,
    check_base_nonce,
    check_chunk_range,
    check_key,
    chunk_nonce,
    plaintext_run,
    sealed_run,
)
from ...devices import Device
from ...errors import AuthenticationError, as_bytes, first_failure
from ..interface import BLOCK_SIZE, MODE_GCM, BlockTransform, Ranges, gcm_nonce
from . import shared as _shared

# One pull of a host thread. Each pull costs some Python work under the GIL (a new
# OpenSSL context for CTR's counter), and a thread back from OpenSSL may wait a whole
# GIL switch interval (5 ms) for it while another thread runs Python. CTR-128 on 1 GiB,
# 16 threads of the H100 host (docs/benchmarks): 1 MiB pieces 16.9 GB/s, 4 MiB 19.4-36.9,
# 16 MiB 35.9; on the 2-core CI kind 13.1 (4 MiB) and 13.5 (16 MiB) on 64 MiB.
PIECE_BYTES = 16 << 20

# Threads that seal or open chunks: each AEAD call holds the GIL while OpenSSL works,
# so more threads only queue for it. Measured (docs/benchmarks): on the 2-core CI kind
# 3.47 GB/s on 1 thread, 3.17 on 2; on the H100 host's 16 cores 3.1 on 1, 1.8 on 4.
CHUNK_THREADS = 1

# Kinds of work during which this engine's threads hold the GIL (the AEAD calls):
# beside an engine that needs the GIL to keep its device fed, they would stall it
# (1 GiB chunked on the H100 host: 43.5 GB/s on the GPU alone, 15.2 with the host
# engine beside it), so the scheduler leaves such an engine out of a split.
HOLDS_GIL_FOR = frozenset({"chunks"})

# The chunked format on ordinary memory, on a host of many cores: the AEAD calls hold
# the GIL on threads (above), so a large job is copied through shared memory to the
# worker processes instead, a piece at a time (_Staging). The copies cost a pass each
# way, which pays only where the workers are many: on the 2-core CI kind 1.73 GB/s
# staged against 1.43-1.76 on a thread (docs/benchmarks), so from STAGE_MIN_CORES.
STAGE_MIN_CORES = 8
STAGE_MIN_BYTES = 64 << 20  # a job's plaintext, from which staging pays for its copies
# Where the workers may read and write the caller's memory (reach.py), from this size on
# they work on it straight, with no staging copies. Not below: a file job's batches (16
# MiB) are bound by the files, and the workers beside its reading and writing threads
# slowed it (4 GiB, /dev/shm, 16-core H200 host: 2.05-2.46 s to encrypt through them,
# 1.63-2.23 on a thread; docs/benchmarks).
REACH_MIN_BYTES = 64 << 20
# On a host of fewer cores (from REACH_MIN_CORES), the workers pay less: they do each
# core's work at about half a thread's rate in place (the copies), and starting them
# costs 0.2-0.4 s, which one call of 256 MiB (0.12 s on a thread) would pay many times.
# So there a process's second such job starts them on a thread of its own, its jobs go
# on on this thread meanwhile, and the jobs after go to them once they run. 2-core CI
# kind, 256 MiB, steady state: sealing 2.24-2.46 GB/s against 2.14-2.16 on a thread,
# opening 2.34-2.69 against 1.58-1.86 (docs/benchmarks).
REACH_MIN_CORES = 2
STAGE_CHUNKS = 2048  # chunks a piece: 32 MiB of plaintext, two buffers of it kept
_COPY_SLICE = 4 << 20  # bytes a copying thread takes at a time

_pool: Any = None  # a ThreadPoolExecutor, made when a job first has pieces to share
_pool_lock = threading.Lock()


class _Shares:
    """The ranges a job hands this engine, cut into pieces for the engine's threads: at
    most ``unit``, and small enough that a range gives each of ``threads`` threads a
    piece, down to ``unit // 16``. Thread-safe; pulls a new range only when one is needed."""

    def __init__(self, ranges: Ranges, unit: int, threads: int = 1) -> None:
        self._ranges = ranges
        self._max_unit = max(1, unit)
        self._min_unit = max(1, unit // 16)
        self._threads = max(1, threads)
        self._unit = self._max_unit
        self._next = self._stop = 0
        self._lock = threading.Lock()

    def __iter__(self) -> _Shares:
        return self

    def pending(self) -> bool:
        """Whether another piece may follow (upstream ranges say so by their length hint)."""
        with self._lock:
            return self._next < self._stop or operator.length_hint(self._ranges, 1) > 0

    def __next__(self) -> tuple[int, int]:
        with self._lock:
            if self._next >= self._stop:
                self._next, self._stop = next(self._ranges)  # StopIteration ends the thread
                each = -(-(self._stop - self._next) // self._threads)
                self._unit = max(self._min_unit, min(self._max_unit, each))
            lo = self._next
            self._next = min(self._stop, lo + self._unit)
            return lo, self._next


def _on_threads(threads: int, shares: _Shares, work: Callable[[int, int], None]) -> None:
    """``work(lo, hi)`` on every piece of ``shares``, on up to ``threads`` threads: the
    caller's, and helpers only when more than one piece is there to share (a small job
    costs no thread hand-over). Raises the failure to report once all have stopped."""
    global _pool

    def loop() -> None:
        for lo, hi in shares:
            work(lo, hi)

    first = next(shares, None)
    if first is None:
        return
    futures = []
    if threads > 1 and shares.pending():
        with _pool_lock:
            from concurrent.futures import ThreadPoolExecutor  # (and logging): not for small jobs

            if _pool is None or _pool._max_workers < threads - 1:  # grows with the engine
                _pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="aescl-host-engine")
            futures = [_pool.submit(loop) for _ in range(threads - 1)]
    errors: list[BaseException] = []
    try:
        work(*first)
        loop()
    except Exception as exc:
        errors.append(exc)
    errors += [error for future in futures if (error := future.exception()) is not None]
    if errors:
        raise first_failure(errors)


def _copy_on_threads(target: memoryview, source: memoryview, threads: int) -> None:
    """``source`` into ``target`` (the same length) on up to ``threads`` threads: NumPy's
    copy releases the GIL, so the slices go at once."""
    import numpy as np

    to, of = np.frombuffer(target, np.uint8), np.frombuffer(source, np.uint8)
    slices = -(-len(of) // _COPY_SLICE)

    def work(lo: int, hi: int) -> None:
        np.copyto(to[lo * _COPY_SLICE : hi * _COPY_SLICE], of[lo * _COPY_SLICE : hi * _COPY_SLICE])

    _on_threads(threads, _Shares(iter([(0, slices)]), 1, threads), work)


class _Staging:
    """Two buffers of shared memory (shared.py), a piece of plaintext and its sealed
    layout, through which a chunk job on ordinary memory reaches the worker processes:
    each piece is copied in on threads, sealed or opened by the workers, and copied
    out. Made on a job's first use and kept for the engine's later jobs (about 64 MiB);
    one job at a time uses them (others run on threads meanwhile)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._buffers: tuple[memoryview, memoryview] | None = None

    def buffers(self) -> tuple[memoryview, memoryview]:
        """(plaintext, sealed): STAGE_CHUNKS chunks' room each."""
        if self._buffers is None:
            plain = _shared.shared_empty(STAGE_CHUNKS * CHUNK_SIZE)
            sealed = _shared.shared_empty(STAGE_CHUNKS * SEALED_CHUNK_SIZE)
            self._buffers = memoryview(plain), memoryview(sealed)
        return self._buffers


def _one_per_worker(ranges: Ranges, workers: int) -> Ranges:
    """Each range as ``workers`` contiguous pieces of near-equal size: one round of
    messages per range."""
    for lo, hi in ranges:
        count = max(1, min(workers, hi - lo))
        bounds = [lo + (hi - lo) * i // count for i in range(count + 1)]
        yield from zip(bounds, bounds[1:], strict=False)


# Threads of this process that need a core during a job beside a device (see below).
_FEEDING_THREADS = 2


def _in_processes(engine: HostEngine, source: memoryview, target: memoryview,
                  limit: int | None = None, reaching: bool = False
                  ) -> Callable[[tuple[Any, ...], Ranges], None] | None:
    """When ``source`` and ``target`` both lie in shared memory, or with ``reaching`` where
    the workers may read and write this process's ordinary memory (reach.py):
    ``run(head, ranges)``, which runs the task ``head`` on every range the job hands
    out, each cut into one piece per worker process (at most ``limit`` workers). Else
    None (the job runs another way)."""
    if not engine.processes:
        return None
    from .processes import WorkerFailed, reference, reference_here, workers

    located = reference(source), reference(target)
    if None in located and not reaching:
        return None
    try:
        pool = workers(engine.device, engine.threads)
    except WorkerFailed:
        # No processes here (a sandbox, an interpreter that cannot start itself): the
        # engine's threads do its jobs from now on, as on ordinary memory.
        engine.processes = False
        return None
    if None in located and not pool.can_reach():
        return None
    (source_region, source_ref), (target_region, target_ref) = (
        place if place is not None else (_shared.ORDINARY, reference_here(view))
        for place, view in zip(located, (source, target), strict=True))
    # Memory pinned for a device: two threads of this process need a core each, the
    # device's feeding thread and the one that feeds the workers, or the device slows
    # more than the workers add (H200 host, 1 GiB split at a fixed ratio: 15 workers
    # 54-57 GB/s, 16 workers 46-49; split by rate, on two leases, means of 3 and 2
    # interleaved rounds: 14 workers 52.0 and 53.1 GB/s CTR-128, 48.1 and 47.1 chunked;
    # 15 workers 50.8 and 52.5, 45.8 and 45.1; docs/benchmarks).
    beside_device = source_region.beside_device or target_region.beside_device
    count = max(1, pool.count - _FEEDING_THREADS) if beside_device and pool.count > 2 \
        else pool.count
    count = min(count, limit or count)

    regions = [region for region in (source_region, target_region)
               if region is not _shared.ORDINARY]

    def run(head: tuple[Any, ...], ranges: Ranges) -> None:
        pool.run(head, source_ref, target_ref, regions, _one_per_worker(ranges, count), count)

    return run


class HostBlocks:
    """ECB or CTR over the host's cores."""

    def __init__(self, engine: HostEngine, transform: BlockTransform) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self._engine = engine
        self._transform = transform
        algorithm = algorithms.AES(transform.key)
        if transform.is_ctr:
            self._context = lambda index: Cipher(
                algorithm, modes.CTR(transform.counter_at(index).to_bytes(16, "big"))
            ).encryptor()
        else:
            cipher = Cipher(algorithm, modes.ECB())
            self._context = lambda index: (
                cipher.decryptor() if transform.decrypt else cipher.encryptor())

    def _crypt(self, source: memoryview, target: memoryview, lo: int, hi: int,
               first_block: int) -> None:
        """Blocks [lo, hi) in one OpenSSL context: ``update_into`` wants room for a
        block more than it writes, so the last block goes through ``update``."""
        context = self._context(first_block + lo)
        if hi - lo > 1:
            context.update_into(source[lo * BLOCK_SIZE : (hi - 1) * BLOCK_SIZE],
                                target[lo * BLOCK_SIZE : hi * BLOCK_SIZE])
        target[(hi - 1) * BLOCK_SIZE : hi * BLOCK_SIZE] = context.update(
            source[(hi - 1) * BLOCK_SIZE : hi * BLOCK_SIZE])

    def run(self, source: Any, target: Any, ranges: Ranges, first_block: int = 0) -> None:
        src, dst = byte_view(source), byte_view(target)
        transform = self._transform
        threads = min(transform.threads or self._engine.threads, self._engine.threads)
        in_processes = _in_processes(self._engine, src, dst, threads)
        if in_processes is not None:
            in_processes(("blocks", transform, first_block), ranges)
            return
        shares = _Shares(ranges, PIECE_BYTES // BLOCK_SIZE, threads)

        def work(lo: int, hi: int) -> None:
            while lo < hi:
                stop = hi if not transform.is_ctr else min(
                    hi, lo + transform.blocks_before_wrap(first_block + lo))
                self._crypt(src, dst, lo, stop, first_block)
                lo = stop

        _on_threads(threads, shares, work)

    def keystream(self, index: int) -> bytes:
        return bytes(self._context(index).update(bytes(BLOCK_SIZE)))


def _checked_chunks(ranges: Ranges, first: int) -> Ranges:
    """``ranges`` of chunks from message chunk ``first``, each checked to be in the format."""
    for lo, hi in ranges:
        check_chunk_range(first + lo, hi - lo)
        yield lo, hi


class HostChunks:
    """The chunked format's chunks over the host's cores: a chunk per OpenSSL call."""

    def __init__(self, engine: HostEngine, key: bytes, base_nonce: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        check_key(key)
        check_base_nonce(base_nonce)
        self._engine = engine
        self._key, self._base_nonce_bytes = bytes(key), bytes(base_nonce)  # for workers
        self._aead = AESGCM(bytes(key))
        self._base_nonce = int.from_bytes(base_nonce, "big")  # converted once, not per chunk

    def _seal_chunk(self, source: memoryview, target: memoryview, index: int) -> None:
        """One chunk, full or final: ciphertext then tag, as the sealed layout has them."""
        self._aead.encrypt_into(chunk_nonce(self._base_nonce, index), source, None, target)

    def _open_chunk(self, source: memoryview, target: memoryview, index: int, final: bool
                    ) -> None:
        from cryptography.exceptions import InvalidTag

        try:
            self._aead.decrypt_into(chunk_nonce(self._base_nonce, index), source, None, target)
        except InvalidTag:
            target[:] = bytes(len(target))  # OpenSSL wrote the unauthenticated plaintext
            # A cut inside the last chunk looks exactly like a modified final chunk.
            cause = "truncated or modified" if final else "modified"
            raise AuthenticationError(
                f"chunk {index} failed authentication: the data was {cause}", chunk=index
            ) from None

    def _apart(self, kind: str, source: memoryview, target: memoryview, first: int,
               ranges: Ranges) -> bool:
        """Run the job in the worker processes when its arrays are shared, or straight on
        its ordinary memory (reach.py) where the job is not small (REACH_MIN_BYTES), the
        workers are due (HostEngine.workers_due) and may; whether it did."""
        engine = self._engine
        plain_bytes = len(source) if kind == "seal" else len(target)
        reaching = plain_bytes >= REACH_MIN_BYTES and engine.workers_due()
        in_processes = _in_processes(engine, source, target, reaching=reaching)
        if in_processes is None:
            return False
        in_processes((kind, self._key, self._base_nonce_bytes, first),
                     _checked_chunks(ranges, first))
        return True

    def _staged(self, kind: str, source: memoryview, target: memoryview, first: int,
                ranges: Ranges) -> bool:
        """Run the job in the worker processes through the engine's staging buffers, where
        its arrays are ordinary memory, the job is large and the host has cores enough
        (STAGE_MIN_CORES); whether it did. A failed chunk raises before its piece is
        copied out, so no piece holding it leaves staging."""
        engine = self._engine
        sealing = kind == "seal"
        plain_bytes = len(source) if sealing else len(target)
        if (engine.threads < STAGE_MIN_CORES or plain_bytes < STAGE_MIN_BYTES
                or not engine.processes or not engine.staging.lock.acquire(blocking=False)):
            return False
        try:
            plain, sealed = engine.staging.buffers()
            staged_in, staged_out = (plain, sealed) if sealing else (sealed, plain)
            unit_in, unit_out = ((CHUNK_SIZE, SEALED_CHUNK_SIZE) if sealing
                                 else (SEALED_CHUNK_SIZE, CHUNK_SIZE))
            in_processes = _in_processes(engine, staged_in, staged_out)
            if in_processes is None:
                return False
            for lo, hi in ranges:  # (each claimed as the last is done, as on threads)
                for at in range(lo, hi, STAGE_CHUNKS):
                    count = min(STAGE_CHUNKS, hi - at)
                    check_chunk_range(first + at, count)
                    _copy_on_threads(staged_in[: count * unit_in],
                                     source[at * unit_in : (at + count) * unit_in],
                                     engine.threads)
                    in_processes((kind, self._key, self._base_nonce_bytes, first + at),
                                 iter([(0, count)]))
                    _copy_on_threads(target[at * unit_out : (at + count) * unit_out],
                                     staged_out[: count * unit_out], engine.threads)
            return True
        finally:
            engine.staging.lock.release()

    def seal_ranges(self, plaintext: Any, sealed: Any, first: int, ranges: Ranges) -> None:
        src, dst = byte_view(plaintext), byte_view(sealed)
        if self._apart("seal", src, dst, first, ranges):
            return
        if self._staged("seal", src, dst, first, ranges):
            return

        def work(lo: int, hi: int) -> None:
            check_chunk_range(first + lo, hi - lo)
            for k in range(lo, hi):
                self._seal_chunk(src[k * CHUNK_SIZE : (k + 1) * CHUNK_SIZE],
                                 dst[k * SEALED_CHUNK_SIZE : (k + 1) * SEALED_CHUNK_SIZE],
                                 first + k)

        _on_threads(min(self._engine.threads, CHUNK_THREADS),
                    _Shares(ranges, PIECE_BYTES // CHUNK_SIZE), work)

    def open_ranges(self, sealed: Any, plaintext: Any, first: int, ranges: Ranges) -> None:
        src, dst = byte_view(sealed), byte_view(plaintext)
        if self._apart("open", src, dst, first, ranges):
            return
        if self._staged("open", src, dst, first, ranges):
            return

        def work(lo: int, hi: int) -> None:
            check_chunk_range(first + lo, hi - lo)
            for k in range(lo, hi):
                self._open_chunk(src[k * SEALED_CHUNK_SIZE : (k + 1) * SEALED_CHUNK_SIZE],
                                 dst[k * CHUNK_SIZE : (k + 1) * CHUNK_SIZE], first + k, False)

        _on_threads(min(self._engine.threads, CHUNK_THREADS),
                    _Shares(ranges, PIECE_BYTES // CHUNK_SIZE), work)

    def seal(self, plaintext: Any, first: int, final: bool) -> bytearray:
        """Seal chunks ``first, ...``; with ``final`` the last one is the short final one."""
        source = byte_view(plaintext)
        full, rest = plaintext_run(len(source), final)
        check_chunk_range(first, full + int(final))
        out = bytearray(full * SEALED_CHUNK_SIZE + (rest + TAG_SIZE if final else 0))
        target = memoryview(out)
        if full:
            self.seal_ranges(source, target, first, iter([(0, full)]))
        if final:
            self._seal_chunk(source[full * CHUNK_SIZE :], target[full * SEALED_CHUNK_SIZE :],
                             first + full)
        return out

    def open(self, ciphertext: Any, first: int, final: bool) -> bytearray:
        """Authenticate and decrypt sealed chunks from chunk ``first``; no plaintext of the
        run is returned unless every chunk in it passed."""
        source = byte_view(ciphertext)
        full, rest = sealed_run(len(source), first, final)
        out = bytearray(full * CHUNK_SIZE + (rest - TAG_SIZE if final else 0))
        target = memoryview(out)
        if full:
            self.open_ranges(source, target, first, iter([(0, full)]))
        if final:
            self._open_chunk(source[full * SEALED_CHUNK_SIZE :], target[full * CHUNK_SIZE :],
                             first + full, final=True)
        return out


class HostEngine:
    """The engine of the ``host`` device: every core, through OpenSSL."""

    def __init__(self, device: Device, threads: int | None = None,
                 processes: bool = True) -> None:
        self.device = device
        self.threads = threads or device.compute_units or os.cpu_count() or 1
        # A pull from a split job gives each thread (or worker process) a piece: the
        # workers' replies each wait for the GIL beside a GPU's feeding thread, so
        # a job must cost them few rounds (docs/benchmarks).
        self.piece_bytes = PIECE_BYTES * self.threads
        self.holds_gil_for = HOLDS_GIL_FOR
        self.on_host_cores = True
        # Whether jobs in shared memory go to worker processes (not in a worker itself).
        self.processes = processes and _shared.AVAILABLE
        self.staging = _Staging()
        self._large_jobs = 0  # chunk jobs on ordinary memory asked of workers_due

    def workers_due(self) -> bool:
        """Whether a large chunk job on ordinary memory goes to the worker processes: on
        a host of many cores (STAGE_MIN_CORES) always, its first job starting them; on
        one of fewer (REACH_MIN_CORES), once they run, the second such job of the
        process starting them on a thread while it runs here."""
        if self.threads >= STAGE_MIN_CORES:
            return True
        if self.threads < REACH_MIN_CORES or not self.processes:
            return False
        from . import processes

        if processes.running(self.threads):
            return True
        self._large_jobs += 1
        if self._large_jobs >= 2:
            processes.start_soon(self.device, self.threads)
        return False

    def stages(self, *arrays: Any) -> bool:
        return False  # OpenSSL works in the caller's memory

    def in_interpreter(self, *arrays: Any) -> bool:
        """Whether a job on ``arrays`` runs on this interpreter's threads (else in the
        worker processes, when every array lies in shared memory)."""
        return not (self.processes and arrays
                    and all(_shared.locate(a) is not None for a in arrays))

    def host_array(self, nbytes: int) -> memoryview:
        return new_buffer(nbytes)

    def blocks(self, transform: BlockTransform) -> HostBlocks:
        return HostBlocks(self, transform)

    def chunks(self, key: bytes, base_nonce: bytes, batch_chunks: int = 0) -> HostChunks:
        return HostChunks(self, key, base_nonce)

    def gcm(self, key: bytes, nonce: bytes | None, mac_len: int, key_schedule: str,
            threads: int | None = None) -> HostGcmCipher:
        # None is every core, as aescl.new promises: pycryptodome's own default is one
        # thread (256 MiB on the 2-core CI kind: 0.89 GB/s on one, 1.58 on both).
        return HostGcmCipher(key, nonce, mac_len, threads or self.threads)

    def device_figures(self, nbytes: int, min_seconds: float) -> dict[str, Any]:
        return {}  # no kernels to build, nothing to transfer

    def retune(self, progress: Any) -> None:
        pass  # (OpenSSL's own code: no launch settings)

    def resident_seconds(self, mode: str, key: bytes, iv: bytes, data: Any,
                         output_bytes: int, min_seconds: float) -> tuple[float, float]:
        raise NotImplementedError("the host engine works on host memory only: its figures "
                                  "are its library calls")


class HostGcmCipher:
    """The host engine's GCM stream (``aescl.new(key, MODE_GCM, device="host")``, which
    aescl.modes.GcmCipher drives and checks the call order of): pycryptodome's GCM on the
    host, with aescl's promises on top (a 12-byte random nonce by default,
    AuthenticationError, ``decrypt_and_verify`` releasing no plaintext on a wrong tag)."""

    mode = MODE_GCM
    block_size = BLOCK_SIZE

    def __init__(self, key: bytes, nonce: bytes | None, mac_len: int,
                 threads: int | None = None) -> None:
        from Crypto.Cipher import AES

        self.nonce = nonce = gcm_nonce(nonce, mac_len)
        options = {} if threads is None else {"threads": threads}  # (pycryptodome 4's)
        self._cipher = AES.new(bytes(key), AES.MODE_GCM, nonce=nonce, mac_len=mac_len,
                               **options)

    def update(self, assoc_data: Any) -> HostGcmCipher:
        self._cipher.update(byte_view(assoc_data))
        return self

    def _crypt(self, call: Callable[..., Any], data: Any, output: Any) -> bytes | None:
        source = byte_view(data)
        if output is None:  # (written in place into the bytes returned: _arrays.BytesResult)
            result = BytesResult(len(source))
            call(source, output=result.view)
            return result.done()
        call(source, output=output_view(output, len(source)))
        return None

    def encrypt(self, plaintext: Any, output: Any = None) -> bytes | None:
        return self._crypt(self._cipher.encrypt, plaintext, output)

    def decrypt(self, ciphertext: Any, output: Any = None) -> bytes | None:
        return self._crypt(self._cipher.decrypt, ciphertext, output)

    def digest(self) -> bytes:
        return bytes(self._cipher.digest())

    def verify(self, received_mac_tag: bytes) -> None:
        try:
            self._cipher.verify(as_bytes(received_mac_tag, "the MAC tag"))
        except ValueError:
            raise AuthenticationError("MAC check failed") from None

    def encrypt_and_digest(self, plaintext: Any, output: Any = None
                           ) -> tuple[bytes | None, bytes]:
        return self.encrypt(plaintext, output=output), self.digest()

    def decrypt_and_verify(self, ciphertext: Any, received_mac_tag: bytes,
                           output: Any = None) -> bytes | None:
        """Decrypt aside and release the plaintext only once the tag matched."""
        plaintext = self.decrypt(ciphertext)
        assert plaintext is not None
        self.verify(received_mac_tag)
        if output is None:
            return plaintext
        output_view(output, len(plaintext))[:] = plaintext
        return None
