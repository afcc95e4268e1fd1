"""GF(2^128) arithmetic as GCM defines it (NIST SP 800-38D), on the host.

The device computes GHASH over bulk data (``cl/ghash.cl``); the host does the
small, once-per-key or once-per-call parts: H and its powers, folding the
kernels' partial sums together, and the GHASH of a nonce that is not 96 bits
long. The kernels' multiplication tables are built on the device from H
(``ghash_power_tables``); :func:`nibble_table` defines their entries.

A field element is a Python ``int``: the 16-byte block read as a big-endian
integer. GCM numbers the bits the other way round (the coefficient of x^0 is the
top bit of the first byte), so multiplying by x is a right shift.
"""

from __future__ import annotations

import hmac
from functools import lru_cache
from typing import Any

from .errors import AuthenticationError, CounterOverflowError, as_bytes

BLOCK_SIZE = 16
_REDUCTION = 0xE1 << 120  # x^128 = x^7 + x^2 + x + 1, in GCM's bit order
_MASK64 = (1 << 64) - 1


def block_to_int(block: bytes) -> int:
    return int.from_bytes(block, "big")


def int_to_block(value: int) -> bytes:
    return value.to_bytes(BLOCK_SIZE, "big")


def _blocks_on_the_host(key: bytes) -> Any:
    """AES-ECB under ``key`` on the host (OpenSSL, through ``cryptography``): a few
    blocks a call, for which a device is a round trip that waits for the work queued
    before it. Its set-up is 5 µs where pycryptodome's took 15, and a device-array
    call makes one before its first launch (docs/benchmarks, 2026-11-26)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    return Cipher(algorithms.AES(bytes(key)), modes.ECB()).encryptor()


def encrypt_block(key: bytes, block: bytes) -> bytes:
    """E(block) under ``key``, on the host."""
    return _blocks_on_the_host(key).update(block)


def hash_subkey(key: bytes) -> int:
    """GCM's hash subkey H = E(0^128) under ``key``, made on the host."""
    return block_to_int(encrypt_block(key, bytes(BLOCK_SIZE)))


def hash_subkey_and_tag_mask(key: bytes, nonce: bytes) -> tuple[int, bytes]:
    """H and E(J0) of one message, made on the host: two blocks, for which a device
    or the host engine's scheduler would cost more than the blocks (1 ms a message
    through the host engine on the H100 host)."""
    blocks = _blocks_on_the_host(key)
    h = block_to_int(blocks.update(bytes(BLOCK_SIZE)))
    return h, blocks.update(initial_counter(h, nonce))


def times_x(value: int) -> int:
    """Multiply by x: shift toward the high-degree end, reducing what falls off."""
    return (value >> 1) ^ (_REDUCTION if value & 1 else 0)


# The product is computed in the usual bit order (x^0 in bit 0), where a carry-less
# product is shifts and XORs of whole Python ints: 4 bits of one factor at a time
# against the other's 16 multiples: 7 µs a product where bit by bit in GCM's order took
# 30 (90 under the profiler on the H100 host), and a power of H for 1 GiB of text takes
# 27 of them, after the GPU's work.
_BYTE_REVERSED = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))
_MASK128 = (1 << 128) - 1


def _reflect(value: int) -> int:
    """The element with its 128 bits in the other order (GCM's to the usual, and back)."""
    return int.from_bytes(value.to_bytes(BLOCK_SIZE, "big").translate(_BYTE_REVERSED), "little")


def _multiples(b: int) -> list[int]:
    """b (usual order) times each polynomial of degree below 4, unreduced."""
    table = [0] * 16
    for n in range(1, 16):
        low = n & -n  # the lowest term of n, and the rest
        table[n] = table[n ^ low] ^ (b << (low.bit_length() - 1))
    return table


def _product(a: int, multiples: list[int]) -> int:
    """a·b reduced, both in the usual order, from b's :func:`_multiples`."""
    product, shift = 0, 0
    while a:
        product ^= multiples[a & 15] << shift
        a >>= 4
        shift += 4
    for _ in range(2):  # x^128 = x^7 + x^2 + x + 1; the second pass takes what the first
        high = product >> 128  # pushed past x^127
        product = (product & _MASK128) ^ high ^ (high << 1) ^ (high << 2) ^ (high << 7)
    return product


def multiply(a: int, b: int) -> int:
    """The product a·b in GF(2^128) as SP 800-38D defines it."""
    return _reflect(_product(_reflect(a), _multiples(_reflect(b))))


def power(h: int, exponent: int) -> int:
    """h^exponent, by square-and-multiply (exponent >= 0)."""
    result = 1 << 127  # the element 1: coefficient of x^0 only
    while exponent:
        if exponent & 1:
            result = multiply(result, h)
        h = multiply(h, h)
        exponent >>= 1
    return result


