"""aescl/chunked.py: the C2SP chunked format, against a reference built from the spec.

Round trips at every chunking edge, byte-for-byte agreement with
tests/chunked_reference.py (hashlib HKDF + pycryptodome GCM), every tamper
class, the streaming Writer/Reader, and random access.
"""

from __future__ import annotations

import io
import os
import random

import numpy as np
import pytest
from Crypto.Cipher import AES

import aescl
import chunked_reference as reference
from aescl import chunked
from aescl.engines import host_copies

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True

CHUNK = chunked.CHUNK_SIZE
SEALED = chunked.SEALED_CHUNK_SIZE
LENGTHS = [0, 1, 16383, 16384, 16385, 32768, 32769]


@pytest.fixture(scope="module")
def key() -> bytes:
    return os.urandom(32)


def test_derivation_matches_the_reference(key):
    salt = os.urandom(24)
    assert chunked.derive(key, salt, b"ctx") == reference.derive(key, salt, b"ctx")
    assert chunked.derive(key, salt, b"ctx") != chunked.derive(key, salt, b"ctx2")


@pytest.mark.parametrize("length", LENGTHS)
def test_round_trip_matches_the_reference_byte_for_byte(device, key, length):
    message, salt = os.urandom(length), os.urandom(24)
    sealed = chunked.encrypt(key, message, b"context", salt=salt, device=device)
    assert sealed == reference.encrypt(key, message, b"context", salt)
    assert len(sealed) == chunked.sealed_size(length)
    assert chunked.decrypt(key, sealed, b"context", device=device) == message


def test_whole_messages_into_an_output_buffer(device, key):
    """``output=`` on encrypt and decrypt: the same bytes, in the caller's buffer; None
    is returned; a failed opening leaves the buffer zeroed; a wrong size is refused
    before anything is written."""
    message, salt = os.urandom(3 * CHUNK + 11), os.urandom(24)
    expected = reference.encrypt(key, message, b"ctx", salt)
    sealed = np.full(len(expected), 0xEE, np.uint8)
    assert chunked.encrypt(key, message, b"ctx", salt=salt, device=device,
                           output=sealed) is None
    assert sealed.tobytes() == expected
    plaintext = bytearray(len(message))
    assert chunked.decrypt(key, sealed, b"ctx", device=device, output=plaintext) is None
    assert plaintext == message
    damaged = bytearray(expected)
    damaged[56 + 2 * SEALED + 1] ^= 1
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        chunked.decrypt(key, bytes(damaged), b"ctx", device=device, output=plaintext)
    assert plaintext == bytes(len(message))
    short = bytearray(b"\xee" * (len(expected) - 1))
    with pytest.raises(ValueError, match="output must be"):
        chunked.encrypt(key, message, b"ctx", device=device, output=short)
    assert short == b"\xee" * len(short)
    with pytest.raises(TypeError, match="output must be"):
        chunked.decrypt(key, expected, b"ctx", device=device, output=bytes(len(message)))


def test_an_output_in_the_inputs_memory_is_refused_and_the_input_kept(device, key):
    """Host memory: an ``output=`` that is, or overlaps, the input's memory is refused
    before anything is written, by encrypt, decrypt and both raw calls (each writes a
    chunk at another offset than it reads it; sealing in place gave wrong bytes). A
    buffer beside the input, in the same memory, is not an overlap."""
    message, salt, nonce = os.urandom(2 * CHUNK + 11), os.urandom(24), os.urandom(12)
    sealed = chunked.encrypt(key, message, salt=salt)
    raw = chunked.encrypt_raw(key, nonce, message)
    calls = [  # (the call on (input, output), input bytes, output bytes)
        (lambda i, o: chunked.encrypt(key, i, salt=salt, device=device, output=o),
         message, len(sealed)),
        (lambda i, o: chunked.decrypt(key, i, device=device, output=o), sealed, len(message)),
        (lambda i, o: chunked.encrypt_raw(key, nonce, i, device=device, output=o),
         message, len(raw)),
        (lambda i, o: chunked.decrypt_raw(key, nonce, i, device=device, output=o),
         raw, len(message)),
    ]
    for call, given, made in calls:
        for shift in (0, 56, len(given) - 1):  # in place; the output from inside the input
            memory = bytearray(given) + bytearray(max(0, shift + made - len(given)))
            view = memoryview(memory)
            with pytest.raises(ValueError, match="overlaps the input"):
                call(view[: len(given)], view[shift : shift + made])
            assert memory[: len(given)] == given
        memory = bytearray(given) + bytearray(made)  # apart, in one buffer
        view = memoryview(memory)
        assert call(view[: len(given)], view[len(given) :]) is None
    assert memory[len(raw) :] == message


