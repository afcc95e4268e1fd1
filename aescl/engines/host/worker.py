"""A host engine worker process: ``python -m aescl.engines.host.worker FD``, started by
processes.py, which speaks to it over the socket FD (the protocol is in processes.py).
It runs the host engine's own code, single-threaded, on its mappings of the shared
memory regions it is handed."""

from __future__ import annotations

import mmap
import os
import sys
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from typing import Any

from ...errors import AuthenticationError
from .engine import HostEngine
from .processes import Reference


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
            descriptor = recv_handle(connection)
            try:
                # Populated now: page faults on every first touch would cost more
                # than the AES (a 1 GiB split ran at half speed without it).
                mappings[message[1]] = memoryview(mmap.mmap(
                    descriptor, message[2], flags=mmap.MAP_SHARED | mmap.MAP_POPULATE))
            finally:
                os.close(descriptor)
            continue
        if kind == "unmap":
            for token in message[1]:
                mappings.pop(token, None)
            continue
        connection.send(_run(engine, mappings, message))


def _run(engine: Any, mappings: dict[int, memoryview], task: tuple[Any, ...]) -> Any:
    *head, source, target, lo, hi = task

    def view(ref: Reference) -> memoryview:
        token, offset, nbytes = ref
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
            crypt(view(source), view(target), first, piece)
    except AuthenticationError as exc:
        return ("auth", str(exc), exc.chunk)
    except Exception as exc:
        return ("error", f"{type(exc).__name__}: {exc}")
    return None


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
