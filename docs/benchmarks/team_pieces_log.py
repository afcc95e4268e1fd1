"""Imported first by each of aescl's helper processes in 2026-11-28-team-pieces.py (not
otherwise): with $TEAM_PIECES_LOG set to a folder, each piece a CUDA pipeline slot runs
is logged there, a line ``start end bytes thread`` (time.perf_counter, which is
CLOCK_MONOTONIC and so comparable across processes), one file a process."""

import os

_folder = os.environ.get("TEAM_PIECES_LOG")
if _folder:
    import threading
    import time

    from aescl.engines.cuda import pipeline as _pipeline

    _run_piece = _pipeline.Slot.run
    _log = open(os.path.join(_folder, f"{os.getpid()}.txt"), "a", buffering=1)  # noqa: SIM115

    def _logged(self, piece):
        began = time.perf_counter()
        _run_piece(self, piece)
        _log.write(f"{began} {time.perf_counter()} {piece.source.nbytes} "
                   f"{threading.get_ident()}\n")

    _pipeline.Slot.run = _logged
