"""Issue 55: the 4 GiB file job (``aescl encrypt``/``decrypt --key-file``, /dev/shm to
/dev/shm, default device) with the host engine's worker processes reaching the files'
memory in place (reach.py) and, in the same run, copying it through shared memory
instead (``REACH_MIN_BYTES`` raised past the job), beside ``cp`` and ``openssl enc``.
Each command in a fresh process, three rounds, seconds. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-file-routes.py [GiB]       # 4 by default
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SHM = "/dev/shm"
ROUTES = {"reached": "", "staged": "h.REACH_MIN_BYTES = 1 << 62; "}


def aescl_command(route: str, *arguments: str) -> list[str]:
    code = ("import runpy, sys; import aescl.engines.host.engine as h; " + ROUTES[route]
            + f"sys.argv = ['aescl', *{list(arguments)!r}]; "
            + "runpy.run_module('aescl', run_name='__main__')")
    return [sys.executable, "-c", code]


def seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 2)


def main(gib: int) -> None:
    plain, sealed, opened = (os.path.join(SHM, name) for name in
                             ("routes.plain", "routes.aescl", "routes.opened"))
    key = os.path.join(SHM, "routes.key")
    with open(plain, "wb") as file:
        for _ in range(gib * 16):
            file.write(os.urandom(64 << 20))
    subprocess.run([sys.executable, "-m", "aescl", "keygen", "-o", key, "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    hex_key, iv = os.urandom(32).hex(), os.urandom(16).hex()
    figures: dict[str, list[float]] = {}
    try:
        for _ in range(3):
            figures.setdefault("cp", []).append(seconds(["cp", plain, opened]))
            figures.setdefault("openssl enc -aes-256-ctr", []).append(seconds(
                ["openssl", "enc", "-aes-256-ctr", "-K", hex_key, "-iv", iv, "-in", plain,
                 "-out", opened]))
            for route in ROUTES:
                figures.setdefault(f"{route} encrypt", []).append(seconds(aescl_command(
                    route, "encrypt", "--key-file", key, plain, "-o", sealed, "--force")))
                figures.setdefault(f"{route} decrypt", []).append(seconds(aescl_command(
                    route, "decrypt", "--key-file", key, sealed, "-o", opened, "--force")))
                same = subprocess.run(["cmp", "-s", plain, opened]).returncode == 0
                figures.setdefault(f"{route} round trip identical", []).append(same)
    finally:
        for path in (plain, sealed, opened, key):
            if os.path.exists(path):
                os.unlink(path)
    print(json.dumps(figures))


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 4)
