"""Issue 57: where a team's call spends its time, on 2 GiB of ``aescl.pinned_empty`` over
every GPU of one engine (ENGINE: ``cuda`` or ``opencl``). ``gpu_processes._Worker.run``
is replaced here by a copy that stamps, for each GPU's worker process: the task sent,
its first ask for a range, the last range handed, and its reply (ms from the call's
start; ``t0``: when the parent began that worker's task). Also the final chunk of a run
alone, on the team's lead and on the host engine. Best of 3 after a warm-up, as JSON.

    python3 docs/benchmarks/2026-11-28-team-timeline.py ENGINE
"""
import json, os, sys, time
import numpy as np
import aescl
from aescl import chunked
from aescl.engines import gpu_processes as gp
from aescl.engines.host import shared
from aescl.teams import team
from aescl.errors import AuthenticationError

stamps = {}
def run(self, head, source, target, ranges):
    located = [shared.locate(source), shared.locate(target)]
    refs = [(region.token, offset, memoryview(data).nbytes)
            for (region, offset), data in zip(located, (source, target), strict=True)]
    s = {"t0": time.perf_counter(), "n": 0}
    with self.busy:
        shared.hand_over(self.connection, self.process.pid, self.mapped, [r for r, _ in located])
        self.connection.send((head, *refs))
        s["sent"] = time.perf_counter()
        while True:
            reply = self.connection.recv()
            if reply != ("next",):
                break
            if s["n"] == 0:
                s["first_ask"] = time.perf_counter()
            r = next(ranges, None)
            if r is not None:
                s["n"] += 1
                s["last_range"] = time.perf_counter()
            self.connection.send(r)
    s["reply"] = time.perf_counter()
    stamps[head[0] + str(id(self))] = s
    if reply is None:
        return
    raise RuntimeError(reply)
gp._Worker.run = run

engine = sys.argv[1]
gpus = [d.id for d in aescl.devices() if d.engine == engine and d.type == "gpu"]
n = 2 << 30
src = aescl.pinned_empty(n, gpus); src[:] = 7
dst = aescl.pinned_empty(chunked.sealed_size(n), gpus)
key, nonce = os.urandom(32), os.urandom(12)
out = {}
def timed(f, label):
    f(); best = None
    for _ in range(3):
        stamps.clear()
        t = time.perf_counter(); f(); t = time.perf_counter() - t
        if best is None or t < best[0]:
            best = (t, {k: {kk: round((vv - v["t0"]) * 1e3, 2) if kk != "n" else vv
                            for kk, vv in v.items() if kk != "t0"} | {"t0": round((v["t0"] - t0) * 1e3, 2)}
                        for k, v in stamps.items()})
    out[label] = {"ms": round(best[0] * 1e3, 2), "workers": best[1]}
t0 = 0
def ctr():
    global t0; t0 = time.perf_counter()
    aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8], device=gpus).encrypt(src, output=dst[:n])
def enc():
    global t0; t0 = time.perf_counter()
    chunked.encrypt(key, src, device=gpus, output=dst)
full = n // chunked.CHUNK_SIZE - 1
tc = team(gpus).chunks(key, nonce, 1024)
def seal_full():
    global t0; t0 = time.perf_counter()
    tc.seal_full(src[: full * chunked.CHUNK_SIZE], dst[: full * chunked.SEALED_CHUNK_SIZE], 0)
def final():
    global t0; t0 = time.perf_counter()
    tc.seal(src[full * chunked.CHUNK_SIZE:], full, final=True)
def final_new():
    global t0; t0 = time.perf_counter()
    team(gpus).chunks(key, nonce, 1024).seal(src[full * chunked.CHUNK_SIZE:], full, final=True)
from aescl.engines import engine_for
host = engine_for(aescl.devices.host_device())
def final_host():
    global t0; t0 = time.perf_counter()
    host.chunks(key, nonce, 1024).seal(src[full * chunked.CHUNK_SIZE:], full, final=True)
timed(final_host, "final host");
timed(ctr, "ctr"); timed(enc, "encrypt"); timed(seal_full, "seal_full"); timed(final, "final kept"); timed(final_new, "final new team chunks")
print(json.dumps(out))
