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

/* The same sources compile as CUDA C++ through NVRTC (aescl's CUDA engine):
 * aes_vendor_cuda.h maps OpenCL C's qualifiers, work-item functions and vector
 * types onto CUDA's, as hashcat builds its OpenCL kernels for CUDA. The sources
 * therefore write four things through macros that OpenCL C spells natively:
 *   AES_UINT4(a, b, c, d)   a uint4 from four words ((uint4)(a, b, c, d));
 *   AES_ULONG2(a, b)        a ulong2 from two words, read back as .x and .y;
 *   AES_LOCAL_ARRAY         an array declared in __local (CUDA: __shared__);
 *   AES_CONSTANT_TABLE      a table defined at file scope in __constant.
 * Pointer qualifiers (__global, __local, __constant) stay as OpenCL has them. A
 * HIP build would map the same way (__HIPCC__); none is built: no AMD GPU here. */
#if defined(__CUDACC__)
#include "aes_vendor_cuda.h"
#else
#define AES_UINT4(a, b, c, d) ((uint4)((a), (b), (c), (d)))
#define AES_ULONG2(a, b) ((ulong2)((a), (b)))
#define AES_LOCAL_ARRAY __local
#define AES_CONSTANT_TABLE __constant
/* OpenCL C's `inline` means C99's: an inline definition, with no external one. A
 * compiler that decides not to inline a helper then calls a function that exists
 * nowhere, and the program fails to link: clang for AMD GPUs does so with the 12-
 * and 14-round cores (tools/kernel_targets.py found it). `static inline` leaves the
 * choice to the compiler and gives it a definition to call. Only for AMD: clang for
 * SPIR leaves the same calls (docs/kernel-targets.md), but under Oclgrind, which
 * compiles for SPIR, the change made its uninitialised-value check flag the ECB
 * kernel's stores, whose bytes were right. */
#if defined(__AMDGCN__)
#define inline static inline
#endif
#endif

/* A kernel's key argument (AES_KEY_ARGUMENT(name)), its words
 * (AES_KEY_POINTER(name)) and their address space (AES_KEY_ARGUMENT_SPACE): round
 * keys or the raw key (aes_core.cl, AES_KEY_SCHEDULE_DEVICE), in a struct passed by
 * value, zero after the key's own words (room for AES-256's 60; the host side is
 * keyschedule.kernel_key_argument). A compiler for a GPU keeps a kernel's
 * arguments in its constant bank, where the rounds read each word as an operand.
 * A __constant buffer cost one load per word per block on NVIDIA's GPUs, beside
 * the table lookups in the same L1 (H100, 2026-11-24: CTR AES-128 528 GB/s from a
 * buffer, 563 by value, in OpenCL; 580 against 537 in CUDA). CUDA's mapping is in
 * aes_vendor_cuda.h. */
#if !defined(__CUDACC__)
typedef struct {
    uint words[60];
} aes_key_argument;
#define AES_KEY_ARGUMENT(name) const aes_key_argument name
#define AES_KEY_POINTER(name) ((name).words)
#define AES_KEY_ARGUMENT_SPACE
#endif

/* Full unrolling of the round loop: clang-based compilers (PoCL, AMD, Intel) and
 * NVIDIA's all accept the pragma; others ignore it. */
#define AES_UNROLL _Pragma("unroll")

/* aes_extract_byte(word, row): byte `row` (0..3) of word, zero-extended.
 * With -DAES_BYTE_PERMUTE=1 (NVIDIA GPUs, set by aescl/kernels.py) each row is
 * one PRMT (byte permute) in inline PTX. The compiler cannot see through it, so it
 * keeps the table-offset arithmetic that follows as one multiply-add (IMAD),
 * which NVIDIA runs on the floating-point pipe, instead of folding it into shifts
 * and masks on the integer pipe that the rotates and XORs already saturate
 * (aes_core.cl, aes_entry_offset). Row 3 too, though `word >> 24` is as cheap as
 * the PRMT: the shift let the compiler fold the offset into a shift and a mask, and
 * the PRMT took 40 integer instructions a block off AES-128 CTR with one round
 * table (442 to 402 of 816, sm_90), 559 to 576 GB/s on the H100's OpenCL
 * (2026-11-25, docs/benchmarks). */
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
        asm("prmt.b32 %0, %1, 0, 0x4443;" : "=r"(byte) : "r"(word));
    return byte;
}
/* Byte `row` of word as byte 1 of the result and byte 0 of `low` (below 256) as
 * byte 0: one PRMT forms a table lookup's whole offset where table entries are
 * 256 bytes apart (aes_core.cl, AES_ROUND_TABLES). */
