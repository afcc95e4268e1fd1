/* ghash.cl: multiplication in GF(2^128) as GCM defines it (NIST SP 800-38D).
 *
 * Representation: an element is a ulong2 (x = hi, y = lo) holding its 16-byte
 * block read as a big-endian 128-bit integer. GCM puts the coefficient of x^0 in
 * the top bit of the first byte, so multiplying by x is a right shift and the
 * reduction (x^128 = x^7 + x^2 + x + 1) folds into the top byte as 0xE1.
 *
 * Multiplication by a fixed element P is Shoup's 4-bit method: a 16-entry table
 * M[n] = N(n)·P (built on the host by aescl/ghash.py:nibble_table) and, per
 * nibble of the other factor, one shift by four and one lookup. The 256-byte
 * table fits in __local memory; a per-key set of tables for P = H^1..H^T lives in
 * __global memory, built on the device (aes_gcm.cl, ghash_power_tables).
 *
 * The multiply is linear and looks up secret-dependent indices, so like the AES
 * core it is NOT constant-time.
 *
 * On x86 CPUs with PCLMULQDQ (-DGHASH_CARRYLESS=1, which aescl/kernels.py sets
 * with AES_HARDWARE_ROUNDS when the CPU has the instruction) products are
 * carry-less multiplications instead (ghash_clmul_wide, ghash_reduce): no
 * tables, constant time, and several products can share one reduction. With the
 * wide AES rounds (AES_WIDE_ROUNDS) the chunked format's runs multiply 2 or 4
 * blocks per instruction (VPCLMULQDQ, chunk_seal.cl's chunk_crypt_wide).
 *
 * -D options: GHASH_CARRYLESS (default 0; used only with the AES-NI core, whose
 * target attribute it shares); aes_vendor.h supplies the byte-order helpers.
 */
#ifndef GHASH_CL
#define GHASH_CL

#include "aes_vendor.h"

/* A block from memory (any device byte order) as a field element, and back. */
inline ulong2 ghash_load(uint4 v)
{
    const uint4 c = aes_load(v);   /* bytes in memory order, first byte lowest */
    return AES_ULONG2(((ulong)aes_bswap32(c.x) << 32) | aes_bswap32(c.y),
                    ((ulong)aes_bswap32(c.z) << 32) | aes_bswap32(c.w));
}

inline uint4 ghash_store(ulong2 e)
{
    return aes_store(AES_UINT4(aes_bswap32((uint)(e.x >> 32)), aes_bswap32((uint)e.x),
                               aes_bswap32((uint)(e.y >> 32)), aes_bswap32((uint)e.y)));
}

/* Multiply by x^4. The four coefficients that leave the top (x^124..x^127, the
 * low nibble r) come back as r(x)·x^128 = r(x)·0xE1: a carry-less 4x8-bit product
 * placed at bit 53 of hi, where x^3·0xE1 has its top coefficient. */
inline ulong2 ghash_times_x4(ulong2 z)
{
    const ulong r = z.y & 0xful;
    const ulong fold = ((r & 1ul) * 0xe1ul) ^ (((r >> 1) & 1ul) * 0x1c2ul)
                     ^ (((r >> 2) & 1ul) * 0x384ul) ^ (((r >> 3) & 1ul) * 0x708ul);
    /* lo >> 4 with hi's low nibble shifted in. The plain (lo >> 4) | (hi << 60)
     * compiles to the llvm.fshl intrinsic, which Oclgrind 21.10 cannot run; the
     * masked rotate is the same bits and stays an ordinary builtin call. */
    const ulong lo = (rotate(z.y, 60ul) & 0x0ffffffffffffffful) | ((z.x & 0xful) << 60);
    return AES_ULONG2((z.x >> 4) ^ (fold << 53), lo);
}

/* Multiply by x: a right shift, with the coefficient of x^128 folded back into
 * the top byte as 0xE1. The low word is the masked-rotate form for the reason
 * given in ghash_times_x4. */
