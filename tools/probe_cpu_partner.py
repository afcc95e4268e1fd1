"""Probe: which engine should share a split job with the GPU, on a GPU host (docs/benchmarks).

Times 1 GiB of CTR-128 and of the chunked format (AES-256-GCM), from pinned and from
pageable memory, on the GPU alone, the CPU's OpenCL device alone (whole, and as a
sub-device of 15, 14 and 12 cores, leaving cores to the GPU's feeding thread), the host
engine alone, and the GPU beside each of them; with each engine's share of the work.

"shared" memory is ``aescl.pinned_empty(n, [gpu, "host"])``: pinned for the GPU and
mapped by the host engine's worker processes, which then work apart from the
interpreter.

Run on the accelerator machine: python3 tools/probe_cpu_partner.py [pinned] [pageable] [shared]
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import probe_timing  # tools/, beside this script
import pyopencl as cl

import aescl
from aescl import chunked, scheduler

N = 1 << 30
KEY16, KEY32, NONCE = os.urandom(16), os.urandom(32), os.urandom(12)


def ctr(devices, source, target) -> None:
    aescl.new(KEY16, aescl.MODE_CTR, nonce=b"", initial_value=bytes(16),
              device=devices).encrypt(source, output=target[:N])


def sealed(devices, source, target) -> None:
    chunked.encrypt_raw(KEY32, NONCE, source, device=devices, output=target)


def shares(devices) -> str:
    done = scheduler.team(devices).shares
    total = sum(s.units for s in done) or 1
    return " ".join(f"{s.device.id} {100 * s.units / total:.0f}%" for s in done)


def main() -> None:
    gpu, cpu = aescl.get_device("gpu"), aescl.get_device("pocl")
    print("gpu", gpu.id, gpu.name, "| cpu", cpu.id, cpu.name, flush=True)
    parts = []
    for units in (15, 14, 12):
        part = cpu.cl_device.create_sub_devices([cl.device_partition_property.EQUALLY, units])
        parts.append(dataclasses.replace(cpu, id=f"{cpu.id}.u{units}", compute_units=units,
                                         cl_device=part[0]))
    data = np.frombuffer(os.urandom(N), np.uint8)
    out_bytes = chunked.sealed_size(N, raw=True)
    pinned_in, pinned_out = aescl.pinned_empty(N, gpu), aescl.pinned_empty(out_bytes, gpu)
    pinned_in[:] = data
    shared_in = aescl.pinned_empty(N, [gpu, "host"])
    shared_in[:] = data
    buffers = {"pinned": (pinned_in, pinned_out),
               "pageable": (data, np.empty(out_bytes, np.uint8)),
               "shared": (shared_in, aescl.pinned_empty(out_bytes, [gpu, "host"]))}
    buffers = {m: b for m, b in buffers.items() if m in (sys.argv[1:] or buffers)}
    layouts = [[gpu], [cpu], ["host"], [gpu, cpu], [gpu, "host"]]
    layouts += [layout for part in parts for layout in ([part], [gpu, part])]
    for name, job in (("ctr-128", ctr), ("gcm-chunked", sealed)):
        for memory, (source, target) in buffers.items():
            for devices in layouts if memory != "shared" else layouts[:5] + [[gpu, "host", cpu]]:
                # Named lists (no `all` rules), measured afresh. Since the scheduler
                # leaves a GPU out of a split whose data it would stage, the pageable
                # GPU + CPU rows show that rule; docs/benchmarks has them from before it.
                scheduler._measured.clear()
                rate = probe_timing.best_gb_s(
                    lambda j=job, d=devices, s=source, t=target: j(d, s, t), N,
                    repeats=4, warm_up=True)
                label = "+".join(d if isinstance(d, str) else d.id for d in devices)
                print(f"{name:11} {memory:8} {label:12} {rate:6.2f} GB/s  {shares(devices)}",
                      flush=True)


if __name__ == "__main__":
    main()