def nibble_table(p: int) -> list[int]:
    """The 16 products the kernels' 4-bit multiplication by ``p`` looks up.

    Entry n is P times the polynomial whose coefficients of x^0..x^3 are the
    bits of n from the top (8) down (1): a block's nibbles have their first
    coefficient in the high bit, like its bytes.
    """
    single = [p]  # p·x^0 .. p·x^3
    for _ in range(3):
        single.append(times_x(single[-1]))
    table = [0] * 16
    for n in range(1, 16):
        for k in range(4):
            if n & (8 >> k):
                table[n] ^= single[k]
    return table


class FixedMultiplier:
    """Multiplication by one element, with its multiples kept, for repeated use on the host."""

    def __init__(self, p: int) -> None:
        self._multiples = _multiples(_reflect(p))

    def __call__(self, x: int) -> int:
        return _reflect(_product(_reflect(x), self._multiples))


def ghash(h: int, data: bytes) -> int:
    """GHASH_H over ``data`` zero-padded to whole blocks (host reference, for short inputs)."""
    y = 0
    padded = data + bytes(-len(data) % BLOCK_SIZE)
    for start in range(0, len(padded), BLOCK_SIZE):
        y = multiply(y ^ block_to_int(padded[start : start + BLOCK_SIZE]), h)
    return y


def length_block(aad_bytes: int, text_bytes: int) -> int:
    """The final GHASH block: the bit lengths of the AAD and the text, 64 bits each."""
    return ((8 * aad_bytes) << 64) | (8 * text_bytes)


def initial_counter(h: int, nonce: bytes) -> bytes:
    """J0: ``nonce || 1`` for a 96-bit nonce, otherwise GHASH of the padded nonce and its length."""
    if len(nonce) == 12:
        return nonce + b"\x00\x00\x00\x01"
    return int_to_block(multiply(ghash(h, nonce) ^ length_block(0, len(nonce)), h))


def counter_block(j0: bytes, steps: int) -> bytes:
    """inc32 applied ``steps`` times to J0: the last 32 bits (big-endian) count, and wrap
    without carrying into the nonce (SP 800-38D); cl/aes_gcm.cl's gcm_counter."""
    return j0[:12] + ((int.from_bytes(j0[12:], "big") + steps) % 2**32).to_bytes(4, "big")


@lru_cache(maxsize=64)
def inverse(h: int) -> int:
    """h^-1 (h nonzero): h^(2^128 - 2), the multiplicative group having 2^128 - 1 elements."""
    return power(h, 2**128 - 2)


def fold_on_device(outer: int, last: int, segment_blocks: int, last_blocks: int,
                   multipliers: PowerMultipliers) -> int:
    """The partial sum of n segments from two values a device folded: ``last``, the last
    segment's partial sum (``last_blocks`` blocks), and ``outer``, GHASH by powers of
    H^segment_blocks over the partial sums p_0..p_(n-2) of the others, which is
    sum p_i·H^(segment_blocks·(n-1-i)). The segments' sum wants each p_i times
    H^(segment_blocks·(n-2-i) + last_blocks): ``outer`` times H^(last_blocks -
    segment_blocks), a power of H^-1 when the last segment is shorter."""
    if not outer:
        return last
    short = segment_blocks - last_blocks
    if short:
        outer = multiply(outer, power(inverse(multipliers.h), short))
    return outer ^ last


class PowerMultipliers:
    """v·H^n for one H: the powers, and a multiplier table for each exponent in use."""

    def __init__(self, h: int) -> None:
        self.h = h
        self.times_h = FixedMultiplier(h)
        self._powers = [1 << 127, h]  # H^0, H^1, ... as far as needed so far
        self._multipliers: dict[int, FixedMultiplier] = {}

    def power(self, exponent: int) -> int:
        """H^exponent: up to H^32 from a list kept per key, grown a product at a time;
        beyond, by square-and-multiply (with products bit by bit, growing the list to
        H^1024 took 30 ms, and square-and-multiply 0.5 ms)."""
        if exponent >= len(self._powers) and exponent > 32:
            return power(self.h, exponent)
        while len(self._powers) <= exponent:
            self._powers.append(self.times_h(self._powers[-1]))
        return self._powers[exponent]

    def times_power(self, value: int, exponent: int) -> int:
        """value·H^exponent, with a multiplier table kept for each exponent used."""
        if not value:  # (no power to make: GHASH's value before any AAD, for one)
            return 0
        multiplier = self._multipliers.get(exponent)
        if multiplier is None:
            if len(self._multipliers) > 64:
                self._multipliers.clear()
            multiplier = self._multipliers[exponent] = FixedMultiplier(self.power(exponent))
        return multiplier(value)


# Runs of up to this many whole blocks are hashed on the host in a GCM cipher over host
# data (AAD, and short texts): a product takes 6-10 µs in Python, where a device's GHASH
# of a run is a launch, two more for a new key's tables, and a wait. A call with 16
# blocks of AAD and 16 of text: 2.4 ms on the CI kind's PoCL with every run on the
# device, 1.0 with these on the host; on the H200's NVIDIA OpenCL, even (docs/benchmarks,
# "Short GHASH runs").
HOST_RUN_BLOCKS = 16


