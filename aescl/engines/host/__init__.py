"""The host engine: OpenSSL (through ``cryptography``) on every core, behind the engine
interface, on its threads or, for arrays in shared memory, in worker processes.

* ``engine.py``: the engine, its block and chunk workers and its GCM stream;
* ``processes.py``: the worker processes (``python -m aescl.engines.host.processes``);
* ``shared.py``: memory shared with the workers (memfd).
"""

from __future__ import annotations

from .engine import HostEngine
from .shared import AVAILABLE as SHARED_MEMORY_AVAILABLE
from .shared import shared_empty

Engine = HostEngine  # (what every engine exports: engines/registry.py)

__all__ = ["SHARED_MEMORY_AVAILABLE", "Engine", "HostEngine", "shared_empty"]
