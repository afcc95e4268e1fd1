"""Property-based fuzzing of the file format's parser (aescl/fileformat.py, aescl/chunked.py):
any byte string, any truncation, any bit flip and any mix of edits gives only aescl's own
errors, never another exception or a hang, and releases only authenticated plaintext.

Bounded in the default run; ``AESCL_FUZZ_EXAMPLES=N`` runs N cases per property (the long
run recorded in docs/security.md).
"""

from __future__ import annotations

import io
import os
import tempfile
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aescl
from aescl import chunked, fileformat

KEY = bytes(range(32))
FUZZ = settings(
    max_examples=int(os.environ.get("AESCL_FUZZ_EXAMPLES", "150")),
    deadline=timedelta(seconds=10),  # a hang is a failure, a slow shared machine is not
    suppress_health_check=[HealthCheck.too_slow],
    derandomize="AESCL_FUZZ_EXAMPLES" not in os.environ,  # CI sees the same cases each run
)
# Plaintexts around the chunk boundaries: empty, partial, one, several chunks.
PLAINTEXTS = st.one_of(
    st.binary(max_size=64),
    st.integers(0, 3 * chunked.CHUNK_SIZE + 17).map(lambda n: os.urandom(n)),
)


def sealed(plaintext: bytes) -> bytes:
    sink = io.BytesIO()
    fileformat.encrypt_stream(io.BytesIO(plaintext), sink, key=KEY, device="host")
    return sink.getvalue()


def opened(data: bytes, from_file: bool) -> tuple[bytes, Exception | None]:
    """Decrypt ``data`` (from a pipe-like stream, or a regular file, which takes the
    other path through the engines): what was released, and aescl's error if any.
    Any other exception escapes and fails the test."""
    sink = io.BytesIO()
    try:
        if from_file:
            with tempfile.TemporaryFile() as handle:
                handle.write(data)
                handle.seek(0)
                fileformat.decrypt_stream(handle, sink, key=KEY, device="host")
        else:
            fileformat.decrypt_stream(io.BytesIO(data), sink, key=KEY, device="host")
    except aescl.AesclError as exc:
        return sink.getvalue(), exc
    return sink.getvalue(), None


def assert_rejected_releasing_whole_chunks(data: bytes, plaintext: bytes, from_file: bool) -> None:
    released, error = opened(data, from_file)
    assert error is not None, "a modified file was accepted"
    # Only whole chunks that authenticated, in order. (A final chunk, the one that may
    # be partial, is released only once nothing can follow it: with the whole file.)
    assert plaintext.startswith(released)
    assert len(released) % chunked.CHUNK_SIZE == 0


@FUZZ
@given(data=st.binary(max_size=4 * chunked.SEALED_CHUNK_SIZE), from_file=st.booleans())
def test_any_byte_string_is_rejected_with_nothing_released(data, from_file):
    released, error = opened(data, from_file)
    assert error is not None and released == b""


@FUZZ
@given(plaintext=PLAINTEXTS, cut=st.floats(0, 1, exclude_max=True), from_file=st.booleans())
def test_any_truncation_is_rejected(plaintext, cut, from_file):
    data = sealed(plaintext)
    assert_rejected_releasing_whole_chunks(data[: int(cut * len(data))], plaintext, from_file)


@FUZZ
@given(plaintext=PLAINTEXTS, where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7),
       from_file=st.booleans())
def test_any_bit_flip_is_rejected(plaintext, where, bit, from_file):
    data = bytearray(sealed(plaintext))
    data[int(where * len(data))] ^= 1 << bit
    assert_rejected_releasing_whole_chunks(bytes(data), plaintext, from_file)


EDITS = st.lists(st.tuples(
    st.sampled_from(["flip", "cut", "insert", "delete", "append", "repeat"]),
    st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=40)), min_size=1,
    max_size=4)


def edited(data: bytes, edits: list[tuple[str, float, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, where, extra in edits:
        at = int(where * len(out)) if out else 0
        if kind == "flip" and out:
            out[at] ^= extra[0] or 1
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = extra
        elif kind == "delete":
            del out[at : at + len(extra)]
        elif kind == "append":
            out += extra
        elif kind == "repeat":  # a run of the file again, up to a sealed chunk long
            length = len(extra) * chunked.SEALED_CHUNK_SIZE // 40
            out[at:at] = out[int(extra[0] / 256 * len(out)):][:length]
    return bytes(out)


@FUZZ
@given(plaintext=PLAINTEXTS, edits=EDITS, from_file=st.booleans())
def test_any_mix_of_edits_is_rejected_unless_it_changed_nothing(plaintext, edits, from_file):
    data = sealed(plaintext)
    changed = edited(data, edits)
    if changed == data:
        assert opened(changed, from_file) == (plaintext, None)
    else:
        assert_rejected_releasing_whole_chunks(changed, plaintext, from_file)