def test_past_256_chunks_in_small_batches(device, key):
    # The chunk index crosses a byte of the nonce, and batches split the message.
    message, salt = os.urandom(257 * CHUNK + 5), os.urandom(24)
    sealed = chunked.encrypt(key, message, salt=salt, device=device, batch_chunks=100)
    assert sealed == reference.encrypt(key, message, b"", salt)
    assert chunked.decrypt(key, sealed, device=device, batch_chunks=64) == message


def test_raw_mode_takes_key_and_base_nonce(device):
    chunk_key, base_nonce = os.urandom(32), os.urandom(12)
    message = os.urandom(2 * CHUNK + 3)
    sealed = chunked.encrypt_raw(chunk_key, base_nonce, message, device=device)
    assert sealed == reference.encrypt_raw(chunk_key, base_nonce, message)
    assert chunked.decrypt_raw(chunk_key, base_nonce, sealed, device=device) == message


def test_a_fresh_salt_every_time(device, key):
    assert chunked.encrypt(key, b"same", device=device) != chunked.encrypt(key, b"same",
                                                                           device=device)


def _flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0x01
    return bytes(out)


def _tamper_cases(sealed: bytes) -> dict[str, tuple[bytes, type[Exception], str]]:
    # A message of two full chunks and a short final one (100 bytes of text).
    body = sealed[56:]
    chunk = [body[i * SEALED : (i + 1) * SEALED] for i in range(3)]
    cases = {
        "salt bit": (_flip(sealed, 3), aescl.WrongKeyError, "wrong key"),
        "commitment bit": (_flip(sealed, 30), aescl.WrongKeyError, "wrong key"),
        "body bit in chunk 0": (_flip(sealed, 56 + 10), aescl.AuthenticationError, "chunk 0"),
        "body bit in chunk 1": (_flip(sealed, 56 + SEALED + 9000), aescl.AuthenticationError,
                                "chunk 1"),
        "tag bit of chunk 1": (_flip(sealed, 56 + 2 * SEALED - 1), aescl.AuthenticationError,
                               "chunk 1"),
        "tag bit of final chunk": (_flip(sealed, len(sealed) - 1), aescl.AuthenticationError,
                                   "chunk 2"),
        "chunks swapped": (sealed[:56] + chunk[1] + chunk[0] + chunk[2],
                           aescl.AuthenticationError, "chunk 0"),
        "chunk duplicated": (sealed[:56] + chunk[0] + chunk[0] + chunk[1] + chunk[2],
                             aescl.AuthenticationError, "chunk 1"),
        "final chunk dropped": (sealed[:56] + chunk[0] + chunk[1], aescl.TruncatedError,
                                "truncated"),
        "trailing byte": (sealed + b"\0", aescl.AuthenticationError, "chunk 2"),
        "trailing chunk": (sealed + chunk[2], aescl.AuthenticationError, "chunk 2"),
    }
    # Truncation at and around every chunk boundary, and inside the header.
    for cut in [0, 1, 55, 56, 57, 56 + 15, 56 + 16, 56 + SEALED - 1, 56 + SEALED,
                56 + SEALED + 1, 56 + SEALED + 16, 56 + 2 * SEALED - 1, 56 + 2 * SEALED,
                56 + 2 * SEALED + 15, 56 + 2 * SEALED + 16, len(sealed) - 1]:
        cases[f"cut at {cut}"] = (sealed[:cut], aescl.AuthenticationError, "truncated")
    return cases


