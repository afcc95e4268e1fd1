"""Issue 57: one OpenCL GPU's chunked opening taken apart. CTR-128 and the format (pieces of
512-4,096 chunks) on 2 GiB of pinned memory; the opening with one part left out at a time
(diagnostic monkeypatches: the host's tag comparison, the gather of received tags, their
download; or the plaintext copied out after the check); the kernels alone on 1 GiB
resident on the device, and as 64 pieces of 16 MiB; the pipeline's transfers alone, in
pieces of 16 and 32 MiB shaped as a sealing's, an opening's, or neither. GB/s, best of
3. Prints JSON.

    python3 docs/benchmarks/2026-11-28-opencl-opening-parts.py
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pyopencl as cl
from one_gpu_jobs import PinnedJobs, first_device

import aescl
from aescl.chunkformat import CHUNK_SIZE, SEALED_CHUNK_SIZE, TAG_SIZE
from aescl.engines.opencl import pipeline, workers
from aescl.engines.opencl.runtime import device_runtime
from aescl.timing import wall


def rate(nbytes: int, action: Callable[[], object], tries: int = 3) -> float:
    action()
    return round(nbytes / min(wall(action) for _ in range(tries)) / 1e9, 1)


def opening_without(data: PinnedJobs, part: str) -> float:
    """The opening's rate with ``part`` left out (the bytes are not checked then)."""
    piece_of, matched, gather = (workers.OpenclHostChunks._open_piece, workers._matched,
                                 workers.OpenclChunkKernels.gather_tags)

    def changed_piece(self, source, target, first, final):
        piece = piece_of(self, source, target, first, final)
        piece.copy_before_check = False
        if part == "tag download":
            piece.check, piece.out_bytes = None, piece.check_from
        return piece
    if part in ("copy before check", "tag download"):
        workers.OpenclHostChunks._open_piece = changed_piece
    if part in ("compare", "gather"):
        workers._matched = lambda *_: None
    if part == "gather":
        workers.OpenclChunkKernels.gather_tags = lambda *_: None
    try:
        return rate(data.nbytes, data.open)
    finally:
        workers.OpenclHostChunks._open_piece = piece_of
        workers._matched = matched
        workers.OpenclChunkKernels.gather_tags = gather


def kernels_alone(spec: str, mib: int = 1024) -> dict[str, float]:
    """Sealing and opening launches over buffers already on the device."""
    device = aescl.get_device(spec)
    runtime = device_runtime(device)
    queue, count = runtime.queue, (mib << 20) // CHUNK_SIZE
    worker = workers.OpenclHostChunks(bytes(32), bytes(12), device)
    flags = cl.mem_flags.READ_WRITE
    plain = cl.Buffer(runtime.context, flags, count * CHUNK_SIZE)
    sealed = cl.Buffer(runtime.context, flags, count * SEALED_CHUNK_SIZE)
    opened = cl.Buffer(runtime.context, flags, count * (CHUNK_SIZE + 2 * TAG_SIZE))
    figures = {}
    for name, source, target in (("seal", plain, sealed), ("open", sealed, opened)):
        scratch: dict = {}

        def launch(chunks: int, name: str = name):
            if name == "seal":
                return worker._seal_launch(0, chunks, chunks * CHUNK_SIZE,
                                           chunks * SEALED_CHUNK_SIZE, False)
            return worker._open_launch(0, chunks, chunks * SEALED_CHUNK_SIZE,
                                       chunks * CHUNK_SIZE, False)
        whole, piece = launch(count), launch(1024)

        def once(whole=whole, source=source, target=target, scratch=scratch) -> None:
            whole(queue, source, target, scratch)
            queue.finish()

        def in_pieces(piece=piece, source=source, target=target, scratch=scratch) -> None:
            for _ in range(64):
                piece(queue, source, target, scratch)
            queue.finish()
        figures[f"kernel {name} {mib} MiB"] = rate(count * CHUNK_SIZE, once)
        figures[f"kernel {name} 64 x 16 MiB"] = rate(64 << 24, in_pieces)
    return figures


def transfers_alone(data: PinnedJobs) -> dict[str, float]:
    """The pipeline's uploads and downloads with no kernel between them."""
    feeder, figures = pipeline.pipeline(aescl.get_device(data.spec)), {}
    for mib in (16, 32):
        size = mib << 20
        tags = 2 * TAG_SIZE * (size // CHUNK_SIZE)

        def pieces(shape: str, size: int = size, tags: int = tags) -> Iterator[pipeline.Piece]:
            extra_in = tags // 2 if shape == "open" else 0
            extra_out = {"seal": tags // 2, "open": tags, "plain": 0}[shape]
            for at in range(0, data.nbytes - size + 1, size):
                piece = pipeline.Piece(size + extra_in, size + extra_out,
                                       lambda queue, *_: cl.enqueue_marker(queue))
                piece.upload_from = (data.sealed[at : at + size + extra_in] if extra_in
                                     else data.source[at : at + size])
                piece.download_to = data.target[at : at + size]
                if shape == "open":
                    piece.check, piece.check_from = (lambda _: None), size
                    piece.copy_before_check = True
                yield piece
        for shape in ("seal", "open", "plain"):
            figures[f"moves {mib} MiB {shape}-shaped"] = rate(
                data.nbytes, lambda shape=shape: feeder.run(pieces(shape)))
    return figures


def main() -> None:
    data = PinnedJobs(first_device("opencl"))
    figures: dict[str, object] = {"ctr": rate(data.nbytes, data.ctr)}
    for batch in (1024, 2048, 4096, 512):
        figures[f"b{batch}"] = (rate(data.nbytes, lambda batch=batch: data.seal(batch)),
                                rate(data.nbytes, lambda batch=batch: data.open(batch)))
    assert data.opened_intact()
    for part in ("copy before check", "compare", "gather", "tag download"):
        figures[f"open without {part}"] = opening_without(data, part)
    figures.update(kernels_alone(data.spec))
    figures.update(transfers_alone(data))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
