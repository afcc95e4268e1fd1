"""Issue 57: what each GPU worker of a CUDA team does over one call, piece by piece:
every GPU of the host, 2 GiB ($TEAM_GIB) of ``aescl.pinned_empty``, CTR-128 and
``chunked.encrypt``, the fourth call of each (three before it warm up). For each worker
(by pid): when the parent began its task (``task``), each range it was handed, its
reply, and from its process the pieces its pipeline ran (``team_pieces_log.py``, beside
this file, which each helper process imports first here): the first ones, and
``tail``, those still running at its last range or begun after it, each ``(start, end,
KiB)``. Milliseconds from the call's start. Works with the builds before and after
``c00739b`` (served from threads, or together from the job's thread).

    python3 docs/benchmarks/2026-11-28-team-pieces.py
"""
from __future__ import annotations

import glob
import json
import os
import tempfile
import time

import aescl
from aescl import _python, chunked
from aescl.engines import gpu_processes
from aescl.engines.host import shared

_command = _python.command


def command(*, module=None, code=None):
    """A helper's argv, which imports the piece logger (team_pieces_log.py) first."""
    argv = _command(module=module, code=code)
    first, rest = argv[-1].split("\n", 1)
    argv[-1] = first + "\nimport team_pieces_log\n" + rest
    return argv


_python.command = command
stamps: dict[int, dict] = {}  # worker pid -> its task's stamps


class _Recorded:
    """A task's ranges, each stamped as the parent hands it out."""

    def __init__(self, ranges, stamp):
        self._ranges, self._stamp = ranges, stamp

    def __iter__(self):
        return self

    def __next__(self):
        claimed = next(self._ranges)
        self._stamp["ranges"].append((time.perf_counter(), claimed[1] - claimed[0]))
        return claimed


if hasattr(gpu_processes._Worker, "answer"):  # (served together: c00739b on)
    _send, _answer = gpu_processes._Worker.send_task, gpu_processes._Worker.answer

    def send_task(self, head, source, target, first):
        now = time.perf_counter()
        stamps[self.process.pid] = {"t0": now, "ranges": [(now, first[1] - first[0])]}
        _send(self, head, source, target, first)

    def answer(self, ranges):
        stamp = stamps[self.process.pid]
        done = _answer(self, _Recorded(ranges, stamp))
        if done:
            stamp["reply"] = time.perf_counter()
        return done

    gpu_processes._Worker.send_task, gpu_processes._Worker.answer = send_task, answer
else:  # (a thread a GPU, before c00739b: its protocol, stamped)
    def run(self, head, source, target, ranges):
        located = [shared.locate(source), shared.locate(target)]
        refs = [(region.token, offset, memoryview(data).nbytes)
                for (region, offset), data in zip(located, (source, target), strict=True)]
        stamp = {"t0": time.perf_counter(), "ranges": []}
        with self.busy:
            shared.hand_over(self.connection, self.process.pid, self.mapped,
                             [region for region, _ in located])
            self.connection.send((head, *refs))
            while True:
                reply = self.connection.recv()
                if reply != ("next",):
                    break
                claimed = next(ranges, None)
                if claimed is not None:
                    stamp["ranges"].append((time.perf_counter(), claimed[1] - claimed[0]))
                self.connection.send(claimed)
        stamp["reply"] = time.perf_counter()
        stamps[self.process.pid] = stamp
        if reply is not None:
            raise RuntimeError(reply)

    gpu_processes._Worker.run = run


def worker_figures(stamp: dict, folder: str, pid: int, t0: float) -> dict:
    """One worker's stamps and pieces in the call begun at ``t0``, in ms from it."""
    def ms(t: float) -> float:
        return round((t - t0) * 1e3, 2)

    try:
        with open(f"{folder}/{pid}.txt") as log:
            pieces = sorted(tuple(float(x) for x in line.split()[:3]) for line in log)
    except FileNotFoundError:
        pieces = []
    last = stamp["ranges"][-1][0]
    lasted = sorted(round((end - start) * 1e3, 2) for start, end, _ in pieces)
    return {
        "task": ms(stamp["t0"]), "last_range": ms(last), "reply": ms(stamp["reply"]),
        "ranges_last5": [(ms(t), units) for t, units in stamp["ranges"][-5:]],
        "n_ranges": len(stamp["ranges"]), "n_pieces": len(pieces),
        "first_pieces": [(ms(a), ms(b), int(c) >> 10) for a, b, c in pieces[:4]],
        # the pieces still running at the last range, and those begun after it
        "tail": [(ms(a), ms(b), int(c) >> 10) for a, b, c in pieces if b > last],
        "piece_ms_median": lasted[len(lasted) // 2] if lasted else None,
    }


def main() -> None:
    folder = tempfile.mkdtemp()
    os.environ["TEAM_PIECES_LOG"] = folder
    gpus = [d.id for d in aescl.devices() if d.engine == "cuda" and d.type == "gpu"]
    n = int(os.environ.get("TEAM_GIB", "2")) << 30
    source = aescl.pinned_empty(n, gpus)
    source[:] = 7
    target = aescl.pinned_empty(chunked.sealed_size(n), gpus)
    key, nonce = os.urandom(32), os.urandom(8)
    calls = {
        "ctr": lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce, device=gpus)
        .encrypt(source, output=target[:n]),
        "seal": lambda: chunked.encrypt(key, source, device=gpus, output=target),
    }
    out = {}
    for label, call in calls.items():
        for _ in range(3):
            call()
        for log in glob.glob(f"{folder}/*.txt"):
            open(log, "w").close()
        stamps.clear()
        t0 = time.perf_counter()
        call()
        whole = time.perf_counter() - t0
        time.sleep(0.2)  # (the workers' last lines written)
        out[label] = {"ms": round(whole * 1e3, 2),
                      "workers": {pid: worker_figures(stamp, folder, pid, t0)
                                  for pid, stamp in stamps.items()}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
