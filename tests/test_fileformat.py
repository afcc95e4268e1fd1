"""aescl/fileformat.py: the file header, key sources and scrypt limits."""

from __future__ import annotations

import io
import os

import pytest

import aescl
from aescl import chunked, fileformat

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True


def _round_trip(device, **key_source) -> None:
    message = os.urandom(chunked.CHUNK_SIZE + 5)
    sealed = io.BytesIO()
    fileformat.encrypt_stream(io.BytesIO(message), sealed, device=device, work_factor=10,
                              **key_source)
    out = io.BytesIO()
    passphrase = key_source.get("passphrase")
    fileformat.decrypt_stream(io.BytesIO(sealed.getvalue()), out, key=key_source.get("key"),
                              passphrase=(lambda: passphrase) if passphrase else None,
                              device=device)
    assert out.getvalue() == message


def test_round_trips_with_key_and_passphrase(device):
    _round_trip(device, key=os.urandom(32))
    _round_trip(device, passphrase=b"pass phrase")


@pytest.mark.parametrize("length", [0, 1, chunked.CHUNK_SIZE - 1, chunked.CHUNK_SIZE,
                                    3 * chunked.CHUNK_SIZE + 7])
def test_output_size_bound_covers_what_is_written(device, tmp_path, length):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x" * 5 + os.urandom(length))
    for key_source in ({"key": os.urandom(32)}, {"passphrase": b"pass phrase"}):
        sealed = io.BytesIO()
        with plain.open("rb") as source:
            source.read(5)  # the bound counts from the position on
            bound = fileformat.output_size_bound(source, decrypt=False)
            fileformat.encrypt_stream(source, sealed, device=device, work_factor=10,
                                      **key_source)
        written = len(sealed.getvalue())
        # exact for a passphrase header, the longer kind
        assert bound == written if "passphrase" in key_source else bound > written
        (tmp_path / "sealed").write_bytes(sealed.getvalue())
        with (tmp_path / "sealed").open("rb") as source:
            assert fileformat.output_size_bound(source, decrypt=True) == written >= length
    assert fileformat.output_size_bound(io.BytesIO(b"not a file"), decrypt=False) is None


def test_header_layout_and_binding(device):
    header = fileformat.Header.new(fileformat.PASSPHRASE, work_factor=12)
    encoded = header.encode()
    assert encoded[:6] == b"aescl\0" and encoded[6:8] == bytes([1, fileformat.PASSPHRASE])
    assert encoded[8:11] == bytes([12, 8, 1]) and len(encoded) == 11 + 16
    assert fileformat.Header.read(io.BytesIO(encoded)) == header
    # The header is the payload's context: a changed scrypt salt is a wrong key.
    key = os.urandom(32)
    sealed = io.BytesIO()
    fileformat.encrypt_stream(io.BytesIO(b"data"), sealed, key=key, device=device)
    assert sealed.getvalue()[:8] == b"aescl\0\x01\x01"
    with pytest.raises(aescl.WrongKeyError):
        chunked.decrypt(key, sealed.getvalue()[8:], b"other header", device=device)


@pytest.mark.parametrize("params", [(23, 8, 1), (20, 64, 1), (22, 32, 1), (14, 8, 17), (0, 8, 1),
                                    (20, 8, 16), (20, 32, 1), (14, 16, 2),
                                    (14, 0, 1)])
def test_absurd_scrypt_parameters_are_refused_before_any_work(params):
    encoded = b"aescl\0\x01\x02" + bytes(params) + bytes(16)
    with pytest.raises(aescl.FormatError, match="refusing scrypt"):
        fileformat.Header.read(io.BytesIO(encoded))


@pytest.mark.parametrize("data, error", [
    (b"", aescl.TruncatedError), (b"aes", aescl.TruncatedError),
    (b"PK\x03\x04zip", aescl.FormatError), (b"aescl\0\x02\x01", aescl.FormatError),
    (b"aescl\0\x01\x09", aescl.FormatError), (b"aescl\0\x01\x02\x0e", aescl.TruncatedError),
])
def test_bad_headers(data, error):
    with pytest.raises(error):
        fileformat.Header.read(io.BytesIO(data))


def test_key_files(tmp_path):
    key = os.urandom(32)
    raw, hexed, bad = tmp_path / "raw", tmp_path / "hex", tmp_path / "bad"
    raw.write_bytes(key)
    hexed.write_text(key.hex().upper() + "\r\n")
    bad.write_text("00" * 31)
    assert fileformat.read_key_file(raw) == key
    assert fileformat.read_key_file(hexed) == key
    with pytest.raises(aescl.FormatError, match="64 hex digits"):
        fileformat.read_key_file(bad)
    made = tmp_path / "new.key"
    fileformat.write_new_key_file(made)
    assert len(fileformat.read_key_file(made)) == 32
    with pytest.raises(FileExistsError):
        fileformat.write_new_key_file(made)


def test_a_key_source_keeps_its_rules_and_asks_once(tmp_path):
    """fileformat.KeySource: one kind of key; encrypting needs one; the passphrase is
    read once for every file, and only when a file needs it."""
    key_file = tmp_path / "k.key"
    fileformat.write_new_key_file(key_file)
    asked: list[bool] = []

    def passphrase(confirm: bool) -> bytes:
        asked.append(confirm)
        return b"correct horse"

    with pytest.raises(aescl.KeySourceError, match="choose one key"):
        fileformat.KeySource(str(key_file), passphrase)
    with pytest.raises(aescl.KeySourceError, match="choose a key"):
        fileformat.KeySource(None, None).for_encrypting()
    (tmp_path / "bogus.key").write_text("not hex")
    with pytest.raises(aescl.KeySourceError, match="not a key file"):
        fileformat.KeySource(str(tmp_path / "bogus.key"), None)
    sealing = fileformat.KeySource(None, passphrase, work_factor=10)
    first, second = sealing.for_encrypting(), sealing.for_encrypting()
    assert first is second and asked == [True]  # one prompt, one scrypt run
    sealed = io.BytesIO()
    fileformat.encrypt_payload(io.BytesIO(b"data"), sealed, first, device="host")
    opening = fileformat.KeySource(None, passphrase)
    for _ in range(2):
        sealed.seek(0)
        assert opening.for_decrypting().read(sealed).key == first.key
    assert asked == [True, False]  # asked once more, to open, not twice
    by_key = fileformat.KeySource(str(key_file), None).for_decrypting()
    sealed.seek(0)
    with pytest.raises(aescl.KeySourceError, match="passphrase"):
        by_key.read(sealed)
