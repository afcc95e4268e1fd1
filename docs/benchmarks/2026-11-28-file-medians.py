"""Issue 57 (item 5): a file job on a host of several GPUs, in more rounds, each round
starting one device later (``file_rounds``' ``rotate``): ``aescl encrypt`` and ``decrypt``
(``--key-file``, /dev/shm to /dev/shm) with the default, ``all``, ``host`` and each GPU
engine's first GPU, beside ``cp`` and ``openssl enc -aes-256-ctr``; each command a fresh
process, seconds, and the medians. ``--few`` keeps the default, ``all`` and ``host``
(for a large file). Prints one JSON object.

    python3 docs/benchmarks/2026-11-28-file-medians.py GiB ROUNDS [--few]
"""

from __future__ import annotations

import json
import statistics
import sys

from file_rounds import file_rounds

import aescl


def main(gib: int, rounds: int, few: bool) -> None:
    aescl_cli = [sys.executable, "-m", "aescl"]
    choices: dict[str, list[str]] = {"default": [], "all": ["--device", "all"],
                                     "host": ["--device", "host"]}
    if not few:
        for engine in ("cuda", "opencl"):
            gpus = [d.id for d in aescl.devices() if d.engine == engine and d.type == "gpu"]
            if gpus:
                choices[gpus[0]] = ["--device", gpus[0]]

    def commands(options: list[str]):
        return lambda key, plain, sealed, opened: (
            [*aescl_cli, "encrypt", *options, "--key-file", key, plain, "-o", sealed, "--force"],
            [*aescl_cli, "decrypt", *options, "--key-file", key, sealed, "-o", opened, "--force"])

    figures: dict[str, object] = {"GiB": gib, "devices": [d.id for d in aescl.devices()]}
    file_rounds("medians", gib, rounds, {name: commands(o) for name, o in choices.items()},
                figures, rotate=True)
    figures["medians"] = {name: round(statistics.median(values), 3)
                          for name, values in figures.items()
                          if isinstance(values, list) and values
                          and isinstance(values[0], float)}
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), "--few" in sys.argv[3:])
