"""A short run of chunks sealed and opened on a device, with the threads a message that
each launch of the fused kernel chose (device_chunks.message_items, as the engine's
module calls it) recorded; the bytes checked against the reference."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import chunked_reference as reference
from aescl import chunked


def seal_and_open_recording_items(monkeypatch: Any, engine_module: ModuleType, device: Any,
                                  chunks: int) -> list[int]:
    """Seal and open ``chunks`` full chunks and a final one on ``device``; the choices
    ``engine_module``'s launches made, in order."""
    chosen: list[int] = []
    choose = engine_module.message_items

    def recorded(*args: int) -> int:
        chosen.append(choose(*args))
        return chosen[-1]

    monkeypatch.setattr(engine_module, "message_items", recorded)
    chunk_key, base_nonce = os.urandom(32), os.urandom(12)
    message = os.urandom(chunks * chunked.CHUNK_SIZE + 100)
    sealed = chunked.encrypt_raw(chunk_key, base_nonce, message, device=device)
    assert sealed == reference.encrypt_raw(chunk_key, base_nonce, message)
    assert chunked.decrypt_raw(chunk_key, base_nonce, sealed, device=device) == message
    return chosen