def test_every_tamper_class_is_rejected(device, key):
    message = os.urandom(2 * CHUNK + 100)
    sealed = chunked.encrypt(key, message, b"ctx", device=device)
    for name, (bad, error, words) in _tamper_cases(sealed).items():
        with pytest.raises(error, match=words) as caught:
            chunked.decrypt(key, bad, b"ctx", device=device)
        assert isinstance(caught.value, aescl.AuthenticationError), name
    with pytest.raises(aescl.WrongKeyError, match="wrong key"):
        chunked.decrypt(os.urandom(32), sealed, b"ctx", device=device)
    with pytest.raises(aescl.WrongKeyError, match="context"):
        chunked.decrypt(key, sealed, b"other", device=device)


def test_streaming_writer_and_reader(device, key):
    rng = random.Random(1)
    message = os.urandom(5 * CHUNK + 777)
    sink = io.BytesIO()
    with chunked.Writer(sink, key, b"ctx", device=device, batch_chunks=2) as writer:
        position = 0
        while position < len(message):
            step = rng.choice([1, 100, CHUNK - 1, CHUNK, 3 * CHUNK])
            writer.write(message[position : position + step])
            position += step
    sealed = sink.getvalue()
    assert chunked.decrypt(key, sealed, b"ctx", device=device) == message

    reader = chunked.Reader(io.BytesIO(sealed), key, b"ctx", device=device, batch_chunks=2)
    pieces = []
    while piece := reader.read(rng.choice([1, 5000, CHUNK + 3])):
        pieces.append(piece)
    assert b"".join(pieces) == message
    assert all(type(piece) is bytes for piece in pieces)


def test_reader_reads_of_a_megabyte_and_more_are_bytes_of_the_message(device, key):
    # Reads past aescl's in-place results (_arrays.BytesResult, from 1 MiB), across
    # batches of opened chunks: each read is the message's next bytes, as bytes.
    message = os.urandom(2 * (1 << 20) + 5)
    sealed = chunked.encrypt(key, message, device=device)
    for sizes in ([-1], [(1 << 20) + 3, 700_000, -1]):
        reader = chunked.Reader(io.BytesIO(sealed), key, device=device, batch_chunks=24)
        pieces = [reader.read(size) for size in sizes]
        assert all(type(piece) is bytes for piece in pieces)
        assert b"".join(pieces) == message and reader.read() == b""


def test_reader_releases_only_authenticated_chunks_and_keeps_failing(device, key):
    message = os.urandom(5 * CHUNK + 10)
    sealed = _flip(chunked.encrypt(key, message, device=device), 56 + 3 * SEALED + 5)
    reader = chunked.Reader(io.BytesIO(sealed), key, device=device, batch_chunks=1)
    assert reader.read(3 * CHUNK) == message[: 3 * CHUNK]  # chunks 0-2 are authentic
    with pytest.raises(aescl.AuthenticationError, match="chunk 3"):
        reader.read(1)
    with pytest.raises(aescl.AuthenticationError, match="chunk 3"):
        reader.read(1)

    truncated = chunked.encrypt(key, message, device=device)[: 56 + 5 * SEALED]
    reader = chunked.Reader(io.BytesIO(truncated), key, device=device, batch_chunks=2)
    with pytest.raises(aescl.TruncatedError):
        reader.read()


def test_aborted_writer_leaves_a_message_that_does_not_decrypt(device, key):
    sink = io.BytesIO()
    with pytest.raises(RuntimeError), chunked.Writer(sink, key, device=device) as writer:
        writer.write(b"x" * (CHUNK + 1))
        raise RuntimeError("interrupted")
    with pytest.raises(aescl.TruncatedError):
        chunked.decrypt(key, sink.getvalue(), device=device)


