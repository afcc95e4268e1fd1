"""Probe: what a split job (GPU + host engine) loses to, on a GPU host (docs/benchmarks).

Times 1 GiB of CTR-128 and of the chunked format (AES-256-GCM) on the GPU alone, the
host engine alone and both, from pageable and from pinned memory, under variants of
the host engine's settings and of Python's GIL switch interval. Then the crossover of
the default device: whole `aescl encrypt` runs of files of several sizes, host engine
against the GPU, each in a fresh process (OpenCL start-up included).

Run on the accelerator machine: python3 tools/probe_split.py [--crossover-only]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import probe_timing  # tools/, beside this script

import aescl
from aescl import chunked, scheduler
from aescl.devices import host_device
from aescl.engines import engine_for
from aescl.engines.host import engine as host_engine

N = 1 << 30
KEY16, KEY32, NONCE = os.urandom(16), os.urandom(32), os.urandom(12)


def best_gb_s(action) -> float:
    return probe_timing.best_gb_s(action, N, repeats=4, warm_up=True)


def ctr(devices, source, target):
    aescl.new(KEY16, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
              device=devices).encrypt(source, output=target)


def sealed(devices, source, target):
    chunked.encrypt_raw(KEY32, NONCE, source, device=devices, output=target)


def shares(devices) -> str:
    done = scheduler.team(devices).shares
    total = sum(s.units for s in done) or 1
    return " ".join(f"{s.device.id} {100 * s.units / total:.0f}%" for s in done)


def split_table(gpu, label, buffers) -> None:
    for name, job in (("ctr-128", ctr), ("gcm-chunked", sealed)):
        for memory, (source, target) in buffers.items():
            row = []
            for devices in ([gpu], ["host"], [gpu, "host"]):
                out = target if name == "gcm-chunked" else target[:N]
                rate = best_gb_s(lambda j=job, d=devices, s=source, o=out: j(d, s, o))
                row.append(f"{rate:6.2f}")
            print(f"{label:28} {name:11} {memory:8} gpu {row[0]} host {row[1]} "
                  f"both {row[2]}  ({shares([gpu, 'host'])})", flush=True)


def main() -> None:
    if "--crossover-only" in sys.argv:
        crossover()
        return
    gpu = aescl.get_device("gpu")
    print("gpu", gpu.id, gpu.name, "| host", host_device().name, flush=True)
    data = np.frombuffer(os.urandom(N), np.uint8)
    out_bytes = chunked.sealed_size(N, raw=True)
    pinned_in, pinned_out = aescl.pinned_empty(N, gpu), aescl.pinned_empty(out_bytes, gpu)
    pinned_in[:] = data
    buffers = {"pageable": (data, np.empty(out_bytes, np.uint8)),
               "pinned": (pinned_in, pinned_out)}
    engine = engine_for(host_device())
    variants = [
        ("defaults", {}),
        ("switch interval 0.5 ms", {"switch": 0.0005}),
        ("host pieces 16 MiB", {"piece": 16 << 20}),
        ("host threads 12", {"threads": 12}),
        ("16 MiB + 0.5 ms", {"piece": 16 << 20, "switch": 0.0005}),
        ("16 MiB + 0.5 ms + 12 thr", {"piece": 16 << 20, "switch": 0.0005, "threads": 12}),
    ]
    defaults = (host_engine.PIECE_BYTES, engine.threads, sys.getswitchinterval())
    for label, change in variants:
        host_engine.PIECE_BYTES = engine.piece_bytes = change.get("piece", defaults[0])
        engine.threads = change.get("threads", defaults[1])
        sys.setswitchinterval(change.get("switch", defaults[2]))
        scheduler._measured.clear()
        split_table(gpu, label, buffers)
    host_engine.PIECE_BYTES = engine.piece_bytes = defaults[0]
    engine.threads = defaults[1]
    sys.setswitchinterval(defaults[2])
    crossover()


def crossover() -> None:
    # The default device's crossover: fresh processes, so OpenCL start-up counts.
    os.makedirs("/dev/shm/probe", exist_ok=True)
    key = "/dev/shm/probe/k.key"
    if not os.path.exists(key):
        subprocess.run(["aescl", "keygen", "-o", key], check=True)
    for size in (1 << 10, 16 << 20, 64 << 20, 128 << 20, 256 << 20, 1 << 30):
        path = f"/dev/shm/probe/in-{size}"
        with open(path, "wb") as handle:
            handle.write(os.urandom(size))
        row = []
        for spec in ("host", "gpu", None):
            times = []
            for _ in range(3):
                command = ["aescl", "encrypt", "--key-file", key, "-f", "-o", path + ".out", path]
                if spec:
                    command[2:2] = ["--device", spec]
                start = time.perf_counter()
                subprocess.run(command, check=True)
                times.append(time.perf_counter() - start)
            row.append(f"{spec or 'default'} {sorted(times)[1]:.3f} s")
        print(f"aescl encrypt {size:>11} B: " + ", ".join(row), flush=True)
        os.unlink(path)
    small = "/dev/shm/probe/small"
    with open(small, "wb") as handle:
        handle.write(os.urandom(1024))
    pairs = []
    for _ in range(9):  # paired runs, as farm-bench pairs them
        times = []
        for command in ([sys.executable, "-c", "import click"],
                        ["aescl", "encrypt", "--key-file", key, "-f", "-o", small + ".out", small]):
            start = time.perf_counter()
            subprocess.run(command, check=True)
            times.append(time.perf_counter() - start)
        pairs.append(times)
    click_s, aescl_s = (sorted(p[i] for p in pairs)[4] for i in (0, 1))
    ratio = sorted(p[1] / p[0] for p in pairs)[4]
    print(f"1 KiB, 9 paired runs, medians: python3 -c 'import click' {click_s:.3f} s, "
          f"aescl encrypt {aescl_s:.3f} s, paired ratio {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