inline ulong2 ghash_times_x(ulong2 v)
{
    const ulong fold = (v.y & 1ul) * (0xe1ul << 56);
    return AES_ULONG2((v.x >> 1) ^ fold,
                    (rotate(v.y, 63ul) & 0x7ffffffffffffffful) | (v.x << 63));
}

/* x·y bit by bit (SP 800-38D, Algorithm 1): slow, but needs no table, so it
 * serves the few products that build the tables. */
inline ulong2 ghash_multiply_bitwise(ulong2 x, ulong2 y)
{
    ulong2 z = AES_ULONG2(0ul, 0ul);
    for (int bit = 127; bit >= 0; --bit) {   /* coefficients of x, from x^0 up */
        const ulong word = bit >= 64 ? x.x : x.y;
        if ((word >> (uint)(bit & 63)) & 1ul)
            z ^= y;
        y = ghash_times_x(y);
    }
    return z;
}

/* h^exponent by square-and-multiply, with bitwise products: a few dozen for the
 * exponents of H's tables and powers, which are made once a key. */
inline ulong2 ghash_power_bitwise(ulong2 h, uint exponent)
{
    ulong2 power = AES_ULONG2(1ul << 63, 0ul);   /* the element 1 */
    for (uint e = exponent; e; e >>= 1) {
        if (e & 1u)
            power = ghash_multiply_bitwise(power, h);
        if (e > 1u)
            h = ghash_multiply_bitwise(h, h);
    }
    return power;
}

/* x·P with P's nibble table in the given address space: Horner over the 32
 * nibbles of x, the highest degree (low nibble of lo) first. OpenCL C 1.2 has no
 * generic address space, hence one definition per space. */
#define GHASH_DEFINE_MULTIPLY(name, space)                                      \
    inline ulong2 name(ulong2 x, space const ulong2 *table)                     \
    {                                                                           \
        ulong2 z = table[x.y & 0xful];                                         \
        for (int shift = 4; shift < 64; shift += 4)                             \
            z = ghash_times_x4(z) ^ table[(x.y >> shift) & 0xful];             \
        for (int shift = 0; shift < 64; shift += 4)                             \
            z = ghash_times_x4(z) ^ table[(x.x >> shift) & 0xful];             \
        return z;                                                               \
    }

GHASH_DEFINE_MULTIPLY(ghash_multiply_local, __local)
GHASH_DEFINE_MULTIPLY(ghash_multiply_global, __global)

/* x·P from P's position tables: 32 tables of 16 entries, table k for nibble k of x
 * (nibbles counted from the low end of lo, then of hi), entry n of table k being
 * N(n)·P·x^(4(31-k)), which is the nibble table's entry n as Horner's rule above
 * would shift it by the 31 - k nibbles that follow. The product is then the XOR of
 * one entry per nibble: no shifts and no reduction between lookups, where the nibble
 * table costs a multiply by x^4 (two dozen integer instructions) per nibble. 8 KiB
 * per P, which ghash_position_tables (aes_gcm.cl) builds: the entries' high words
 * (entry 16k + n at word 16k + n), then their low words (at GHASH_POSITION_ENTRIES +
 * 16k + n). Apart, a table's 16 words of one half fill the 32 banks of shared
 * memory exactly once, so the lookups of a half-warp never conflict; as 16-byte
 * entries, entries n and n + 8 shared banks (ncu, H100: 7.2-way conflicts). */
#define GHASH_POSITION_ENTRIES 512
#define GHASH_DEFINE_POSITIONS_MULTIPLY(name, space)                            \
    inline ulong2 name(ulong2 x, space const ulong *positions)                  \
    {                                                                           \
        ulong hi = 0ul, lo = 0ul;                                               \
        AES_UNROLL                                                              \
        for (int k = 0; k < 32; ++k) {                                          \
            const uint at = 16u * k                                             \
                + (uint)(((k < 16 ? x.y : x.x) >> (4 * (k & 15))) & 0xful);     \
            hi ^= positions[at];                                                \
            lo ^= positions[GHASH_POSITION_ENTRIES + at];                       \
        }                                                                       \
        return AES_ULONG2(hi, lo);                                              \
    }

