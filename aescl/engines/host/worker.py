"""A host engine worker process: ``python -m aescl.engines.host.worker FD``, started by
processes.py, which speaks to it over the socket FD (the protocol is in processes.py).
It runs the host engine's own code, single-threaded, on its mappings of the shared
memory regions it is handed, or on the caller's ordinary memory read and written through
reach.py."""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from typing import Any

from ... import _python
from ...chunkformat import CHUNK_SIZE, SEALED_CHUNK_SIZE
from ...errors import AuthenticationError
from . import reach
from .engine import HostEngine
from .processes import Reference
from .shared import mapping_handed


def _serve(connection: Connection) -> None:
    engine = HostEngine(connection.recv(), threads=1, processes=False)
    connection.send("ready")
    mappings: dict[int, memoryview] = {}
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "map":
            mappings[message[1]] = memoryview(mapping_handed(connection, message[2]))
            continue
        if kind == "unmap":
            for token in message[1]:
                mappings.pop(token, None)
            continue
        if kind == "reach":
            connection.send(_probe(message[1], message[2]))
            continue
        connection.send(_run(engine, mappings, message))


def _probe(address: int, nbytes: int) -> Any:
    """The bytes at ``address`` of the parent's ordinary memory, or why they can't be read."""
    seen = bytearray(nbytes)
    try:
        reach.read(os.getppid(), address, memoryview(seen))
    except OSError as exc:
        return ("denied", str(exc))
    return bytes(seen)


# Chunks a worker reads from (or writes to) the caller's ordinary memory at a time: 1 MiB
# of plaintext, kept in the worker's cache between the copy and the AES (16 H200 cores:
# 256 KiB to 4 MiB all within 10%; docs/benchmarks).
_REACH_CHUNKS = 64
_buffers: dict[int, memoryview] = {}  # this worker's own, by size, kept between tasks


def _own(nbytes: int) -> memoryview:
    if nbytes not in _buffers:
        _buffers[nbytes] = memoryview(bytearray(nbytes))
    return _buffers[nbytes]


def _through_parent(crypt: Any, sealing: bool, source: Any, target: Any, first: int,
                    lo: int, hi: int) -> None:
    """Chunks ``lo .. hi`` where ``source`` or ``target`` is the caller's ordinary memory
    (a ``(pid, address)`` pair), a few at a time through this worker's own buffers. An
    opening that fails raises before its chunks are written back."""
    unit_in, unit_out = ((CHUNK_SIZE, SEALED_CHUNK_SIZE) if sealing
                         else (SEALED_CHUNK_SIZE, CHUNK_SIZE))
    inside, outside = _own(_REACH_CHUNKS * unit_in), _own(_REACH_CHUNKS * unit_out)
    for at in range(lo, hi, _REACH_CHUNKS):
        count = min(_REACH_CHUNKS, hi - at)
        if isinstance(source, tuple):
            here = inside[: count * unit_in]
            reach.read(source[0], source[1] + at * unit_in, here)
        else:
            here = source[at * unit_in : (at + count) * unit_in]
        there = outside[: count * unit_out] if isinstance(target, tuple) else \
            target[at * unit_out : (at + count) * unit_out]
        crypt(here, there, first + at, iter([(0, count)]))
        if isinstance(target, tuple):
            reach.write(target[0], target[1] + at * unit_out, there)


def _run(engine: Any, mappings: dict[int, memoryview], task: tuple[Any, ...]) -> Any:
    *head, source, target, lo, hi = task

    def view(ref: Reference) -> Any:
        token, offset, nbytes = ref
        if token < 0:  # (the caller's ordinary memory: its process id and address)
            return (-token, offset)
        return mappings[token][offset : offset + nbytes]

    piece = iter([(lo, hi)])
    try:
        if head[0] == "blocks":
            _, transform, first_block = head
            engine.blocks(transform).run(view(source), view(target), piece, first_block)
        else:
            kind, key, base_nonce, first = head
            chunks = engine.chunks(key, base_nonce)
            crypt = chunks.seal_ranges if kind == "seal" else chunks.open_ranges
            here, there = view(source), view(target)
            if isinstance(here, tuple) or isinstance(there, tuple):
                _through_parent(crypt, kind == "seal", here, there, first, lo, hi)
            else:
                crypt(here, there, first, piece)
    except AuthenticationError as exc:
        return ("auth", str(exc), exc.chunk)
    except Exception as exc:
        return ("error", f"{type(exc).__name__}: {exc}")
    return None


if __name__ == "__main__":
    _python.serve_helper(_serve)