def hashed_on_the_host(nbytes: int) -> bool:
    """Whether ``nbytes`` of AAD or text in host memory are few enough to hash on the
    host: :data:`HOST_RUN_BLOCKS` blocks at most."""
    return nbytes <= HOST_RUN_BLOCKS * BLOCK_SIZE


class RunningGhash:
    """The GHASH of one GCM message fed in pieces, up to its tag: the AAD, then the text,
    as bytes (a block split between pieces waits in ``pending``) or as the partial sums
    of whole runs of blocks that a device computed."""

    def __init__(self, multipliers: PowerMultipliers) -> None:
        self._multipliers = multipliers
        self.value = 0
        self.pending = bytearray()  # bytes of a block not yet complete
        self.aad_bytes = 0
        self.text_bytes = 0

    def absorb_block(self, block: int) -> None:
        self.value = self._multipliers.times_h(self.value ^ block)

    def absorb_pending(self, data: bytes) -> bytes:
        """Add bytes to the pending block; returns what is left after completing it."""
        if not self.pending:
            return data
        take = BLOCK_SIZE - len(self.pending)
        self.pending += data[:take]
        if len(self.pending) == BLOCK_SIZE:
            self.absorb_block(block_to_int(self.pending))
            self.pending.clear()
        return data[take:]

    def absorb_blocks(self, data: bytes) -> None:
        """Add whole blocks of ``data`` (no block may be pending), a product each on the
        host: :data:`HOST_RUN_BLOCKS` blocks or so, where a device's GHASH is a round trip."""
        times_h, value = self._multipliers.times_h, self.value
        for start in range(0, len(data), BLOCK_SIZE):
            value = times_h(value ^ int.from_bytes(data[start : start + BLOCK_SIZE], "big"))
        self.value = value

    def absorb_bytes(self, data: bytes) -> None:
        """Add bytes in host memory, a product per block on the host (a short run:
        :func:`hashed_on_the_host`); a block they leave incomplete waits in ``pending``.
        The caller counts them (``aad_bytes`` or ``text_bytes``)."""
        rest = self.absorb_pending(data)
        whole = len(rest) - len(rest) % BLOCK_SIZE
        self.absorb_blocks(rest[:whole])
        self.pending += rest[whole:]

    def absorb_partial_sum(self, partial: int, blocks: int) -> None:
        """Add ``blocks`` whole blocks by their partial sum (no block may be pending)."""
        self.value = self._multipliers.times_power(self.value, blocks) ^ partial

    def close_pending(self) -> None:
        """Zero-pad the pending block into the hash (the end of the AAD or the text)."""
        if self.pending:
            self.absorb_block(block_to_int(self.pending.ljust(BLOCK_SIZE, b"\0")))
            self.pending.clear()

    def tag(self, mask: bytes) -> bytes:
        """The full 16-byte tag: the length block absorbed, then XORed with E(J0)."""
        self.close_pending()
        self.absorb_block(length_block(self.aad_bytes, self.text_bytes))
        return int_to_block(self.value ^ block_to_int(mask))


MAX_TEXT_BYTES = (2**32 - 2) * BLOCK_SIZE  # SP 800-38D: 2^39 - 256 bits of text at most


class GcmTagCalls:
    """The phases and the tag end of an engine's GCM stream, over a :class:`RunningGhash`:
    the start of the text (the AAD's last block closed), ``digest`` and ``verify``. A
    cipher object sets ``_ghash``, ``_tag_mask`` (E(J0)), ``_mac_len`` and ``_phase``
    ("aad", "encrypt", "decrypt" -> "done"). The order of the calls is checked once, for
    every engine, by the object that drives this one (aescl.modes.GcmCipher), never here."""

    _ghash: RunningGhash
    _tag_mask: bytes
    _mac_len: int
    _phase: str
    _tag: bytes | None = None

    def _start_text(self, direction: str, length: int) -> int:
        """Enter (or stay in) the ``direction`` phase for ``length`` more bytes of text;
        returns the bytes of text before them. The AAD's last block is closed first."""
        if self._phase == "aad":
            self._ghash.close_pending()  # AAD is zero-padded to a whole block
            self._phase = direction
        start = self._ghash.text_bytes
        if start + length > MAX_TEXT_BYTES:
            raise CounterOverflowError("Plaintext exceeds maximum length")
        return start

    def _compute_tag(self) -> bytes:
        if self._tag is None:
            self._tag = self._ghash.tag(self._tag_mask)[: self._mac_len]
            self._phase = "done"
        return self._tag

    def digest(self) -> bytes:
        """The authentication tag (``mac_len`` bytes) of the AAD and the encrypted text."""
        return self._compute_tag()

    def verify(self, received_mac_tag: bytes) -> None:
        """Check a tag; raises :class:`AuthenticationError` ("MAC check failed") if wrong."""
        if not hmac.compare_digest(self._compute_tag(),
                                   as_bytes(received_mac_tag, "the MAC tag")):
            raise AuthenticationError("MAC check failed")
