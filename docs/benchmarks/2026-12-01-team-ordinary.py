"""Issue 57, item 1 ("pinned and ordinary"): one GPU and the team of every GPU of an engine
(``ENGINE``: ``cuda``, ``opencl``, or ``all``) on ordinary numpy arrays (pages touched):
CTR-128, the chunked format sealed and opened with ``output=``, $PROBE_MIB MiB (2048 by
default), best of 3 after a warm-up, GB/s. Beside them the N-process yardstick on the
same kind of memory: one process a GPU, each CTR-128 on ordinary arrays of its own,
started together, best rates summed. ``$PROBE_TYPE=cpu`` runs it on CPU devices, to try
it out. Prints one JSON object, labelled with the first argument (which build ran it).

    python3 docs/benchmarks/2026-12-01-team-ordinary.py LABEL [ENGINE]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from one_gpu_jobs import OrdinaryJobs, best

import aescl


def gpus(engine: str) -> list[str]:
    kind = os.environ.get("PROBE_TYPE", "gpu")
    return [d.id for d in aescl.devices() if d.engine == engine and d.type == kind]


def yardstick_process(spec: str, start: float) -> None:
    """One process of the yardstick: CTR-128 on ``spec`` alone, from wall time ``start``."""
    data = OrdinaryJobs(spec)
    data.ctr()
    while time.time() < start:
        time.sleep(0.001)
    rates = []
    for _ in range(3):
        began = time.perf_counter()
        data.ctr()
        rates.append(data.gb_s(time.perf_counter() - began))
    print(json.dumps(rates))


def yardstick(specs: list[str]) -> list[float]:
    start = time.time() + 25  # (every process started and warmed up by then)
    processes = [subprocess.Popen([sys.executable, __file__, "yardstick", spec, str(start)],
                                  stdout=subprocess.PIPE, text=True) for spec in specs]
    return [max(json.loads(p.communicate()[0].strip().splitlines()[-1])) for p in processes]


def main(label: str, engine: str) -> None:
    members = gpus("cuda" if engine == "all" else engine)
    if not members:
        raise SystemExit(f"no {engine} devices here")
    figures: dict[str, object] = {"build": label, "engine": engine}
    each = yardstick(members)
    figures[f"yardstick, {len(members)} processes, CTR GB/s"] = round(sum(each), 1)
    figures["yardstick, each"] = each
    for spec in ([members[:1], members] if engine != "all" else [members[:1], "all"]):
        data = OrdinaryJobs(spec)
        label_of = spec if isinstance(spec, str) else ",".join(spec)
        figures[label_of] = {name: data.gb_s(best(job)) for name, job in data.jobs().items()}
        assert data.opened_intact()
        del data
    print(json.dumps(figures))


if __name__ == "__main__":
    if sys.argv[1:2] == ["yardstick"]:
        yardstick_process(sys.argv[2], float(sys.argv[3]))
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "",
             sys.argv[2] if len(sys.argv) > 2 else "opencl")