def test_random_access(device, key):
    message = os.urandom(4 * CHUNK + 1234)
    sealed = chunked.encrypt(key, message, device=device)
    rng = random.Random(2)
    ranges = [(0, 0), (0, 1), (CHUNK - 1, 2), (CHUNK, CHUNK), (3 * CHUNK + 5, 10**6),
              (len(message), 5), (len(message) + 100, 5), (len(message) - 1, 1)]
    ranges += [(rng.randrange(len(message)), rng.randrange(3 * CHUNK)) for _ in range(10)]
    for offset, length in ranges:
        for source in (sealed, io.BytesIO(sealed)):
            got = chunked.decrypt_range(key, source, offset, length, device=device)
            assert got == message[offset : offset + length], (offset, length)

    # Only the chunks in the range are authenticated, but the end is always checked.
    damaged = _flip(sealed, 56 + 2 * SEALED + 1)
    assert chunked.decrypt_range(key, damaged, 0, CHUNK, device=device) == message[:CHUNK]
    with pytest.raises(aescl.AuthenticationError, match="chunk 2"):
        chunked.decrypt_range(key, damaged, 2 * CHUNK, 1, device=device)
    with pytest.raises(aescl.TruncatedError):
        chunked.decrypt_range(key, sealed[: 56 + 4 * SEALED], 0, 1, device=device)


def _chunk_job(device, key, base_nonce, batch_chunks=chunked.DEFAULT_BATCH_CHUNKS):
    """The chunks of one message on the target's engines (aescl.scheduler)."""
    return aescl.teams.team(device).chunks(key, base_nonce, batch_chunks)


def test_limits_and_bad_arguments(device, key):
    cipher = _chunk_job(device, os.urandom(32), os.urandom(12))
    with pytest.raises(aescl.CounterOverflowError, match="2\\^38"):
        cipher.seal(bytes(2 * CHUNK), first=2**38 - 1, final=False)
    with pytest.raises(ValueError, match="32-byte key"):
        chunked.encrypt(os.urandom(16), b"", device=device)
    with pytest.raises(ValueError, match="final chunk"):
        cipher.seal(bytes(100), first=0, final=False)


def test_the_pipeline_makes_the_chunk_counters_on_the_device_like_the_host(device):
    # Chunk indices past 2^32 fill both nonce words the device XORs them into.
    chunk_key, base_nonce = os.urandom(32), os.urandom(12)
    cipher = _chunk_job(device, chunk_key, base_nonce, batch_chunks=2)
    first = 2**33 + 2**32 - 3
    plaintext = np.frombuffer(os.urandom(5 * CHUNK), np.uint8)
    sealed = np.empty(5 * SEALED, np.uint8)
    cipher.seal_full(plaintext, sealed, first)
    assert sealed.tobytes() == cipher.seal(plaintext, first, final=False).tobytes()
    assert sealed.tobytes() == b"".join(
        b"".join(AES.new(chunk_key, AES.MODE_GCM, nonce=chunked.chunk_nonce(base_nonce, first + k))
                 .encrypt_and_digest(plaintext[k * CHUNK : (k + 1) * CHUNK].tobytes()))
        for k in range(5))
    opened = np.empty_like(plaintext)
    _chunk_job(device, chunk_key, base_nonce, batch_chunks=3).open_full(sealed, opened, first)
    assert opened.tobytes() == plaintext.tobytes()
    with pytest.raises(aescl.CounterOverflowError, match="2\\^38"):
        cipher.seal_full(plaintext[: 2 * CHUNK], sealed[: 2 * SEALED], 2**38 - 1)


