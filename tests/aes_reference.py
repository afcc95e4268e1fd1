"""A slow, obviously correct AES straight from FIPS-197, independent of aescl.

The S-box is computed from its definition (inverse in GF(2^8), then the affine
map), every step works on a 4x4 byte state, and nothing is table-driven, so a
table or layout mistake in aescl cannot be mirrored here.
"""

from __future__ import annotations


def _gf_mul(a: int, b: int) -> int:
    result = 0
    for _ in range(8):
        if b & 1:
            result ^= a
        carry = a & 0x80
        a = (a << 1) & 0xFF
        if carry:
            a ^= 0x1B
        b >>= 1
    return result


def _gf_inverse(a: int) -> int:
    return next((b for b in range(1, 256) if _gf_mul(a, b) == 1), 0)


def _affine(b: int) -> int:
    out = 0x63
    for shift in range(5):
        out ^= ((b << shift) | (b >> (8 - shift))) & 0xFF
    return out


SBOX = [_affine(_gf_inverse(x)) for x in range(256)]
INV_SBOX = [SBOX.index(x) for x in range(256)]


def key_expansion(key: bytes) -> list[bytes]:
    """FIPS-197 figure 11: the word list w[0 .. 4*(Nr+1)-1], each 4 bytes."""
    nk = len(key) // 4
    rounds = nk + 6
    words = [key[4 * i : 4 * i + 4] for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (rounds + 1)):
        temp = words[i - 1]
        if i % nk == 0:
            temp = bytes(SBOX[b] for b in temp[1:] + temp[:1])
            temp = bytes([temp[0] ^ rcon]) + temp[1:]
            rcon = _gf_mul(rcon, 2)
        elif nk > 6 and i % nk == 4:
            temp = bytes(SBOX[b] for b in temp)
        words.append(bytes(x ^ y for x, y in zip(words[i - nk], temp, strict=True)))
    return words


def _state(block: bytes) -> list[list[int]]:
    return [[block[r + 4 * c] for c in range(4)] for r in range(4)]


def _block(state: list[list[int]]) -> bytes:
    return bytes(state[r][c] for c in range(4) for r in range(4))


def _add_round_key(state: list[list[int]], words: list[bytes]) -> None:
    for c in range(4):
        for r in range(4):
            state[r][c] ^= words[c][r]


def _mix(state: list[list[int]], matrix: tuple[int, int, int, int]) -> None:
    for c in range(4):
        column = [state[r][c] for r in range(4)]
        for r in range(4):
            state[r][c] = 0
            for k in range(4):
                state[r][c] ^= _gf_mul(matrix[(k - r) % 4], column[k])


def encrypt_block(key: bytes, block: bytes) -> bytes:
    words = key_expansion(key)
    rounds = len(words) // 4 - 1
    state = _state(block)
    _add_round_key(state, words[0:4])
    for rnd in range(1, rounds + 1):
        state = [[SBOX[state[r][c]] for c in range(4)] for r in range(4)]
        state = [row[r:] + row[:r] for r, row in enumerate(state)]
        if rnd != rounds:
            _mix(state, (2, 3, 1, 1))
        _add_round_key(state, words[4 * rnd : 4 * rnd + 4])
    return _block(state)


def decrypt_block(key: bytes, block: bytes) -> bytes:
    words = key_expansion(key)
    rounds = len(words) // 4 - 1
    state = _state(block)
    _add_round_key(state, words[4 * rounds : 4 * rounds + 4])
    for rnd in range(rounds - 1, -1, -1):
        state = [row[-r:] + row[:-r] if r else row for r, row in enumerate(state)]
        state = [[INV_SBOX[state[r][c]] for c in range(4)] for r in range(4)]
        _add_round_key(state, words[4 * rnd : 4 * rnd + 4])
        if rnd != 0:
            _mix(state, (14, 11, 13, 9))
    return _block(state)
