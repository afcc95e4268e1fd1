"""AES key expansion on the host (FIPS-197 section 5.2) and the kernels' word layout.

Words follow FIPS-197: ``w[i]`` is four key bytes read big-endian, so the
Appendix A tables can be checked word for word. The kernels instead hold each
state column as a little-endian ``uint`` (row 0 in the low byte), because that is
what a plain 32-bit load of the byte stream gives on every little-endian device;
:func:`encryption_round_keys` and :func:`decryption_round_keys` convert to it.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

BLOCK_SIZE = 16
KEY_SIZES = (16, 24, 32)

# The AES S-box (FIPS-197 figure 7), row by row.
SBOX = bytes.fromhex(
    "637c777bf26b6fc53001672bfed7ab76ca82c97dfa5947f0add4a2af9ca472c0"
    "b7fd9326363ff7cc34a5e5f171d8311504c723c31896059a071280e2eb27b275"
    "09832c1a1b6e5aa0523bd6b329e32f8453d100ed20fcb15b6acbbe394a4c58cf"
    "d0efaafb434d338545f9027f503c9fa851a3408f929d38f5bcb6da2110fff3d2"
    "cd0c13ec5f974417c4a77e3d645d197360814fdc222a908846eeb814de5e0bdb"
    "e0323a0a4906245cc2d3ac629195e479e7c8376d8dd54ea96c56f4ea657aae08"
    "ba78252e1ca6b4c6e8dd741f4bbd8b8a703eb5664803f60e613557b986c11d9e"
    "e1f8981169d98e949b1e87e9ce5528df8ca1890dbfe6426841992d0fb054bb16"
)
INV_SBOX = bytes(SBOX.index(x) for x in range(256))

_RCON = (0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1B, 0x36)


def rounds_for_key(key: bytes) -> int:
    """Number of rounds for a key, or ``ValueError`` worded as pycryptodome words it."""
    if len(key) not in KEY_SIZES:
        raise ValueError(f"Incorrect AES key length ({len(key)} bytes)")
    return {16: 10, 24: 12, 32: 14}[len(key)]


def gf_mul(a: int, b: int) -> int:
    """Multiply two bytes in GF(2^8) modulo the AES polynomial x^8+x^4+x^3+x+1."""
    product = 0
    while b:
        if b & 1:
            product ^= a
        a = ((a << 1) ^ 0x1B) & 0xFF if a & 0x80 else a << 1
        b >>= 1
    return product


def expand_key(key: bytes) -> list[int]:
    """FIPS-197 KeyExpansion: ``4 * (rounds + 1)`` big-endian words.

    SubWord is four S-box lookups in place, RotWord folded into which byte goes where:
    a chunked call on device arrays expands its new key before its first launch, and
    calls to a helper per word made that 17 µs an AES-256 key on the GPU host."""
    rounds = rounds_for_key(key)
    nk = len(key) // 4
    words = list(struct.unpack(f">{nk}I", key))
    s = SBOX
    for i in range(nk, 4 * (rounds + 1)):
        temp = words[-1]
        if i % nk == 0:  # SubWord(RotWord(temp)) ^ Rcon
            temp = ((s[(temp >> 16) & 0xFF] ^ _RCON[i // nk - 1]) << 24
                    | s[(temp >> 8) & 0xFF] << 16 | s[temp & 0xFF] << 8 | s[temp >> 24])
        elif nk > 6 and i % nk == 4:  # SubWord(temp)
            temp = (s[temp >> 24] << 24 | s[(temp >> 16) & 0xFF] << 16
                    | s[(temp >> 8) & 0xFF] << 8 | s[temp & 0xFF])
        words.append(words[i - nk] ^ temp)
    return words


def _inv_mix_column(word: int) -> int:
    a = word.to_bytes(4, "big")
    mixed = bytes(
        gf_mul(a[r], 14) ^ gf_mul(a[(r + 1) % 4], 11) ^ gf_mul(a[(r + 2) % 4], 13)
        ^ gf_mul(a[(r + 3) % 4], 9)
        for r in range(4)
    )
    return int.from_bytes(mixed, "big")


def _to_kernel_words(words: list[int]) -> np.ndarray:
    # Big-endian FIPS words to the kernels' little-endian columns: a byte swap.
    import numpy as np  # only OpenCL engines upload round keys

    return np.array(words, dtype=np.uint32).byteswap()


def encryption_round_keys(key: bytes) -> np.ndarray:
    """Round keys for the cipher, in kernel layout (``uint32``, 4 per round)."""
    return _to_kernel_words(expand_key(key))


def decryption_round_keys(key: bytes) -> np.ndarray:
    """Round keys for the equivalent inverse cipher (FIPS-197 section 5.3.5).

    The rounds are taken in reverse order and InvMixColumns is applied to every
    round key but the first and last, so decryption can use the same
    table-lookup round structure as encryption.
    """
    words = expand_key(key)
    rounds = len(words) // 4 - 1
    out: list[int] = []
    for r in range(rounds, -1, -1):
        round_words = words[4 * r : 4 * r + 4]
        if 0 < r < rounds:
            round_words = [_inv_mix_column(w) for w in round_words]
        out.extend(round_words)
    return _to_kernel_words(out)


# Words of a kernel's key argument, passed by value (cl/aes_vendor.h, aes_key_argument):
# room for AES-256's 15 round keys.
KEY_ARGUMENT_WORDS = 60


def kernel_key_argument(key: bytes, key_schedule: str, decrypt: bool) -> np.ndarray:
    """A kernel's key argument as the words passed by value: round keys (``"host"``) or
    the raw key (``"device"``), then zeros."""
    import numpy as np

    return np.frombuffer(kernel_key_bytes(key, key_schedule, decrypt), "<u4")


def kernel_key_bytes(key: bytes, key_schedule: str, decrypt: bool) -> bytes:
    """:func:`kernel_key_argument`'s bytes. The round keys' big-endian FIPS words,
    packed, are the kernels' little-endian columns already (no byte swap to make)."""
    if key_schedule == "device":
        material = bytes(key)  # the kernel expands it
    elif decrypt:
        material = decryption_round_keys(key).tobytes()
    else:
        words = expand_key(key)
        material = struct.pack(f">{len(words)}I", *words)
    return material.ljust(4 * KEY_ARGUMENT_WORDS, b"\0")

