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
import glob, json, os, sys, tempfile, time
import aescl
from aescl import chunked
from aescl.engines import gpu_processes as gp
from aescl.engines.host import shared

from aescl import _python
_command = _python.command
def command(*, module=None, code=None):  # each helper imports the piece logger first
    argv = _command(module=module, code=code)
    first, rest = argv[-1].split("\n", 1)
    argv[-1] = first + "\nimport team_pieces_log\n" + rest
    return argv
_python.command = command

stamps = {}
if hasattr(gp._Worker, "answer"):  # (served together: this session's build)
    _send, _answer = gp._Worker.send_task, gp._Worker.answer
    def send_task(self, head, source, target, first):
        now = time.perf_counter()
        stamps[self.process.pid] = {"t0": now, "ranges": [(now, first[1] - first[0])]}
        _send(self, head, source, target, first)
    class Proxy:
        def __init__(self, ranges, s): self.ranges, self.s = ranges, s
        def __iter__(self): return self
        def __next__(self):
            r = next(self.ranges)
            self.s["ranges"].append((time.perf_counter(), r[1] - r[0]))
            return r
    def answer(self, ranges):
        s = stamps[self.process.pid]
        done = _answer(self, Proxy(ranges, s))
        if done:
            s["reply"] = time.perf_counter()
        return done
    gp._Worker.send_task, gp._Worker.answer = send_task, answer
else:
    def run(self, head, source, target, ranges):
        located = [shared.locate(source), shared.locate(target)]
        refs = [(region.token, offset, memoryview(data).nbytes)
                for (region, offset), data in zip(located, (source, target), strict=True)]
        s = {"t0": time.perf_counter(), "ranges": []}
        with self.busy:
            shared.hand_over(self.connection, self.process.pid, self.mapped, [r for r, _ in located])
            self.connection.send((head, *refs))
            while True:
                reply = self.connection.recv()
                if reply != ("next",):
                    break
                r = next(ranges, None)
                if r is not None:
                    s["ranges"].append((time.perf_counter(), r[1] - r[0]))
                self.connection.send(r)
        s["reply"] = time.perf_counter()
        stamps[self.process.pid] = s
        if reply is not None:
            raise RuntimeError(reply)
    gp._Worker.run = run

folder = tempfile.mkdtemp()
os.environ["TEAM_PIECES_LOG"] = folder
gpus = [d.id for d in aescl.devices() if d.engine == "cuda" and d.type == "gpu"]
n = int(os.environ.get("TEAM_GIB", "2")) << 30
src = aescl.pinned_empty(n, gpus); src[:] = 7
dst = aescl.pinned_empty(chunked.sealed_size(n), gpus)
key, nonce = os.urandom(32), os.urandom(8)
calls = {
    "ctr": lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce, device=gpus).encrypt(src, output=dst[:n]),
    "seal": lambda: chunked.encrypt(key, src, device=gpus, output=dst),
}
out = {}
for label, call in calls.items():
    for _ in range(3):
        call()
    for f in glob.glob(f"{folder}/*.txt"):
        open(f, "w").close()
    stamps.clear()
    t0 = time.perf_counter(); call(); whole = time.perf_counter() - t0
    time.sleep(0.2)
    workers = {}
    for pid, s in stamps.items():
        try:
            pieces = [tuple(float(x) for x in line.split()[:3])
                      for line in open(f"{folder}/{pid}.txt")]
        except FileNotFoundError:
            pieces = []
        last = s["ranges"][-1][0]
        ms = lambda t: round((t - t0) * 1e3, 2)
        workers[pid] = {
            "task": ms(s["t0"]), "last_range": ms(last), "reply": ms(s["reply"]),
            "ranges_last5": [(ms(t), u) for t, u in s["ranges"][-5:]],
            "n_ranges": len(s["ranges"]), "n_pieces": len(pieces),
            "first_pieces": [(ms(a), ms(b), int(c) >> 10) for a, b, c in sorted(pieces)[:4]],
            # the pieces still running at the last range, and after
            "tail": [(ms(a), ms(b), int(c) >> 10) for a, b, c in sorted(pieces) if b > last],
            "piece_ms_median": sorted(round((b - a) * 1e3, 2) for a, b, c in pieces)[len(pieces) // 2] if pieces else None,
        }
    out[label] = {"ms": round(whole * 1e3, 2), "workers": workers}
print(json.dumps(out))