def test_the_pipeline_paths_with_pinned_memory_and_output_buffers(device, key):
    chunk_key, base_nonce = os.urandom(32), os.urandom(12)
    message = os.urandom(9 * CHUNK + 77)
    expected = reference.encrypt_raw(chunk_key, base_nonce, message)
    pinned_in = aescl.pinned_empty(len(message), device)
    pinned_in[:] = memoryview(message)
    pinned_out = aescl.pinned_empty(len(expected), device)
    assert chunked.encrypt_raw(chunk_key, base_nonce, pinned_in, device=device, batch_chunks=2,
                               output=pinned_out) is None
    assert pinned_out.tobytes() == expected
    plaintext = bytearray(len(message))
    chunked.decrypt_raw(chunk_key, base_nonce, pinned_out, device=device, batch_chunks=2,
                        output=plaintext)
    assert plaintext == message

    # Chunk 5 modified: runs 0-1 and 2-3 passed, but a failure leaves the output zeroed.
    tampered = bytearray(expected)
    tampered[5 * SEALED + 3] ^= 1
    plaintext = bytearray(b"\xff" * len(message))
    with pytest.raises(aescl.AuthenticationError, match="chunk 5"):
        chunked.decrypt_raw(chunk_key, base_nonce, bytes(tampered), device=device,
                            batch_chunks=2, output=plaintext)
    assert plaintext == bytes(len(message))
    with pytest.raises(ValueError, match="output must be"):
        chunked.encrypt_raw(chunk_key, base_nonce, message, device=device,
                            output=bytearray(len(message)))


def test_files_stream_through_the_pipeline(device, key, tmp_path, monkeypatch):
    # 13 runs of 2 chunks: more than the pipeline's slots, so every slot is reused;
    # and each run's file reads and writes split across threads at their offsets.
    monkeypatch.setattr(host_copies, "PART_BYTES", 4096)
    message = os.urandom(26 * CHUNK + 5)
    plain = tmp_path / "plain"
    plain.write_bytes(message)
    sealed_path = tmp_path / "sealed"
    seen = []
    with open(plain, "rb") as source, open(sealed_path, "wb") as sink:
        with chunked.Writer(sink, key, b"ctx", device=device, batch_chunks=2) as writer:
            writer.write_file(source, len(message), seen.append)
    assert sum(seen) == len(message)
    sealed = sealed_path.read_bytes()
    assert chunked.decrypt(key, sealed, b"ctx", device=device) == message

    with open(sealed_path, "rb") as source, open(tmp_path / "opened", "wb") as sink:
        sink.write(b"prefix")
        reader = chunked.Reader(source, key, b"ctx", device=device, batch_chunks=2)
        reader.read_file(sink, len(sealed) - chunked.HEADER_SIZE)
        sink.write(b"suffix")  # the stream is left after what the pipeline wrote
    assert (tmp_path / "opened").read_bytes() == b"prefix" + message + b"suffix"

    # A modified chunk 7: runs before it are written, then the error; and it stays failed.
    sealed_path.write_bytes(_flip(sealed, 56 + 7 * SEALED + 1))
    out = io.BytesIO()
    with open(sealed_path, "rb") as source:
        reader = chunked.Reader(source, key, b"ctx", device=device, batch_chunks=2)
        with pytest.raises(aescl.AuthenticationError, match="chunk 7"):
            reader.read_file(out, len(sealed) - chunked.HEADER_SIZE)
        with pytest.raises(aescl.AuthenticationError, match="chunk 7"):
            reader.read(1)
    assert out.getvalue() == message[: 6 * CHUNK]

    # A file that is shorter than its size said (it shrank while being read).
    with open(plain, "rb") as source:
        writer = chunked.Writer(io.BytesIO(), key, device=device, batch_chunks=2)
        with pytest.raises(aescl.TruncatedError, match="ended early"):
            writer.write_file(source, len(message) + CHUNK)


