"""Probe: a [gpu, "host"] split on shared pinned memory, with the host engine's worker
processes capped at k and run at a lower scheduling priority (docs/benchmarks, 2026-11-24).

For each of CTR-128 and the chunked format, 1 GiB: the GPU alone, the host engine alone,
then the split with every (cap, priority) below, the workers started afresh for each; best
of 4 after one call, GB/s, with each engine's share. Rounds interleave the settings, so
that the machine's drift falls on all of them alike.

Run on the accelerator machine: [ROUNDS=3] python3 tools/probe_split_workers.py
"""

from __future__ import annotations

import os

import numpy as np
import probe_timing  # tools/, beside this script

import aescl
from aescl import chunked, scheduler
from aescl.engines.host import engine as host
from aescl.engines.host import processes as _processes

N = 1 << 30
KEY16, KEY32, NONCE = os.urandom(16), os.urandom(32), os.urandom(12)
SETTINGS = [(15, "plain"), (15, "nice10"), (15, "batch"), (15, "nice19"), (12, "plain"),
            (12, "nice10"), (13, "plain"), (14, "plain"), (14, "nice10")]
cap: list[int | None] = [None]
_in_processes = host._in_processes
host._in_processes = lambda engine, source, target, limit=None: _in_processes(
    engine, source, target, cap[0] or limit)


def set_priority(how: str) -> None:
    for worker in _processes._workers._all if _processes._workers else []:
        pid = worker.process.pid
        if how.startswith("nice"):
            os.setpriority(os.PRIO_PROCESS, pid, int(how[4:]))
        elif how == "batch":
            os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))


def main() -> None:
    gpu = aescl.get_device("gpu")
    team = [gpu, "host"]
    source = aescl.pinned_empty(N, team)
    source[:] = np.resize(np.frombuffer(os.urandom(1 << 20), np.uint8), N)
    target = aescl.pinned_empty(chunked.sealed_size(N, raw=True), team)

    def ctr(devices) -> None:
        aescl.new(KEY16, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
                  device=devices).encrypt(source, output=target[:N])

    def sealed(devices) -> None:
        chunked.encrypt_raw(KEY32, NONCE, source, device=devices, output=target)

    def shares() -> str:
        done = scheduler.team(team).shares
        total = sum(s.units for s in done) or 1
        return " ".join(f"{s.device.id} {100 * s.units / total:.0f}%" for s in done)

    def rate(job, devices, how: str = "plain") -> float:
        _processes.shutdown()  # new workers: a raised niceness cannot be lowered again
        scheduler._measured.clear()
        job(devices)
        set_priority(how)
        return probe_timing.best_gb_s(lambda: job(devices), N, repeats=4, warm_up=True)

    for round_ in range(int(os.environ.get("ROUNDS", 3))):
        for name, job in (("ctr-128", ctr), ("chunked", sealed)):
            print(f"r{round_} {name:8} gpu alone {rate(job, [gpu]):6.2f}", flush=True)
            print(f"r{round_} {name:8} host alone {rate(job, ['host']):6.2f}", flush=True)
            for cap[0], how in SETTINGS:
                got = rate(job, team, how)
                print(f"r{round_} {name:8} gpu+host, {cap[0]} workers, {how:7} {got:6.2f}  "
                      f"{shares()}", flush=True)
            cap[0] = None


if __name__ == "__main__":
    main()
