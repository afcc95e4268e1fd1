"""Issue 57: what a team's call costs apart from its bytes. One job over every GPU of one
engine (ENGINE: ``cuda`` or ``opencl``) on ``aescl.pinned_empty`` of 2 GiB and of 8 GiB:
CTR-128 and the chunked format sealed, with the output aligned and at odd offsets
(``encrypt_raw`` into offset 0, 56 and 64; ``encrypt``, whose sealed chunks begin 56
bytes in, into offset 0 and 8). Best of 3 after a warm-up, GB/s, as JSON.

    python3 docs/benchmarks/2026-11-28-team-sizes.py ENGINE
"""
import json, os, sys, time
import aescl
from aescl import chunked
from aescl.timing import wall
engine = sys.argv[1]
gpus = [d.id for d in aescl.devices() if d.engine == engine and d.type == "gpu"]
out = {"engine": engine}
for gib in (2, 8):
    n = gib << 30
    src = aescl.pinned_empty(n, gpus); src[:] = 7
    dst = aescl.pinned_empty(chunked.sealed_size(n) + 64, gpus)
    key, nonce = os.urandom(32), os.urandom(12)
    def rate(run):
        run()
        return round(n / min(wall(run) for _ in range(3)) / 1e9, 1)
    f = {}
    f["ctr aligned"] = rate(lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8], device=gpus).encrypt(src, output=dst[:n]))
    f["ctr out+8"] = rate(lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8], device=gpus).encrypt(src, output=dst[8:n + 8]))
    f["ctr out+56"] = rate(lambda: aescl.new(key[:16], aescl.MODE_CTR, nonce=nonce[:8], device=gpus).encrypt(src, output=dst[56:n + 56]))
    raw = chunked.sealed_size(n, raw=True)
    f["seal raw aligned"] = rate(lambda: chunked.encrypt_raw(key, nonce, src, device=gpus, output=dst[:raw]))
    f["seal raw +56"] = rate(lambda: chunked.encrypt_raw(key, nonce, src, device=gpus, output=dst[56:raw + 56]))
    f["seal raw +64"] = rate(lambda: chunked.encrypt_raw(key, nonce, src, device=gpus, output=dst[64:raw + 64]))
    f["seal"] = rate(lambda: chunked.encrypt(key, src, device=gpus, output=dst[:chunked.sealed_size(n)]))
    f["seal out+8 (header at 64)"] = rate(lambda: chunked.encrypt(key, src, device=gpus, output=dst[8:chunked.sealed_size(n) + 8]))
    out[f"{gib} GiB"] = f
    del src, dst
print(json.dumps(out))
