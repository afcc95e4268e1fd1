"""aescl/ghash.py: GF(2^128) arithmetic on the host, in GCM's bit order.

The field laws are checked directly, the product and the fixed multiplier against
SP 800-38D's bit-serial Algorithm 1 (written out here), and GHASH against a
published value (McGrew and Viega's GCM specification, test case 2). The device half
is checked by the GCM vectors.
"""

from __future__ import annotations

import random

import pytest

from aescl import ghash

ONE = 1 << 127  # the element 1: only the coefficient of x^0, the top bit
X = 1 << 126


def _elements(count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) for _ in range(count)] + [0, ONE, X, 1, (1 << 128) - 1]


def _bit_serial_product(a: int, b: int) -> int:
    """SP 800-38D's Algorithm 1, bit by bit in GCM's order: the reference."""
    product = 0
    for bit in range(127, -1, -1):
        if (a >> bit) & 1:
            product ^= b
        b = ghash.times_x(b)
    return product


def test_the_product_is_sp_800_38ds_algorithm_1():
    for a in _elements(40, 11):
        for b in _elements(10, a & 0xFFFF):
            assert ghash.multiply(a, b) == _bit_serial_product(a, b)


def test_one_is_the_identity_and_zero_absorbs():
    for a in _elements(20, 1):
        assert ghash.multiply(a, ONE) == a
        assert ghash.multiply(ONE, a) == a
        assert ghash.multiply(a, 0) == 0


def test_multiplying_by_x_is_a_shift_with_reduction():
    for a in _elements(20, 2):
        assert ghash.multiply(a, X) == ghash.times_x(a)
    # x^127 · x = x^128 = 1 + x + x^2 + x^7
    assert ghash.times_x(1) == 0xE1 << 120


def test_field_laws():
    a_list, b_list, c_list = _elements(8, 3), _elements(8, 4), _elements(8, 5)
    for a, b, c in zip(a_list, b_list, c_list, strict=True):
        assert ghash.multiply(a, b) == ghash.multiply(b, a)
        assert ghash.multiply(a, b ^ c) == ghash.multiply(a, b) ^ ghash.multiply(a, c)
        assert ghash.multiply(ghash.multiply(a, b), c) == ghash.multiply(a, ghash.multiply(b, c))


def test_fixed_multiplier_and_tables_agree_with_the_bit_serial_product():
    for p in _elements(6, 6):
        times_p = ghash.FixedMultiplier(p)
        table = ghash.nibble_table(p)
        assert table[8] == p and table[0] == 0
        for a in _elements(10, p & 0xFFFF):
            assert times_p(a) == _bit_serial_product(a, p)
    assert ghash.nibble_table(ONE)[8] == ONE  # entry 8 of the table of 1 is 1 itself


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 7, 64, 1025])
def test_power_is_repeated_multiplication(exponent):
    h = random.Random(exponent).getrandbits(128)
    expected = ONE
    for _ in range(exponent):
        expected = _bit_serial_product(expected, h)
    assert ghash.power(h, exponent) == expected


def test_power_multipliers_give_the_same_powers_from_their_list_and_beyond_it():
    """PowerMultipliers keeps a list of the first powers and squares and multiplies for
    larger ones: the same values either way, asked in any order."""
    h = random.Random(9).getrandbits(128)
    multipliers = ghash.PowerMultipliers(h)
    for exponent in (1024, 3, 33, 32, 0, 40, 5000, 31, 2**26):
        assert multipliers.power(exponent) == ghash.power(h, exponent), exponent
    assert multipliers.times_power(X, 1024) == ghash.multiply(X, ghash.power(h, 1024))


def test_a_running_ghash_adds_whole_blocks_as_the_partial_sum_of_them_would():
    """absorb_blocks (a product a block, on the host) leaves the value that absorbing the
    blocks' partial sum leaves, after a value already there, and GHASH's own."""
    rng = random.Random(11)
    h = rng.getrandbits(128)
    data = rng.randbytes(16 * 7)
    by_blocks, by_sum = (ghash.RunningGhash(ghash.PowerMultipliers(h)) for _ in range(2))
    by_blocks.value = by_sum.value = X
    by_blocks.absorb_blocks(data[:48])
    by_blocks.absorb_blocks(data[48:])
    by_sum.absorb_partial_sum(ghash.ghash(h, data), 7)
    assert by_blocks.value == by_sum.value != X
    fresh = ghash.RunningGhash(ghash.PowerMultipliers(h))
    fresh.absorb_blocks(data)
    assert fresh.value == ghash.ghash(h, data)


def test_ghash_matches_the_gcm_specification():
    # McGrew & Viega, "The Galois/Counter Mode of Operation", test case 2.
    h = ghash.block_to_int(bytes.fromhex("66e94bd4ef8a2c3b884cfa59ca342b2e"))
    ciphertext = bytes.fromhex("0388dace60b6a392f328c2b971b2fe78")
    value = ghash.multiply(ghash.ghash(h, ciphertext) ^ ghash.length_block(0, 16), h)
    assert ghash.int_to_block(value).hex() == "f38cbb1ad69223dcc3457ae5b6b0f885"


def test_the_counter_counts_in_its_last_32_bits_and_wraps_without_carrying():
    nonce = bytes(range(12))
    assert ghash.counter_block(nonce + b"\0\0\0\1", 0) == nonce + b"\0\0\0\1"
    assert ghash.counter_block(nonce + b"\0\0\0\1", 256) == nonce + b"\0\0\1\1"
    assert ghash.counter_block(nonce + b"\xff\xff\xff\xfe", 3) == nonce + b"\0\0\0\1"


def test_initial_counter_for_96_bit_and_other_nonces():
    h = random.Random(7).getrandbits(128)
    nonce = bytes(range(12))
    assert ghash.initial_counter(h, nonce) == nonce + b"\0\0\0\1"
    long_nonce = bytes(range(20))
    expected = ghash.multiply(ghash.ghash(h, long_nonce) ^ ghash.length_block(0, 20), h)
    assert ghash.initial_counter(h, long_nonce) == ghash.int_to_block(expected)
