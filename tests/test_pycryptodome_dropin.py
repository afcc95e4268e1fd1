"""aescl.new as a drop-in for ``Crypto.Cipher.AES.new`` (aescl/modes.py): the same calls
run against both libraries give the same output, or the same kind of error."""

from __future__ import annotations

import os

import pytest
from Crypto.Cipher import AES
from Crypto.Util import Counter

import aescl

RUNS_ON_ENGINES = True  # each OpenCL device, the host engine, and a split job (conftest)

KEY = bytes(range(32))
DATA = os.urandom(5000)
NONCE8, NONCE12, NONCE16 = b"n" * 8, b"twelve bytes", b"sixteen bytes..."

# (mode and positional arguments, keyword arguments): as a pycryptodome 4.x program
# writes them, good and bad.
CALLS = [
    ((AES.MODE_ECB,), {}),
    ((AES.MODE_ECB,), {"use_aesni": False}),
    ((AES.MODE_ECB,), {"use_clmul": False}),
    ((AES.MODE_ECB,), {"threads": 2}),
    ((AES.MODE_ECB, NONCE8), {}),
    ((AES.MODE_ECB,), {"nonce": NONCE8}),
    ((AES.MODE_CTR,), {"nonce": NONCE8}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "initial_value": 7}),
    ((AES.MODE_CTR,), {"nonce": b"", "initial_value": NONCE16}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": 0}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": 3}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": -1}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": 1.5}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": None}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": True}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "threads": -8}),
    ((AES.MODE_ECB,), {"threads": 0}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "use_aesni": False}),
    ((AES.MODE_CTR,), {"nonce": NONCE8, "use_clmul": False}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=NONCE8)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=NONCE8, initial_value=2**64 - 3)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(128, initial_value=12345)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(32, prefix=NONCE12, initial_value=0)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=b"p" * 4)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=b"p" * 4, suffix=b"s" * 4)}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=NONCE8, little_endian=True)}),
    ((AES.MODE_CTR,), {"counter": {"not": "a counter"}}),
    ((AES.MODE_CTR,), {"counter": Counter.new(64, prefix=NONCE8), "nonce": NONCE8}),
    ((AES.MODE_CTR, NONCE8), {}),
    ((AES.MODE_CTR,), {"nonce": NONCE16}),
    ((AES.MODE_GCM, NONCE12), {}),
    ((AES.MODE_GCM, NONCE16), {"mac_len": 12}),
    ((AES.MODE_GCM, NONCE12), {"nonce": NONCE16}),
    ((AES.MODE_GCM, NONCE12, NONCE12), {}),
    ((AES.MODE_GCM,), {"nonce": NONCE12, "use_aesni": False, "use_clmul": False}),
    ((AES.MODE_GCM,), {"nonce": NONCE12, "threads": 0}),
    ((AES.MODE_GCM,), {"nonce": NONCE12, "threads": 2}),
    ((AES.MODE_GCM,), {"nonce": NONCE12, "initial_value": 1}),
    ((AES.MODE_GCM,), {"nonce": NONCE12, "mac_len": 3}),
    ((AES.MODE_GCM,), {"nonce": b""}),
]


def _outcome(mode, make):
    """What a ``mode`` cipher from ``make()`` gives for DATA (with the tag, for GCM), or
    the type of the error it raises."""
    try:
        cipher = make()
        if mode == AES.MODE_ECB:
            return cipher.encrypt(DATA[:4992])
        if mode == AES.MODE_GCM:
            cipher.update(b"header")
            return cipher.encrypt_and_digest(DATA)
        return cipher.encrypt(DATA)
    except (TypeError, ValueError, OverflowError) as exc:
        return type(exc)


@pytest.mark.parametrize(("args", "kwargs"), CALLS,
                         ids=[f"{a[0]}-{len(a) - 1}-{'-'.join(k) or 'plain'}" for a, k in CALLS])
def test_the_same_call_gives_the_same_result(device, args, kwargs):
    theirs = _outcome(args[0], lambda: AES.new(KEY, *args, **kwargs))
    ours = _outcome(args[0], lambda: aescl.new(KEY, *args, **kwargs, device=device))
    if isinstance(theirs, type):
        assert isinstance(ours, type) and issubclass(ours, theirs), (ours, theirs)
    else:
        assert ours == theirs


def test_made_nonces_are_as_long_as_pycryptodome_makes_them(device):
    for mode in (AES.MODE_CTR, AES.MODE_GCM):
        ours = aescl.new(KEY, mode, device=device)
        assert len(ours.nonce) == len(AES.new(KEY, mode).nonce)
        # ...and a pycryptodome program can decrypt with it.
        theirs = AES.new(KEY, mode, nonce=ours.nonce)
        assert theirs.decrypt(ours.encrypt(DATA)) == DATA


@pytest.mark.parametrize("counter", [
    dict(nbits=64, prefix=b"p" * 4, suffix=b"s" * 4),
    dict(nbits=64, prefix=NONCE8, little_endian=True),
    dict(nbits=32, prefix=b"p" * 4, suffix=b"s" * 8, initial_value=2**32 - 70),  # wraps
    dict(nbits=16, prefix=b"p" * 6, suffix=b"s" * 8, little_endian=True, initial_value=65000),
    dict(nbits=128, little_endian=True, initial_value=2**64 - 2),  # a carry past 64 bits
    dict(nbits=72, suffix=b"s" * 7, initial_value=2**64 - 1),
], ids=["suffix", "little-endian", "suffix-wraps", "both", "128-le-carry", "72-suffix"])
def test_a_counter_with_any_layout_gives_pycryptodomes_bytes(device, counter):
    """prefix || counter || suffix, big- or little-endian: the counter blocks are made on
    the host and encrypted as ECB on the device (aescl/modes.py, _CounterBlocks)."""
    data = os.urandom(3 * 16 * 1500 + 5)
    expected = AES.new(KEY, AES.MODE_CTR, counter=Counter.new(**counter)).encrypt(data)
    ours = aescl.new(KEY, AES.MODE_CTR, counter=Counter.new(**counter), device=device)
    pieces = [data[:7], data[7:40000], data[40000:]]  # split inside blocks, as fed
    assert b"".join(ours.encrypt(piece) for piece in pieces) == expected
    again = aescl.new(KEY, AES.MODE_CTR, counter=Counter.new(**counter), device=device)
    again.seek(40000)
    assert again.decrypt(expected[40000:]) == data[40000:]
    assert hasattr(ours, "nonce") == ("suffix" not in counter)  # as in pycryptodome


def test_threads_limits_the_host_engine(monkeypatch):
    """threads=N runs the host engine's job on at most N threads (the caller's and
    N - 1 helpers); the output does not depend on it."""
    from aescl.engines.host import engine as host

    seen = []
    real = host._on_threads
    monkeypatch.setattr(host, "_on_threads",
                        lambda threads, *rest: seen.append(threads) or real(threads, *rest))
    data = os.urandom(3 << 20)
    outputs = {threads: aescl.new(KEY, AES.MODE_CTR, nonce=NONCE8, threads=threads,
                                  device="host").encrypt(data) for threads in (1, 2, 0)}
    cores = aescl.get_device("host").compute_units
    assert seen == [1, min(2, cores), cores]
    assert len(set(outputs.values())) == 1
