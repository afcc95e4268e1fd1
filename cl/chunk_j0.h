/* chunk_j0.h: J0 of the chunked format's chunks (chunk_layout.cl, chunk_seal.cl and
 * aes_gcm.cl's gcm_crypt_hash).
 *
 * J0 of chunk k is base_j0 (the base nonce and the 32-bit counter 1) with k XORed
 * big-endian into nonce bytes 4..11. base_j0 holds those 16 bytes as the AES core's
 * columns (the host passes them by value in memory order: aes_vendor.h), and so
 * does the result. */
#ifndef CHUNK_J0_H
#define CHUNK_J0_H
#include "aes_vendor.h"

inline uint4 chunk_j0(const uint4 base_j0, const ulong index)
{
    uint4 j0 = base_j0;
    j0.y ^= aes_bswap32((uint)(index >> 32));
    j0.z ^= aes_bswap32((uint)index);
    return j0;
}

#endif /* CHUNK_J0_H */
