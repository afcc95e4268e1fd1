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

/* aes_extract_byte(word, row): byte `row` (0..3) of word, zero-extended.
 * With -DAES_BYTE_PERMUTE=1 (NVIDIA GPUs, set by aescl/kernels.py) rows 0..2 are
 * one PRMT (byte permute) in inline PTX. The compiler cannot see through it, so it
 * keeps the table-offset arithmetic that follows as one multiply-add (IMAD),
 * which NVIDIA runs on the floating-point pipe, instead of folding it into shifts
 * and masks on the integer pipe that the rotates and XORs already saturate
 * (aes_core.cl, aes_entry_offset). */
#ifndef AES_BYTE_PERMUTE
#define AES_BYTE_PERMUTE 0
#endif
#if AES_BYTE_PERMUTE
inline uint aes_extract_byte(uint word, uint row)
{
    uint byte;
    if (row == 0u)
        asm("prmt.b32 %0, %1, 0, 0x4440;" : "=r"(byte) : "r"(word));
    else if (row == 1u)
        asm("prmt.b32 %0, %1, 0, 0x4441;" : "=r"(byte) : "r"(word));
    else if (row == 2u)
        asm("prmt.b32 %0, %1, 0, 0x4442;" : "=r"(byte) : "r"(word));
    else
        byte = word >> 24;
    return byte;
}
#else
inline uint aes_extract_byte(uint word, uint row)
{
    return (word >> (8u * row)) & 0xffu;
}
#endif

/* AES instructions of the CPU (x86 AES-NI) through clang's builtins.
 * -DAES_HARDWARE_ROUNDS=1 asks for them; aescl/kernels.py sets it for a CPU
 * device only when the host CPU reports the AES feature (kernels.cpu_features),
 * and its tests check which rounds a device really compiled (core_variant).
 *
 * The functions that use the builtins, and every kernel that calls them, carry
 * AES_CPU_TARGET: a clang target attribute that enables the AES and PCLMUL
 * instructions for that code whatever target the runtime compiles for. The
 * target's own macros (__AES__) must not decide: Debian's PoCL 3.1 chose
 * `pthread-haswell` on an AMD EPYC that has AES, defined no __AES__, and the
 * kernels fell back to tables without a word. (Inline assembly would avoid the
 * attribute, but PoCL 5.0's work-group compiler fails an LLVM assertion on it.)
 * With AVX in the target, the builtins come out in the VEX encoding by themselves.
 *
 * AESENC/AESDEC take the state and round key as 16 bytes in memory order, which
 * on a little-endian device is exactly the core's uint4 of columns, and AESDEC
 * expects the round keys of the equivalent inverse cipher, which is what the
 * core already uses. The instructions run in constant time: this path has no
 * table lookups. AES_CORE_VARIANT says which rounds were compiled. */
#ifndef AES_HARDWARE_ROUNDS
#define AES_HARDWARE_ROUNDS 0
#endif
#if AES_HARDWARE_ROUNDS && defined(__clang__) && defined(__x86_64__)
#define AES_X86_AESNI 1
#define AES_CORE_VARIANT 1u
#define AES_CPU_TARGET __attribute__((target("aes,pclmul")))
#define AES_X86_INLINE AES_CPU_TARGET __attribute__((always_inline)) inline
AES_X86_INLINE uint4 aes_x86_encrypt_round(uint4 s, uint4 k)
{
    return as_uint4(__builtin_ia32_aesenc128(as_long2(s), as_long2(k)));
}
AES_X86_INLINE uint4 aes_x86_encrypt_last_round(uint4 s, uint4 k)
{
    return as_uint4(__builtin_ia32_aesenclast128(as_long2(s), as_long2(k)));
}
AES_X86_INLINE uint4 aes_x86_decrypt_round(uint4 s, uint4 k)
{
    return as_uint4(__builtin_ia32_aesdec128(as_long2(s), as_long2(k)));
}
AES_X86_INLINE uint4 aes_x86_decrypt_last_round(uint4 s, uint4 k)
{
    return as_uint4(__builtin_ia32_aesdeclast128(as_long2(s), as_long2(k)));
}
#else
#define AES_X86_AESNI 0
#define AES_CORE_VARIANT 0u
#define AES_CPU_TARGET
#endif

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
