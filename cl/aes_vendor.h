/* aes_vendor.h: the one place that knows about vendor and platform differences.
 *
 * Everything here has a portable OpenCL C 1.2 definition. A vendor intrinsic may
 * replace one behind a macro, but the portable fallback must stay, because every
 * device has to produce bit-identical output.
 *
 * Reads: __ENDIAN_LITTLE__ (set by the OpenCL compiler on little-endian devices).
 */
#ifndef AES_VENDOR_H
#define AES_VENDOR_H

/* Full unrolling of the round loop: clang-based compilers (PoCL, AMD, Intel) and
 * NVIDIA's all accept the pragma; others ignore it. */
#define AES_UNROLL _Pragma("unroll")

inline uint aes_bswap32(uint x)
{
    return as_uint(as_uchar4(x).s3210);
}

/* The AES core holds each state column with row 0 in the low byte, which is what
 * a 32-bit load of the byte stream yields on a little-endian device. A
 * big-endian device must swap on the way in and out so that the memory layout,
 * and therefore the ciphertext, is the same everywhere. */
#ifdef __ENDIAN_LITTLE__
inline uint4 aes_load(uint4 v) { return v; }
inline uint4 aes_store(uint4 v) { return v; }
#else
inline uint4 aes_load(uint4 v)
{
    return (uint4)(aes_bswap32(v.x), aes_bswap32(v.y), aes_bswap32(v.z), aes_bswap32(v.w));
}
inline uint4 aes_store(uint4 v) { return aes_load(v); }
#endif

#endif /* AES_VENDOR_H */
