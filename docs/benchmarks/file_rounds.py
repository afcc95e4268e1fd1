"""What the file benchmarks of 2026-11-27 share (``2026-11-27-file-routes.py``,
``2026-11-27-file-devices.py``): a file of random bytes in /dev/shm, a key file, and
rounds of ``cp``, ``openssl enc -aes-256-ctr`` and each aescl command given, encrypting
and decrypting it, each in a fresh process, seconds; the round trip compared with
``cmp``. Everything made is removed at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

SHM = "/dev/shm"
# (name, its encrypt and decrypt commands for (key file, plain, sealed, opened))
Commands = Callable[[str, str, str, str], tuple[list[str], list[str]]]


def seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 2)


def file_rounds(prefix: str, gib: int, rounds: int, variants: dict[str, Commands],
                figures: dict[str, object], rotate: bool = False) -> dict[str, object]:
    """``figures`` with each command's seconds a round (``cp``, ``openssl enc …``,
    ``<variant> encrypt`` / ``decrypt``, ``<variant> round trip identical``), over a
    ``gib`` GiB file named ``<prefix>.plain`` in /dev/shm. ``rotate``: each round starts
    one variant later than the one before, so that no variant always runs first."""
    plain, sealed, opened, key = (os.path.join(SHM, f"{prefix}.{name}")
                                  for name in ("plain", "aescl", "opened", "key"))
    try:
        with open(plain, "wb") as file:
            for _ in range(gib * 16):
                file.write(os.urandom(64 << 20))
        subprocess.run([sys.executable, "-m", "aescl", "keygen", "-o", key, "--force"],
                       check=True, stdout=subprocess.DEVNULL)
        hex_key, iv = os.urandom(32).hex(), os.urandom(16).hex()
        for round_index in range(rounds):
            figures.setdefault("cp", []).append(seconds(["cp", plain, opened]))
            figures.setdefault("openssl enc -aes-256-ctr", []).append(seconds(
                ["openssl", "enc", "-aes-256-ctr", "-K", hex_key, "-iv", iv, "-in", plain,
                 "-out", opened]))
            order = list(variants.items())
            if rotate:
                shift = round_index % len(order)
                order = order[shift:] + order[:shift]
            for name, commands in order:
                encrypt, decrypt = commands(key, plain, sealed, opened)
                figures.setdefault(f"{name} encrypt", []).append(seconds(encrypt))
                figures.setdefault(f"{name} decrypt", []).append(seconds(decrypt))
                same = subprocess.run(["cmp", "-s", plain, opened]).returncode == 0
                figures.setdefault(f"{name} round trip identical", []).append(same)
    finally:
        for path in (plain, sealed, opened, key):
            if os.path.exists(path):
                os.unlink(path)
    return figures
