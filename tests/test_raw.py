"""aescl/raw.py: headerless streams (openssl enc's format) against pycryptodome."""

from __future__ import annotations

import io
import os

import pytest
from Crypto.Cipher import AES
from Crypto.Util.Padding import pad as reference_pad

import aescl
from aescl import raw

# The public API only: these run on the host engine and on a split job too (conftest).
RUNS_ON_ENGINES = True


class TrickleReader(io.RawIOBase):
    """A source that returns at most 7 bytes per read, like a slow pipe."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = 7 if size < 0 else min(size, 7)
        part = self._data[self._at : self._at + size]
        self._at += len(part)
        return part


def run(data: bytes, **kwargs) -> bytes:
    sink = io.BytesIO()
    written = raw.transform(io.BytesIO(data), sink, **kwargs)
    assert written == len(sink.getvalue())
    return sink.getvalue()


LENGTHS = [0, 1, 15, 16, 17, 31, 32, 33, 100, 1000]


@pytest.mark.parametrize("chunk_bytes", [16, 48, raw.DEFAULT_CHUNK_BYTES])
def test_ctr_matches_openssl_semantics(device, chunk_bytes):
    for size in (16, 24, 32):
        key, iv = os.urandom(size), os.urandom(16)
        for length in LENGTHS:
            data = os.urandom(length)
            expected = AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)
            out = run(data, key=key, mode="ctr", iv=iv, decrypt=False, device=device,
                      chunk_bytes=chunk_bytes)
            assert out == expected, (size, length)
            back = run(out, key=key, mode="ctr", iv=iv, decrypt=True, device=device,
                       chunk_bytes=chunk_bytes)
            assert back == data


@pytest.mark.parametrize("chunk_bytes", [16, 48, raw.DEFAULT_CHUNK_BYTES])
def test_ecb_with_pkcs7_padding(device, chunk_bytes):
    for size in (16, 24, 32):
        key = os.urandom(size)
        for length in LENGTHS:
            data = os.urandom(length)
            expected = AES.new(key, AES.MODE_ECB).encrypt(reference_pad(data, 16))
            out = run(data, key=key, mode="ecb", decrypt=False, device=device,
                      chunk_bytes=chunk_bytes)
            assert out == expected, (size, length)
            assert run(out, key=key, mode="ecb", decrypt=True, device=device,
                       chunk_bytes=chunk_bytes) == data


def test_output_size_bound_covers_what_is_written(device, tmp_path):
    key, iv = os.urandom(16), os.urandom(16)
    path = tmp_path / "in"
    for length in LENGTHS:
        plain = os.urandom(length)
        sealed_ecb = run(plain, key=key, mode="ecb", decrypt=False, device=device)
        cases = [("ctr", False, plain), ("ctr", True, plain), ("ecb", False, plain),
                 ("ecb", True, sealed_ecb)]
        for mode, decrypt, data in cases:
            path.write_bytes(data)
            with path.open("rb") as source:
                bound = raw.output_size_bound(source, decrypt)
                out = io.BytesIO()
                raw.transform(source, out, key=key, mode=mode, decrypt=decrypt,
                              iv=iv if mode == "ctr" else None, device=device)
            written = len(out.getvalue())
            assert written <= bound <= written + 16, (length, mode, decrypt)
    assert raw.output_size_bound(io.BytesIO(b"pipe"), decrypt=True) is None


def test_ecb_without_padding_needs_whole_blocks(device):
    key, data = os.urandom(16), os.urandom(64)
    out = run(data, key=key, mode="ecb", decrypt=False, pad=False, device=device, chunk_bytes=32)
    assert out == AES.new(key, AES.MODE_ECB).encrypt(data)
    with pytest.raises(ValueError, match="whole number of 16-byte blocks"):
        run(data[:-1], key=key, mode="ecb", decrypt=False, pad=False, device=device)


def test_short_reads_from_a_pipe_are_handled(device):
    key, iv = os.urandom(16), os.urandom(16)
    data = os.urandom(333)
    sink = io.BytesIO()
    raw.transform(TrickleReader(data), sink, key=key, mode="ecb", decrypt=False, device=device,
                  chunk_bytes=64)
    assert sink.getvalue() == AES.new(key, AES.MODE_ECB).encrypt(reference_pad(data, 16))
    sink = io.BytesIO()
    raw.transform(TrickleReader(data), sink, key=key, mode="ctr", iv=iv, decrypt=False,
                  device=device, chunk_bytes=64)
    assert sink.getvalue() == AES.new(key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(data)


def test_a_wrong_key_is_reported_as_bad_padding(device):
    ciphertext = run(b"secret message", key=bytes(16), mode="ecb", decrypt=False, device=device)
    with pytest.raises(aescl.errors.PaddingError):
        run(ciphertext, key=b"\x01" * 16, mode="ecb", decrypt=True, device=device)


@pytest.mark.parametrize("unpadded", [b"", bytes(15), bytes(16), bytes(15) + b"\x11",
                                      bytes(14) + b"\x01\x02"])
def test_pkcs7_unpad_rejects_what_is_not_padding(unpadded):
    with pytest.raises(aescl.errors.PaddingError):
        raw.pkcs7_unpad(unpadded)


def test_bad_parameters():
    with pytest.raises(ValueError, match="16-byte IV"):
        raw.transform(io.BytesIO(), io.BytesIO(), key=bytes(16), mode="ctr", decrypt=False)
    with pytest.raises(ValueError, match="ECB takes no IV"):
        raw.transform(io.BytesIO(), io.BytesIO(), key=bytes(16), mode="ecb", decrypt=False,
                      iv=bytes(16))
    with pytest.raises(ValueError, match="raw mode must be"):
        raw.transform(io.BytesIO(), io.BytesIO(), key=bytes(16), mode="cbc", decrypt=False)
