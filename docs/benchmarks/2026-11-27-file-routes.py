"""Issue 55: the 4 GiB file job (``aescl encrypt``/``decrypt --key-file``, /dev/shm to
/dev/shm, default device) with the host engine's worker processes reaching the files'
memory in place (reach.py) and, in the same run, copying it through shared memory
instead (``REACH_MIN_BYTES`` raised past the job), beside ``cp`` and ``openssl enc``.
Each command in a fresh process, three rounds, seconds. Prints one JSON object.

    python3 docs/benchmarks/2026-11-27-file-routes.py [GiB]       # 4 by default
"""

from __future__ import annotations

import json
import sys

from file_rounds import file_rounds

ROUTES = {"reached": "", "staged": "h.REACH_MIN_BYTES = 1 << 62; "}


def aescl_command(route: str, *arguments: str) -> list[str]:
    code = ("import runpy, sys; import aescl.engines.host.engine as h; " + ROUTES[route]
            + f"sys.argv = ['aescl', *{list(arguments)!r}]; "
            + "runpy.run_module('aescl', run_name='__main__')")
    return [sys.executable, "-c", code]


def commands(route: str):
    def made(key: str, plain: str, sealed: str, opened: str) -> tuple[list[str], list[str]]:
        return (aescl_command(route, "encrypt", "--key-file", key, plain, "-o", sealed,
                              "--force"),
                aescl_command(route, "decrypt", "--key-file", key, sealed, "-o", opened,
                              "--force"))
    return made


def main(gib: int) -> None:
    variants = {route: commands(route) for route in ROUTES}
    print(json.dumps(file_rounds("routes", gib, 3, variants, {})))


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 4)
