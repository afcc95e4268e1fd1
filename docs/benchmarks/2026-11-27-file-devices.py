"""Issue 57 (item 5): a file job on a host of several GPUs. ``aescl encrypt`` and
``decrypt`` (``--key-file``, /dev/shm to /dev/shm) with each ``--device``: the default,
``all``, the host engine, each GPU engine's team (``--device cuda:0 --device cuda:1
...``, and the OpenCL GPUs alike) and one CUDA GPU, beside ``cp`` and ``openssl enc
-aes-256-ctr`` of the same file. Each command in a fresh process, seconds; the round
trip compared with ``cmp``. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-file-devices.py [GiB] [rounds]   # 4 and 3 by default
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import aescl

SHM = "/dev/shm"


def seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 2)


def device_choices() -> dict[str, list[str]]:
    """Each way to name the devices, as --device options."""
    cuda = [d.id for d in aescl.devices() if d.is_cuda]
    opencl = [d.id for d in aescl.devices() if d.is_opencl and d.type == "gpu"]
    choices: dict[str, list[str]] = {"default": [], "all": ["--device", "all"],
                                     "host": ["--device", "host"]}
    for name, ids in (("cuda team", cuda), ("opencl team", opencl)):
        if len(ids) > 1:
            choices[name] = [option for spec in ids for option in ("--device", spec)]
    if cuda:
        choices[cuda[0]] = ["--device", cuda[0]]
    return choices


def main(gib: int, rounds: int) -> None:
    plain, sealed, opened = (os.path.join(SHM, name) for name in
                             ("devices.plain", "devices.aescl", "devices.opened"))
    key = os.path.join(SHM, "devices.key")
    with open(plain, "wb") as file:
        for _ in range(gib * 16):
            file.write(os.urandom(64 << 20))
    aescl_cli = [sys.executable, "-m", "aescl"]
    subprocess.run([*aescl_cli, "keygen", "-o", key, "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    hex_key, iv = os.urandom(32).hex(), os.urandom(16).hex()
    figures: dict[str, object] = {"GiB": gib, "devices": [d.id for d in aescl.devices()]}
    try:
        for _ in range(rounds):
            figures.setdefault("cp", []).append(seconds(["cp", plain, opened]))
            figures.setdefault("openssl enc -aes-256-ctr", []).append(seconds(
                ["openssl", "enc", "-aes-256-ctr", "-K", hex_key, "-iv", iv, "-in", plain,
                 "-out", opened]))
            for name, options in device_choices().items():
                figures.setdefault(f"{name} encrypt", []).append(seconds(
                    [*aescl_cli, "encrypt", *options, "--key-file", key, plain, "-o", sealed,
                     "--force"]))
                figures.setdefault(f"{name} decrypt", []).append(seconds(
                    [*aescl_cli, "decrypt", *options, "--key-file", key, sealed, "-o", opened,
                     "--force"]))
                same = subprocess.run(["cmp", "-s", plain, opened]).returncode == 0
                figures.setdefault(f"{name} round trip identical", []).append(same)
    finally:
        for path in (plain, sealed, opened, key):
            if os.path.exists(path):
                os.unlink(path)
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 4, int(sys.argv[2]) if sys.argv[2:] else 3)
