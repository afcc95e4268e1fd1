"""One loader for the NIST CAVP / RFC test-vector files in ``cryptography-vectors``.

The runner in each test module names the exact files it uses; this module only
parses them. A file is a list of sections (``[ENCRYPT]``, ``[DECRYPT]``), each a
list of ``KEY = value`` records separated by blank lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cryptography_vectors


@dataclass(frozen=True)
class Vector:
    source: str
    section: str
    fields: dict[str, str]

    def bytes(self, name: str) -> bytes:
        return bytes.fromhex(self.fields[name])

    @property
    def id(self) -> str:
        return f"{self.source}:{self.section}:{self.fields.get('COUNT', '?')}"


def vector_path(*parts: str) -> Path:
    return Path(cryptography_vectors.__file__).parent.joinpath(*parts)


def load(*parts: str) -> list[Vector]:
    path = vector_path(*parts)
    section = ""
    vectors: list[Vector] = []
    record: dict[str, str] = {}

    def flush() -> None:
        if "KEY" in record:
            vectors.append(Vector(path.name, section, dict(record)))
        record.clear()

    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            flush()
        elif line.startswith("["):
            flush()
            section = line.strip("[]")
        elif "=" in line:
            name, _, value = line.partition("=")
            record[name.strip().upper()] = value.strip()
        else:  # a bare word is a flag, such as FAIL in the GCM decryption files
            record[line.upper()] = ""
    flush()
    return vectors