inline uint aes_byte_above(uint word, uint row, uint low)
{
    uint offset;
    if (row == 0u)
        asm("prmt.b32 %0, %1, %2, 0x5504;" : "=r"(offset) : "r"(word), "r"(low));
    else if (row == 1u)
        asm("prmt.b32 %0, %1, %2, 0x5514;" : "=r"(offset) : "r"(word), "r"(low));
    else if (row == 2u)
        asm("prmt.b32 %0, %1, %2, 0x5524;" : "=r"(offset) : "r"(word), "r"(low));
    else
        asm("prmt.b32 %0, %1, %2, 0x5534;" : "=r"(offset) : "r"(word), "r"(low));
    return offset;
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
 * On another EPYC (Zen 3, the same PoCL) the attribute did not hold through
 * PoCL's work-group function and code generation aborted the process (`Cannot
 * select: intrinsic %llvm.x86.aesni.aesenclast`): so, as for the wide rounds
 * below, tuning.hardware_rounds_work first runs these rounds in a separate
 * process. There PoCL gives its work-group function, into which it inlines the
 * kernel, the target's own features, which lack AES. A device that fails gets
 * the same instructions as inline assembly (AES_X86_ASM: 1 in the legacy SSE
 * encoding, 2 in the VEX one where the CPU has AVX, so that they do not mix with
 * the compiler's VEX code), which needs no target feature, checked the same way
 * (the wide rounds below, never inlined, keep their builtins beside it); a device
 * that fails that too keeps the tables.
 *
 * AESENC/AESDEC take the state and round key as 16 bytes in memory order, which
 * on a little-endian device is exactly the core's uint4 of columns, and AESDEC
 * expects the round keys of the equivalent inverse cipher, which is what the
 * core already uses. The instructions run in constant time: this path has no
 * table lookups. AES_CORE_VARIANT says which rounds were compiled. */
#ifndef AES_HARDWARE_ROUNDS
#define AES_HARDWARE_ROUNDS 0
#endif
#ifndef AES_X86_ASM
#define AES_X86_ASM 0
#endif
#if AES_HARDWARE_ROUNDS && defined(__clang__) && defined(__x86_64__) && AES_X86_ASM
#define AES_X86_AESNI 1
#define AES_CORE_VARIANT 4u
#define AES_CPU_TARGET
#define AES_X86_INLINE __attribute__((always_inline)) inline
/* One instruction on 16-byte operands in XMM registers: `name` s, k in the SSE
 * form (s is also the result), or `vname` s, k into a new register in the VEX one.
 * AT&T order: the source operand first. */
#if AES_X86_ASM == 2
#define AES_X86_ASM_OP(name, s, k) \
    __asm__("v" name " %2, %1, %0" : "=x"(s) : "x"(s), "x"(k))
#else
#define AES_X86_ASM_OP(name, s, k) __asm__(name " %1, %0" : "+x"(s) : "x"(k))
#endif
/* A round function of the core on one instruction: (state, round key) -> state. */
#define AES_X86_ASM_ROUND(function, name)                                   \
    AES_X86_INLINE uint4 function(uint4 s, uint4 k)                         \
    {                                                                       \
        AES_X86_ASM_OP(name, s, k);                                         \
        return s;                                                           \
    }
AES_X86_ASM_ROUND(aes_x86_encrypt_round, "aesenc")
AES_X86_ASM_ROUND(aes_x86_encrypt_last_round, "aesenclast")
AES_X86_ASM_ROUND(aes_x86_decrypt_round, "aesdec")
AES_X86_ASM_ROUND(aes_x86_decrypt_last_round, "aesdeclast")
#elif AES_HARDWARE_ROUNDS && defined(__clang__) && defined(__x86_64__)
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

/* The wide AES instructions (VAES): one AESENC on a 256- or 512-bit register
 * runs the round on 2 or 4 blocks. -DAES_WIDE_ROUNDS=256 or 512 asks for them
 * beside AES_HARDWARE_ROUNDS; aescl/kernels.py sets it only when the host CPU
 * reports VAES and VPCLMULQDQ (and AVX-512F and BW for 512, AVX2 for 256), and
 * aescl/tuning.py keeps it only once a separate process ran it correctly on the
 * device (tuning.hardware_rounds_work).
 *
 * PoCL compiles a kernel for a target named after a CPU model it knows
 * (`skylake-avx512` on both an AMD EPYC and a Xeon with VAES), and inlines the
 * kernel's functions into a work-group function that lacks their target
 * attribute: an always-inlined VAES builtin then aborts the whole process in
 * code generation (`Cannot select: intrinsic %llvm.x86.aesni.aesenc.512`, PoCL
 * 3.1 and 5.0). A function that is never inlined keeps its attribute, and its
 * code is generated with VAES enabled, so the wide rounds live in such functions
 * (aes_core.cl, aes_x86_wide_*_run), each doing every round of a whole run of
 * blocks: one call per run. AES_WIDE_LANES is the number of blocks per register
 * (1 without the wide instructions). Every CPU with VAES also has the wide
 * carry-less multiply (VPCLMULQDQ), which GHASH then uses the same way
 * (chunk_seal.cl, chunk_crypt_wide). */
#ifndef AES_WIDE_ROUNDS
#define AES_WIDE_ROUNDS 0
#endif
#if AES_X86_AESNI && AES_WIDE_ROUNDS == 512
#define AES_WIDE_LANES 4
#undef AES_CORE_VARIANT
#define AES_CORE_VARIANT 3u
#define AES_X86_WIDE_TARGET __attribute__((target("aes,pclmul,vaes,vpclmulqdq,avx512f,avx512bw")))
typedef long aes_x86_wide __attribute__((vector_size(64)));
/* Blocks j .. j+3 of s (16-byte vectors, through `as`) as one register, and back;
 * the XOR of a register's four 128-bit lanes. */
#define AES_WIDE_PACK_AS(s, j, as)                                            \
    ((aes_x86_wide)as_long8((uint16)(as((s)[j]), as((s)[(j) + 1]),            \
                                     as((s)[(j) + 2]), as((s)[(j) + 3]))))
#define AES_WIDE_PACK(s, j) AES_WIDE_PACK_AS(s, j, )
#define AES_WIDE_FOLD(w)                                                      \
    (as_ulong8(w).s01 ^ as_ulong8(w).s23 ^ as_ulong8(w).s45 ^ as_ulong8(w).s67)
#define AES_WIDE_BROADCAST(k) ((aes_x86_wide)as_long8((uint16)((k), (k), (k), (k))))
#define AES_WIDE_UNPACK(s, j, w)                                            \
    do {                                                                    \
        const uint16 lanes_ = as_uint16(w);                        \
        (s)[j] = lanes_.s0123;                                              \
        (s)[(j) + 1] = lanes_.s4567;                                        \
        (s)[(j) + 2] = lanes_.s89ab;                                        \
        (s)[(j) + 3] = lanes_.scdef;                                        \
    } while (0)
#define AES_WIDE_BUILTIN(name) __builtin_ia32_##name##512
/* For whole runs in wide registers (chunk_seal.cl): a register as 16 words, from
 * and to memory; counter blocks J0 + c .. c+3 (the big-endian last word); each
 * lane's bytes reversed (GHASH reads a block as a big-endian number); a register
 * with (lo, hi) in lane 0 and zeros elsewhere. */
#define AES_WIDE_UINTS uint16
#define AES_WIDE_FROM_UINTS(u) ((aes_x86_wide)as_long8(u))
#define AES_WIDE_TO_UINTS(w) as_uint16(w)
#define AES_WIDE_LOAD(p) vload16(0, (__global const uint *)(p))
#define AES_WIDE_STORE(u, p) vstore16((u), 0, (__global uint *)(p))
#define AES_WIDE_COUNTERS(j0, c)                                               \
    ((uint16)((j0).xyz, aes_bswap32(c), (j0).xyz, aes_bswap32((c) + 1u),       \
              (j0).xyz, aes_bswap32((c) + 2u), (j0).xyz, aes_bswap32((c) + 3u)))
typedef uchar aes_x86_wide_bytes __attribute__((ext_vector_type(64)));
#define AES_WIDE_REVERSE_LANES(u)                                              \
    ((aes_x86_wide)__builtin_shufflevector(__builtin_astype((u), aes_x86_wide_bytes), \
                                           __builtin_astype((u), aes_x86_wide_bytes), \
                                           15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48))
#define AES_WIDE_LANE0(lo, hi) \
    ((aes_x86_wide)as_long8((ulong8)((lo), (hi), 0ul, 0ul, 0ul, 0ul, 0ul, 0ul)))
#elif AES_X86_AESNI && AES_WIDE_ROUNDS == 256
#define AES_WIDE_LANES 2
#undef AES_CORE_VARIANT
#define AES_CORE_VARIANT 2u
#define AES_X86_WIDE_TARGET __attribute__((target("aes,pclmul,vaes,vpclmulqdq,avx2")))
typedef long aes_x86_wide __attribute__((vector_size(32)));
#define AES_WIDE_PACK_AS(s, j, as) \
    ((aes_x86_wide)as_long4((uint8)(as((s)[j]), as((s)[(j) + 1]))))
#define AES_WIDE_PACK(s, j) AES_WIDE_PACK_AS(s, j, )
#define AES_WIDE_FOLD(w) (as_ulong4(w).s01 ^ as_ulong4(w).s23)
#define AES_WIDE_BROADCAST(k) ((aes_x86_wide)as_long4((uint8)((k), (k))))
#define AES_WIDE_UNPACK(s, j, w)                                            \
    do {                                                                    \
        const uint8 lanes_ = as_uint8(w);                          \
        (s)[j] = lanes_.s0123;                                              \
        (s)[(j) + 1] = lanes_.s4567;                                        \
    } while (0)
#define AES_WIDE_BUILTIN(name) __builtin_ia32_##name##256
#define AES_WIDE_UINTS uint8
#define AES_WIDE_FROM_UINTS(u) ((aes_x86_wide)as_long4(u))
#define AES_WIDE_TO_UINTS(w) as_uint8(w)
#define AES_WIDE_LOAD(p) vload8(0, (__global const uint *)(p))
#define AES_WIDE_STORE(u, p) vstore8((u), 0, (__global uint *)(p))
#define AES_WIDE_COUNTERS(j0, c) \
    ((uint8)((j0).xyz, aes_bswap32(c), (j0).xyz, aes_bswap32((c) + 1u)))
typedef uchar aes_x86_wide_bytes __attribute__((ext_vector_type(32)));
#define AES_WIDE_REVERSE_LANES(u)                                              \
    ((aes_x86_wide)__builtin_shufflevector(__builtin_astype((u), aes_x86_wide_bytes), \
                                           __builtin_astype((u), aes_x86_wide_bytes), \
                                           15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16))
#define AES_WIDE_LANE0(lo, hi) ((aes_x86_wide)as_long4((ulong4)((lo), (hi), 0ul, 0ul)))
#else
#define AES_WIDE_LANES 1
#endif

#if !defined(__CUDACC__)
inline uint aes_bswap32(uint x)
{
    return as_uint(as_uchar4(x).s3210);
}
#endif

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