GHASH_DEFINE_POSITIONS_MULTIPLY(ghash_multiply_positions_local, __local)
GHASH_DEFINE_POSITIONS_MULTIPLY(ghash_multiply_positions_global, __global)

#ifndef GHASH_CARRYLESS
#define GHASH_CARRYLESS 0
#endif
#if GHASH_CARRYLESS && AES_X86_AESNI
/* The 128-bit carry-less product of two 64-bit words, as (low word, high word).
 * AES_X86_INLINE: the builtin needs PCLMUL enabled, as aes_vendor.h explains; where
 * the core's rounds are inline assembly (AES_X86_ASM), so is this. */
AES_X86_INLINE ulong2 ghash_clmul64(ulong a, ulong b)
{
#if AES_X86_ASM
    ulong2 x = AES_ULONG2(a, 0ul);
    const ulong2 y = AES_ULONG2(b, 0ul);
    AES_X86_ASM_OP("pclmulqdq $0x00,", x, y);
    return x;
#else
    return as_ulong2(__builtin_ia32_pclmulqdq128(as_long2(AES_ULONG2(a, 0ul)),
                                                 as_long2(AES_ULONG2(b, 0ul)), 0x00));
#endif
}

/* x·y before reduction: the 255-bit carry-less product of the two big-endian
 * integers, words from the most significant down (s0 = bits 255..192). GCM's
 * bit order is reflected: the coefficient of z^k sits at bit 127 - k of a factor
 * and so at bit 254 - k of this product. Products add (XOR) before reducing, so
 * a run of blocks pays for one reduction. */
AES_X86_INLINE ulong4 ghash_clmul_wide(ulong2 x, ulong2 y)
{
    const ulong2 low = ghash_clmul64(x.s1, y.s1);
    const ulong2 high = ghash_clmul64(x.s0, y.s0);
    const ulong2 middle = ghash_clmul64(x.s1, y.s0) ^ ghash_clmul64(x.s0, y.s1);
    return (ulong4)(high.s1, high.s0 ^ middle.s1, low.s1 ^ middle.s0, low.s0);
}

/* A sum of ghash_clmul_wide products reduced to a field element: shifted left by
 * one bit, so that the coefficient of z^k sits at bit 255 - k, then folded modulo
 * z^128 + z^7 + z^2 + z + 1 by shifts (Gueron and Kounavis, "Intel Carry-Less
 * Multiplication Instruction and its Usage for Computing the GCM Mode", 2010,
 * the reduction of their Algorithm 5). x3 is the most significant word. */
AES_X86_INLINE ulong2 ghash_reduce(ulong4 p)
{
    const ulong x3 = (p.s0 << 1) | (p.s1 >> 63);
    const ulong x2 = (p.s1 << 1) | (p.s2 >> 63);
    const ulong x1 = (p.s2 << 1) | (p.s3 >> 63);
    const ulong x0 = p.s3 << 1;
    const ulong d = x1 ^ (x0 << 63) ^ (x0 << 62) ^ (x0 << 57);
    const ulong h1 = d ^ (d >> 1) ^ (d >> 2) ^ (d >> 7);
    const ulong h0 = x0 ^ ((x0 >> 1) | (d << 63)) ^ ((x0 >> 2) | (d << 62))
                   ^ ((x0 >> 7) | (d << 57));
    return AES_ULONG2(x3 ^ h1, x2 ^ h0);
}

AES_X86_INLINE ulong2 ghash_multiply_carryless(ulong2 x, ulong2 y)
{
    return ghash_reduce(ghash_clmul_wide(x, y));
}

#endif

#endif /* GHASH_CL */
