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
import sys

from file_rounds import file_rounds

import aescl


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


def commands(options: list[str]):
    aescl_cli = [sys.executable, "-m", "aescl"]

    def made(key: str, plain: str, sealed: str, opened: str) -> tuple[list[str], list[str]]:
        return ([*aescl_cli, "encrypt", *options, "--key-file", key, plain, "-o", sealed,
                 "--force"],
                [*aescl_cli, "decrypt", *options, "--key-file", key, sealed, "-o", opened,
                 "--force"])
    return made


def main(gib: int, rounds: int) -> None:
    figures: dict[str, object] = {"GiB": gib, "devices": [d.id for d in aescl.devices()]}
    variants = {name: commands(options) for name, options in device_choices().items()}
    print(json.dumps(file_rounds("devices", gib, rounds, variants, figures)))


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 4, int(sys.argv[2]) if sys.argv[2:] else 3)