def test_a_writer_whose_write_failed_seals_nothing_more(device, key, tmp_path):
    """A write_file that ran short used to leave the Writer usable with its chunk counter
    behind the chunks already sealed: later writes sealed new plaintext under used nonces."""
    plain = tmp_path / "plain"
    plain.write_bytes(os.urandom(5 * CHUNK))
    sink = io.BytesIO()
    writer = chunked.Writer(sink, key, device=device, batch_chunks=2)
    with open(plain, "rb") as source, pytest.raises(aescl.TruncatedError, match="ended early"):
        writer.write_file(source, 9 * CHUNK)  # windows of chunks 0-3 are sealed first
    written = len(sink.getvalue())
    for call in (lambda: writer.write(b"x" * (3 * CHUNK)), writer.close,
                 lambda: writer.write_file(io.BytesIO(b"y" * CHUNK), CHUNK)):
        with pytest.raises(aescl.TruncatedError, match="ended early"):
            call()
    assert len(sink.getvalue()) == written


def test_a_short_source_after_buffered_bytes_is_truncation(device, key):
    """With bytes already buffered, write_file of a short source used to return normally:
    the message then held fewer bytes than ``length`` said."""
    sink = io.BytesIO()
    writer = chunked.Writer(sink, key, device=device, batch_chunks=2)
    writer.write(b"head")
    with pytest.raises(aescl.TruncatedError, match="ended early"):
        writer.write_file(io.BytesIO(b"z" * (CHUNK + 5)), 3 * CHUNK)
    with pytest.raises(aescl.TruncatedError):
        writer.close()


@pytest.mark.parametrize("batch_chunks, error", [(0, ValueError), (-1, ValueError),
                                                 (1 << 17, ValueError), (1.5, TypeError),
                                                 (True, TypeError), ("8", TypeError)])
def test_a_bad_batch_size_is_refused_at_once_by_every_call(batch_chunks, error):
    """Writer(batch_chunks=0) used to hang in write(); Reader(batch_chunks=-1) rejected a
    valid message as truncated."""
    key, message = os.urandom(32), os.urandom(40000)
    sealed = chunked.encrypt(key, message, device="host")
    sink = io.BytesIO()
    calls = [
        lambda: chunked.encrypt(key, message, device="host", batch_chunks=batch_chunks),
        lambda: chunked.decrypt(key, sealed, device="host", batch_chunks=batch_chunks),
        lambda: chunked.Writer(sink, key, device="host", batch_chunks=batch_chunks),
        lambda: chunked.Reader(io.BytesIO(sealed), key, device="host",
                               batch_chunks=batch_chunks),
    ]
    for call in calls:
        with pytest.raises(error, match="batch_chunks"):
            call()
    assert sink.getvalue() == b""  # refused before the header was written


@pytest.mark.parametrize("offset, length", [(-1, 5), (5, -1), (1.0, 5), (None, 5)])
def test_decrypt_range_checks_its_numbers(offset, length):
    key = os.urandom(32)
    sealed = chunked.encrypt(key, b"x" * 100, device="host")
    with pytest.raises((ValueError, TypeError), match="offset|length"):
        chunked.decrypt_range(key, sealed, offset, length, device="host")


@pytest.mark.parametrize("size", [100, (2 << 20) + 7])
@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy"])
def test_a_plain_call_returns_new_bytes_for_every_kind_of_input(device, kind, size):
    """Bytes in, bytes out: the type pycryptodome returns, the reference's bytes, and a
    new object apart from the input (the result is written in place, BytesResult)."""
    key, salt, message = os.urandom(32), os.urandom(24), os.urandom(size)
    given = {"bytes": message, "bytearray": bytearray(message),
             "memoryview": memoryview(bytearray(message)),
             "numpy": np.frombuffer(message, np.uint8).copy()}[kind]
    sealed = chunked.encrypt(key, given, b"ctx", salt=salt, device=device)
    assert type(sealed) is bytes
    assert sealed == reference.encrypt(key, message, b"ctx", salt)
    opened = chunked.decrypt(key, sealed, b"ctx", device=device)
    assert type(opened) is bytes and opened == message and opened is not message
    raw = chunked.encrypt_raw(key, salt[:12], given, device=device)
    assert type(raw) is bytes and chunked.decrypt_raw(key, salt[:12], raw, device=device) \
        == message

