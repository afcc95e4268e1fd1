"""A slow, obviously correct C2SP chunked-encryption (AES-256-GCM, HKDF-SHA-512).

Built only from hashlib/hmac and pycryptodome's GCM, straight from the text of
c2sp.org/chunked-encryption, to check aescl.chunked byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac

from Crypto.Cipher import AES

CHUNK = 16384


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    okm, t, i = b"", b"", 1
    while len(okm) < length:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha512).digest()
        okm += t
        i += 1
    return okm[:length]


def derive(key: bytes, salt: bytes, context: bytes) -> tuple[bytes, bytes, bytes]:
    info = b"c2sp.org/chunked-encryption@v1+" + b"AEAD_AES_256_GCM" + b"\x00" + salt + context
    okm = hkdf_expand(key, info, 32 + 12 + 32)
    return okm[:32], okm[32:44], okm[44:]


def nonce_for(base_nonce: bytes, index: int) -> bytes:
    return (int.from_bytes(base_nonce, "big") ^ index).to_bytes(12, "big")


def encrypt_raw(key: bytes, base_nonce: bytes, message: bytes) -> bytes:
    chunks = [message[i : i + CHUNK] for i in range(0, len(message) - len(message) % CHUNK, CHUNK)]
    chunks.append(message[len(chunks) * CHUNK :])  # the final chunk: always short
    out = []
    for index, chunk in enumerate(chunks):
        cipher = AES.new(key, AES.MODE_GCM, nonce=nonce_for(base_nonce, index))
        out.extend(cipher.encrypt_and_digest(chunk))
    return b"".join(out)


def encrypt(key: bytes, message: bytes, context: bytes, salt: bytes) -> bytes:
    chunk_key, base_nonce, commitment = derive(key, salt, context)
    return salt + commitment + encrypt_raw(chunk_key, base_nonce, message)
