/* aes_core.cl: the one AES core (FIPS-197) that every mode kernel includes.
 *
 * State layout: a block is a uint4 of four columns; each column holds rows 0..3
 * from the low byte up. That is the block's bytes in memory order read as
 * little-endian 32-bit words (aes_load/aes_store adapt other devices).
 *
 * Algorithm: the classic T-table round. One 256-entry table per direction
 * (aes_te0, aes_td0) combines SubBytes and MixColumns; the other three tables are
 * byte rotations of it, which costs one rotate per lookup instead of 3 KiB more
 * of fast memory. Decryption uses the equivalent inverse cipher, whose round keys
 * have InvMixColumns applied (host: keyschedule.decryption_round_keys).
 * The lookups depend on secret data, so these table rounds are NOT constant-time.
 * On x86 CPUs the rounds are the AES instructions instead (AES_HARDWARE_ROUNDS),
 * which are constant-time.
 *
 * -D options (set by aescl/kernels.py; all but AES_BYTE_PERMUTE,
 *             AES_HARDWARE_ROUNDS and AES_BLOCKS_PER_ITEM required):
 *   AES_ROUNDS              10, 12 or 14 (AES-128/192/256); the round loop is
 *                           unrolled at compile time.
 *   AES_KEY_SCHEDULE_DEVICE 0: the key argument holds the expanded round keys.
 *                           1: it holds the raw key; work-item 0 of each group
 *                           expands it into __local memory.
 *   AES_TABLES_IN_LOCAL     1: each work-group copies the tables into __local
 *                           memory (GPUs: constant memory serialises divergent
 *                           lookups). 0: lookups read __constant memory (CPUs).
 *   AES_TABLE_LANES         copies of the round table in __local memory, a power
 *                           of two (1 without AES_TABLES_IN_LOCAL). Entry x of
 *                           copy l sits at word x * LANES + l, and work-item l
 *                           of each LANES-wide slice of the group reads copy l.
 *                           With LANES equal to the number of banks (32, where a
 *                           bank is address mod 32 in words), every work-item of
 *                           a warp reads its own bank, so 32 random lookups take
 *                           one shared-memory cycle instead of the several that
 *                           bank conflicts cost with one copy (Tezcan 2021). The
 *                           final decryption round's byte S-box stays one copy.
 *                           The same layout serves AMD's 64-wide wavefronts:
 *                           their LDS also has 32 banks and checks conflicts per
 *                           half-wavefront (work-items 0-31, then 32-63), and
 *                           each half reads copies 0-31 once.
 *   AES_ROUND_TABLES        1 (default), 2 or 4: how many of the four round
 *                           tables T0..T3 (Tn = rotate(T0, 8n)) sit in __local
 *                           memory, each in AES_TABLE_LANES copies. The others
 *                           are made by rotating an entry: 1 table costs three
 *                           rotates per output column, 2 (T0, T1) cost one, since
 *                           T2[c] ^ T3[d] = rotate(T0[c] ^ T1[d], 16), and 4 none.
 *                           A rotate is an integer instruction beside the lookup:
 *                           the CUDA engine's CTR kernel has 816 instructions with
 *                           one table and 552 with four (AES-128, cuobjdump, sm_90).
 *                           With 2 or 4, the tables sit in pairs: an entry holds
 *                           the copies of T0 then T1 (T2 then T3 in the second
 *                           pair), so an entry is 8 * LANES bytes, and with 32
 *                           lanes and AES_BYTE_PERMUTE (256-byte entries) one
 *                           byte permute forms a lookup's whole offset: the
 *                           state's byte as byte 1, the copy as byte 0.
 *                           4 tables in 32 copies are 128 KiB: only the CUDA
 *                           engine, in dynamic shared memory (AES_TABLES_DYNAMIC).
 *   AES_TABLES_DYNAMIC      CUDA only: the round tables are the kernel's dynamic
 *                           shared memory (`extern __shared__`), sized by the
 *                           launch (256 * 4 * LANES * ROUND_TABLES bytes), since
 *                           static shared memory stops at 48 KiB.
 *   AES_BYTE_PERMUTE        1 on NVIDIA GPUs: byte extraction through inline PTX
 *                           (aes_vendor.h). The lookups then cost one integer
 *                           and one multiply-add instruction each, not two
 *                           integer ones (aes_entry_offset).
 *   AES_HARDWARE_ROUNDS     1 on x86 CPU devices whose CPU has AES: the rounds
 *                           are the AES-NI instructions (aes_vendor.h;
 *                           AES_CORE_VARIANT says which rounds were compiled).
 *                           Kernels that call the core carry AES_CPU_TARGET.
 *   AES_BLOCKS_PER_ITEM     blocks each work-item takes at a time (default 1).
 *                           aes_encrypt_blocks / aes_decrypt_blocks run their
 *                           rounds interleaved: an AESENC has a latency of about
 *                           four cycles but a new one can start every cycle or
 *                           two, so one block at a time leaves the AES unit
 *                           idle most of the time. 8 on CPUs with AES-NI; GPUs
 *                           hide latency with other warps and keep 1.
 *   AES_CONTIGUOUS_RUNS     which blocks a work-item takes (default 0; see
 *                           "Which blocks a work-item takes" below). 1 on CPUs.
 *   AES_WIDE_ROUNDS         0 (default), 256 or 512: with AES_HARDWARE_ROUNDS,
 *                           the rounds of a run go through VAES, 2 or 4 blocks
 *                           per instruction (aes_vendor.h explains why they sit
 *                           in functions that are never inlined). 32 blocks per
 *                           work-item then, a multiple of the blocks per register.
 *   AES_X86_ASM             0 (default), 1 or 2: with AES_HARDWARE_ROUNDS, the
 *                           128-bit instructions as inline assembly (SSE or VEX
 *                           encoding) where the compiler cannot keep the target
 *                           attribute the builtins need (aes_vendor.h); the wide
 *                           rounds, never inlined, keep their builtins.
 *
 * Barrier contract: AES_ENCRYPT_SETUP / AES_DECRYPT_SETUP end with a work-group
 * barrier whenever they write __local memory, so every work-item of the group
 * must reach them, before any early exit.
 */
#ifndef AES_CORE_CL
#define AES_CORE_CL

#include "aes_vendor.h"
#include "aes_tables.h"

#define AES_KEY_WORDS (AES_ROUNDS - 6u)         /* Nk */
#define AES_ROUND_KEY_WORDS (4u * (AES_ROUNDS + 1u))

#ifndef AES_ROUND_TABLES
#define AES_ROUND_TABLES 1
#endif
#ifndef AES_TABLES_DYNAMIC
#define AES_TABLES_DYNAMIC 0
#endif
#if AES_ROUND_TABLES != 1 && AES_ROUND_TABLES != 2 && AES_ROUND_TABLES != 4
#error "AES_ROUND_TABLES must be 1, 2 or 4"
#endif
#if AES_TABLES_DYNAMIC && !defined(__CUDACC__)
#error "AES_TABLES_DYNAMIC is CUDA's dynamic shared memory"
#endif

#if AES_TABLES_IN_LOCAL
#define AES_TABLE_SPACE __local
#else
#define AES_TABLE_SPACE __constant
#if AES_TABLE_LANES != 1 || AES_ROUND_TABLES != 1
#error "AES_TABLE_LANES > 1 and AES_ROUND_TABLES > 1 need AES_TABLES_IN_LOCAL"
#endif
#endif

/* Tables whose copies share an entry (a pair, or T0 alone), and log2 of the bytes
 * between consecutive entries: 4 * LANES * AES_TABLES_PER_ENTRY. */
#define AES_TABLES_PER_ENTRY (AES_ROUND_TABLES == 1 ? 1 : 2)
#if AES_TABLE_LANES == 1
#define AES_LANES_SHIFT 2
#elif AES_TABLE_LANES == 2
#define AES_LANES_SHIFT 3
#elif AES_TABLE_LANES == 4
#define AES_LANES_SHIFT 4
#elif AES_TABLE_LANES == 8
#define AES_LANES_SHIFT 5
#elif AES_TABLE_LANES == 16
#define AES_LANES_SHIFT 6
#elif AES_TABLE_LANES == 32
#define AES_LANES_SHIFT 7
#else
#error "AES_TABLE_LANES must be a power of two from 1 to 32"
#endif
#define AES_ENTRY_SHIFT (AES_LANES_SHIFT + (AES_TABLES_PER_ENTRY == 2 ? 1 : 0))
/* Words of all the round tables' copies, and bytes of one pair of tables. */
#define AES_ROUND_TABLE_WORDS (256 * AES_TABLE_LANES * AES_ROUND_TABLES)
#define AES_PAIR_BYTES (256u << AES_ENTRY_SHIFT)

/* Byte offset, from the table base, of the entry that byte `row` of word indexes
 * in this work-item's copy (copy_bytes = aes_copy_bytes()). Either form leaves
 * the table base to the load instruction's own operand.
 * Portable: the byte is moved straight into place (bits AES_ENTRY_SHIFT and up)
 * with one shift, and one mask-and-OR adds the copy: two integer instructions.
 * AES_BYTE_PERMUTE: extract, then multiply-add, which moves half of that work
 * off NVIDIA's integer pipe (aes_vendor.h). */
inline uint aes_entry_offset(uint word, uint row, uint copy_bytes)
{
#if AES_BYTE_PERMUTE && AES_ENTRY_SHIFT == 8
    return aes_byte_above(word, row, copy_bytes);
#elif AES_BYTE_PERMUTE
    return aes_extract_byte(word, row) * (1u << AES_ENTRY_SHIFT) + copy_bytes;
#else
    const int shift = 8 * (int)row - AES_ENTRY_SHIFT;
    const uint moved = shift > 0 ? word >> (uint)shift : word << (uint)-shift;
    return (moved & (0xffu << AES_ENTRY_SHIFT)) | copy_bytes;
#endif
}

/* Byte offset of this work-item's copy within a table entry (AES_TABLE_LANES). */
inline uint aes_copy_bytes(void)
{
    return (AES_TABLE_LANES > 1) ? (uint)(get_local_id(0) & (AES_TABLE_LANES - 1)) * 4u : 0u;
}

/* The entry of round table Tn indexed by byte `row` of `word`, from this
 * work-item's copy (copy_bytes = aes_copy_bytes()), `tables` being where the
 * tables' copies start. n is a constant: the pair's start folds into the load's
 * own offset, and the second table's into the copy's. */
#define AES_T(tables, n, word, row, copy_bytes)                                      \
    (*(AES_TABLE_SPACE const uint *)((AES_TABLE_SPACE const uchar *)(tables)          \
        + ((n) >> 1) * AES_PAIR_BYTES                                                 \
        + aes_entry_offset(word, row, (copy_bytes) + ((n) & 1) * 4u * AES_TABLE_LANES)))

#if AES_KEY_SCHEDULE_DEVICE
#define AES_KEY_SPACE __local
#else
#define AES_KEY_SPACE AES_KEY_ARGUMENT_SPACE
#endif

/* ---- Key expansion on the device (AES_KEY_SCHEDULE_DEVICE=1) ---------------- */

/* SubWord; the S-box is row 1 of aes_te0, read from __constant because the
 * expansion runs before (and independently of) any staging into __local. */
inline uint aes_sub_word(uint w)
{
    return ((aes_te0[aes_extract_byte(w, 0)] >> 8) & 0xffu)
         | (aes_te0[aes_extract_byte(w, 1)] & 0xff00u)
         | ((aes_te0[aes_extract_byte(w, 2)] << 8) & 0xff0000u)
         | ((aes_te0[aes_extract_byte(w, 3)] << 16) & 0xff000000u);
}

/* Multiply each of the four bytes of a word by x in GF(2^8). */
inline uint aes_xtime4(uint w)
{
    return ((w & 0x7f7f7f7fu) << 1) ^ (((w >> 7) & 0x01010101u) * 0x1bu);
}

/* InvMixColumns of one column, as MixColumns after the FIPS-197 pre-step
 * (a0,a1,a2,a3) ^= x^2 * (a0^a2, a1^a3, a0^a2, a1^a3). */
inline uint aes_inv_mix_column(uint w)
{
    w ^= aes_xtime4(aes_xtime4(w ^ rotate(w, 16u)));
    const uint next = rotate(w, 24u);           /* byte r holds a[r+1] */
    return aes_xtime4(w ^ next) ^ next ^ rotate(w, 16u) ^ rotate(w, 8u);
}

/* FIPS-197 KeyExpansion into rk, one group of Nk words at a time, so that the
 * position in the group is the inner index rather than a modulo (Oclgrind 21.10
 * mis-evaluates `i % 8` in the flat form). In this column layout RotWord is a
 * rotate right by 8 and Rcon lands in the low byte. */
inline void aes_expand_key(__local uint *rk, AES_KEY_ARGUMENT_SPACE const uint *key)
{
    uint rcon = 1u;
    for (uint i = 0; i < AES_KEY_WORDS; ++i)
        rk[i] = key[i];
    for (uint group = AES_KEY_WORDS; group < AES_ROUND_KEY_WORDS; group += AES_KEY_WORDS) {
        rk[group] = rk[group - AES_KEY_WORDS] ^ aes_sub_word(rotate(rk[group - 1], 24u)) ^ rcon;
        rcon = aes_xtime4(rcon);
        for (uint j = 1; j < AES_KEY_WORDS && group + j < AES_ROUND_KEY_WORDS; ++j) {
            uint t = rk[group + j - 1];
            if (AES_KEY_WORDS > 6 && j == 4)
                t = aes_sub_word(t);
            rk[group + j] = rk[group + j - AES_KEY_WORDS] ^ t;
        }
    }
}

/* Round keys of the equivalent inverse cipher: expand, reverse the order of the
 * rounds, then InvMixColumns on all but the first and last round. */
inline void aes_expand_decrypt_key(__local uint *rk, AES_KEY_ARGUMENT_SPACE const uint *key)
{
    aes_expand_key(rk, key);
    for (int lo = 0, hi = AES_ROUNDS; lo < hi; ++lo, --hi) {
        for (int c = 0; c < 4; ++c) {
            const uint t = rk[4 * lo + c];
            rk[4 * lo + c] = rk[4 * hi + c];
            rk[4 * hi + c] = t;
        }
    }
    for (int i = 4; i < 4 * AES_ROUNDS; ++i)
        rk[i] = aes_inv_mix_column(rk[i]);
}

/* ---- Per-work-group setup ---------------------------------------------------- */

/* Consecutive work-items write consecutive words: the LANES copies of an entry
 * (of T0, then of T1 where tables pair), then the next entry, then the next pair.
 * Table n is T0 rotated by 8n bits. */
inline void aes_stage_uint_table(__local uint *dst, __constant const uint *src)
{
    for (uint i = get_local_id(0); i < AES_ROUND_TABLE_WORDS; i += get_local_size(0)) {
        const uint copy_of = i / AES_TABLE_LANES;           /* (pair, entry, table in pair) */
        const uint entry = (copy_of / AES_TABLES_PER_ENTRY) % 256u;
        const uint table = copy_of % AES_TABLES_PER_ENTRY
                           + AES_TABLES_PER_ENTRY * (copy_of / (256u * AES_TABLES_PER_ENTRY));
        dst[i] = table ? rotate(src[entry], 8u * table) : src[entry];
    }
}

inline void aes_stage_uchar_table(__local uchar *dst, __constant const uchar *src)
{
    for (uint i = get_local_id(0); i < 256u; i += get_local_size(0))
        dst[i] = src[i];
}

#if AES_TABLES_DYNAMIC
#define AES_ROUND_TABLE_ARRAY(name) extern __shared__ uint name[]
#else
#define AES_ROUND_TABLE_ARRAY(name) AES_LOCAL_ARRAY uint name[AES_ROUND_TABLE_WORDS]
#endif
#if AES_TABLES_IN_LOCAL
#define AES_DECLARE_ROUND_TABLE(name, source)                              \
    AES_ROUND_TABLE_ARRAY(name##_copies);                                  \
    aes_stage_uint_table(name##_copies, source);                           \
    __local const uint *name = name##_copies
#define AES_DECLARE_SBOX(name, source)                                     \
    AES_LOCAL_ARRAY uchar name[256];                                       \
    aes_stage_uchar_table(name, source)
#else
#define AES_DECLARE_ROUND_TABLE(name, source) __constant const uint *name = source
#define AES_DECLARE_SBOX(name, source) __constant const uchar *name = source
#endif

#if AES_KEY_SCHEDULE_DEVICE
#define AES_DECLARE_ROUND_KEYS(name, key_material, expand) \
    AES_LOCAL_ARRAY uint name[AES_ROUND_KEY_WORDS];        \
    if (get_local_id(0) == 0)                              \
        expand(name, AES_KEY_POINTER(key_material))
#else
#define AES_DECLARE_ROUND_KEYS(name, key_material, expand) \
    AES_KEY_SPACE const uint *name = AES_KEY_POINTER(key_material)
#endif

#if AES_TABLES_IN_LOCAL || AES_KEY_SCHEDULE_DEVICE
#define AES_SETUP_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#else
#define AES_SETUP_BARRIER() ((void)0)
#endif

/* Declares `te` (encryption table) and `rk` (round keys) in the kernel's scope. */
#define AES_ENCRYPT_SETUP(key_material)                                   \
    AES_DECLARE_ROUND_TABLE(te, aes_te0);                                 \
    AES_DECLARE_ROUND_KEYS(rk, key_material, aes_expand_key);             \
    AES_SETUP_BARRIER()

/* Declares `td`, `inv_sbox` and `rk` (inverse-cipher round keys). */
#define AES_DECRYPT_SETUP(key_material)                                   \
    AES_DECLARE_ROUND_TABLE(td, aes_td0);                                 \
    AES_DECLARE_SBOX(inv_sbox, aes_inv_sbox);                             \
    AES_DECLARE_ROUND_KEYS(rk, key_material, aes_expand_decrypt_key);     \
    AES_SETUP_BARRIER()

/* ---- Rounds ------------------------------------------------------------------ */

/* One output column of a full round: T0[a.row0] ^ T1[b.row1] ^ T2[c.row2] ^
 * T3[d.row3] ^ key, with Tn = rotate(T0, 8n), from the AES_ROUND_TABLES tables
 * there are. Encryption passes the columns j, j+1, j+2, j+3 (ShiftRows);
 * decryption j, j+3, j+2, j+1 (InvShiftRows). `copy` is the work-item's copy
 * offset, aes_copy_bytes(). */
#if AES_ROUND_TABLES == 4
#define AES_ROUND_COLUMN(t, a, b, c, d, k, copy)                           \
    (AES_T(t, 0, a, 0, copy) ^ AES_T(t, 1, b, 1, copy)                     \
     ^ AES_T(t, 2, c, 2, copy) ^ AES_T(t, 3, d, 3, copy) ^ (k))
#elif AES_ROUND_TABLES == 2
#define AES_ROUND_COLUMN(t, a, b, c, d, k, copy)                           \
    (AES_T(t, 0, a, 0, copy) ^ AES_T(t, 1, b, 1, copy)                     \
     ^ rotate(AES_T(t, 0, c, 2, copy) ^ AES_T(t, 1, d, 3, copy), 16u) ^ (k))
#else
#define AES_ROUND_COLUMN(t, a, b, c, d, k, copy)                           \
    (AES_T(t, 0, a, 0, copy) ^ rotate(AES_T(t, 0, b, 1, copy), 8u)         \
     ^ rotate(AES_T(t, 0, c, 2, copy), 16u) ^ rotate(AES_T(t, 0, d, 3, copy), 24u) ^ (k))
#endif

/* Final encryption round: S-box only. T0[x] is (2s, s, s, 3s) from row 0 up for
 * s = S[x], and Tn that rotated up by n rows, so each output byte is masked out
 * of an entry that holds s in that row (shifted into it from T0 where the table
 * is not there). */
#if AES_ROUND_TABLES == 4
#define AES_FINAL_ENC_COLUMN(t, a, b, c, d, k, copy)                       \
    ((AES_T(t, 2, a, 0, copy) & 0xffu)                                     \
     | (AES_T(t, 0, b, 1, copy) & 0xff00u)                                 \
     | (AES_T(t, 0, c, 2, copy) & 0xff0000u)                               \
     | (AES_T(t, 1, d, 3, copy) & 0xff000000u)) ^ (k)
#else
#define AES_FINAL_ENC_COLUMN(t, a, b, c, d, k, copy)                       \
    (((AES_T(t, 0, a, 0, copy) >> 8) & 0xffu)                              \
     | (AES_T(t, 0, b, 1, copy) & 0xff00u)                                 \
     | (AES_T(t, 0, c, 2, copy) & 0xff0000u)                               \
     | ((AES_T(t, 0, d, 3, copy) << 16) & 0xff000000u)) ^ (k)
#endif

#define AES_FINAL_DEC_COLUMN(s, a, b, c, d, k)                             \
    ((uint)(s)[aes_extract_byte(a, 0)] | ((uint)(s)[aes_extract_byte(b, 1)] << 8)          \
     | ((uint)(s)[aes_extract_byte(c, 2)] << 16) | ((uint)(s)[(d) >> 24] << 24)) ^ (k)

#if AES_X86_AESNI
/* The round key of round r as the uint4 the instructions take. */
#define AES_ROUND_KEY(rk, r) \
    AES_UINT4((rk)[4 * (r)], (rk)[4 * (r) + 1], (rk)[4 * (r) + 2], (rk)[4 * (r) + 3])

AES_X86_INLINE uint4 aes_encrypt_block(uint4 s, AES_KEY_SPACE const uint *rk,
                                       AES_TABLE_SPACE const uint *te)
{
    s ^= AES_ROUND_KEY(rk, 0);
    AES_UNROLL
    for (int r = 1; r < AES_ROUNDS; ++r)
        s = aes_x86_encrypt_round(s, AES_ROUND_KEY(rk, r));
    return aes_x86_encrypt_last_round(s, AES_ROUND_KEY(rk, AES_ROUNDS));
}

AES_X86_INLINE uint4 aes_decrypt_block(uint4 s, AES_KEY_SPACE const uint *rk,
                                       AES_TABLE_SPACE const uint *td,
                                       AES_TABLE_SPACE const uchar *inv_sbox)
{
    s ^= AES_ROUND_KEY(rk, 0);
    AES_UNROLL
    for (int r = 1; r < AES_ROUNDS; ++r)
        s = aes_x86_decrypt_round(s, AES_ROUND_KEY(rk, r));
    return aes_x86_decrypt_last_round(s, AES_ROUND_KEY(rk, AES_ROUNDS));
}
#else
inline uint4 aes_encrypt_block(uint4 s, AES_KEY_SPACE const uint *rk,
                               AES_TABLE_SPACE const uint *te)
{
    const uint copy = aes_copy_bytes();
    s ^= AES_UINT4(rk[0], rk[1], rk[2], rk[3]);
    AES_UNROLL
    for (int r = 1; r < AES_ROUNDS; ++r) {
        const AES_KEY_SPACE uint *k = rk + 4 * r;
        s = AES_UINT4(AES_ROUND_COLUMN(te, s.x, s.y, s.z, s.w, k[0], copy),
                      AES_ROUND_COLUMN(te, s.y, s.z, s.w, s.x, k[1], copy),
                      AES_ROUND_COLUMN(te, s.z, s.w, s.x, s.y, k[2], copy),
                      AES_ROUND_COLUMN(te, s.w, s.x, s.y, s.z, k[3], copy));
    }
    const AES_KEY_SPACE uint *k = rk + 4 * AES_ROUNDS;
    return AES_UINT4(AES_FINAL_ENC_COLUMN(te, s.x, s.y, s.z, s.w, k[0], copy),
                     AES_FINAL_ENC_COLUMN(te, s.y, s.z, s.w, s.x, k[1], copy),
                     AES_FINAL_ENC_COLUMN(te, s.z, s.w, s.x, s.y, k[2], copy),
                     AES_FINAL_ENC_COLUMN(te, s.w, s.x, s.y, s.z, k[3], copy));
}

inline uint4 aes_decrypt_block(uint4 s, AES_KEY_SPACE const uint *rk,
                               AES_TABLE_SPACE const uint *td,
                               AES_TABLE_SPACE const uchar *inv_sbox)
{
    const uint copy = aes_copy_bytes();
    s ^= AES_UINT4(rk[0], rk[1], rk[2], rk[3]);
    AES_UNROLL
    for (int r = 1; r < AES_ROUNDS; ++r) {
        const AES_KEY_SPACE uint *k = rk + 4 * r;
        s = AES_UINT4(AES_ROUND_COLUMN(td, s.x, s.w, s.z, s.y, k[0], copy),
                      AES_ROUND_COLUMN(td, s.y, s.x, s.w, s.z, k[1], copy),
                      AES_ROUND_COLUMN(td, s.z, s.y, s.x, s.w, k[2], copy),
                      AES_ROUND_COLUMN(td, s.w, s.z, s.y, s.x, k[3], copy));
    }
    const AES_KEY_SPACE uint *k = rk + 4 * AES_ROUNDS;
    return AES_UINT4(AES_FINAL_DEC_COLUMN(inv_sbox, s.x, s.w, s.z, s.y, k[0]),
                     AES_FINAL_DEC_COLUMN(inv_sbox, s.y, s.x, s.w, s.z, k[1]),
                     AES_FINAL_DEC_COLUMN(inv_sbox, s.z, s.y, s.x, s.w, k[2]),
                     AES_FINAL_DEC_COLUMN(inv_sbox, s.w, s.z, s.y, s.x, k[3]));
}

#endif /* AES_X86_AESNI */

#ifndef AES_BLOCKS_PER_ITEM
#define AES_BLOCKS_PER_ITEM 1
#endif

/* ---- Which blocks a work-item takes ------------------------------------------ *
 * Every mode kernel walks its blocks in runs of W = AES_BLOCKS_PER_ITEM:
 *     const ulong end = aes_runs_end(n);
 *     for (ulong first = aes_first_run(n); first < end; first += aes_run_step())
 * and drops blocks at or past n, so a run never needs a shorter form.
 *
 * AES_CONTIGUOUS_RUNS=0 (GPUs, the simulator): a grid-stride loop. Work-item g
 * takes blocks gW .. gW+W-1, then the same G·W blocks further on (G = global
 * size), so neighbouring work-items touch neighbouring blocks at the same time,
 * which is what coalesces a GPU's memory accesses. Any global size works.
 *
 * AES_CONTIGUOUS_RUNS=1 (CPUs): work-item g takes one contiguous span of
 * ceil(n / G) blocks, rounded up to whole runs. A CPU runtime runs the
 * work-items of a group one after another on one thread, so under grid-stride
 * each thread swept the whole buffer once per work-item, touching two cache lines
 * in every 32 KiB: nearly every access missed the TLB and the prefetcher (PoCL 5.0
 * on a Xeon: 1.0 GB/s per thread at 64 MiB against 4.2 in cache). A span is read
 * front to back, as memory likes it on a CPU.
 *
 * Work-items past the end get an empty span; they have already passed the setup
 * barrier, which comes before the loop. */
#ifndef AES_CONTIGUOUS_RUNS
#define AES_CONTIGUOUS_RUNS 0
#endif

#if AES_CONTIGUOUS_RUNS
inline ulong aes_run_span(const ulong n)
{
    const ulong items = get_global_size(0);
    const ulong runs = ((n + items - 1ul) / items + AES_BLOCKS_PER_ITEM - 1ul) / AES_BLOCKS_PER_ITEM;
    return runs * AES_BLOCKS_PER_ITEM;
}
inline ulong aes_first_run(const ulong n) { return get_global_id(0) * aes_run_span(n); }
inline ulong aes_runs_end(const ulong n) { return min(n, aes_first_run(n) + aes_run_span(n)); }
inline ulong aes_run_step(void) { return AES_BLOCKS_PER_ITEM; }
#else
inline ulong aes_first_run(const ulong n) { return get_global_id(0) * AES_BLOCKS_PER_ITEM; }
inline ulong aes_runs_end(const ulong n) { return n; }
inline ulong aes_run_step(void) { return get_global_size(0) * AES_BLOCKS_PER_ITEM; }
#endif

#if AES_X86_AESNI
/* AES_BLOCKS_PER_ITEM blocks in place, round by round across all of them: the
 * blocks are independent, so their instructions overlap in the pipeline. Always
 * inlined: PoCL otherwise may keep a call that passes the states through memory
 * and stores each one after every round. */
#define AES_X86_RUN(s, rk, round, last_round)                              \
    do {                                                                    \
        uint4 k[AES_ROUNDS + 1];                                            \
        AES_UNROLL                                                          \
        for (int r = 0; r <= AES_ROUNDS; ++r)                               \
            k[r] = vload4(r, rk);                                           \
        AES_UNROLL                                                          \
        for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)                       \
            (s)[j] ^= k[0];                                                 \
        AES_UNROLL                                                          \
        for (int r = 1; r < AES_ROUNDS; ++r) {                              \
            AES_UNROLL                                                      \
            for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)                   \
                (s)[j] = round((s)[j], k[r]);                               \
        }                                                                   \
        AES_UNROLL                                                          \
        for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)                       \
            (s)[j] = last_round((s)[j], k[AES_ROUNDS]);                     \
    } while (0)

#if AES_WIDE_LANES > 1
#if AES_BLOCKS_PER_ITEM % AES_WIDE_LANES
#error "AES_BLOCKS_PER_ITEM must be a multiple of the blocks per wide register"
#endif
#define AES_WIDE_REGISTERS (AES_BLOCKS_PER_ITEM / AES_WIDE_LANES)

/* A run of AES_BLOCKS_PER_ITEM blocks in place on the wide instructions, every
 * round across all of the run's registers. Never inlined, so that it keeps the
 * VAES target (aes_vendor.h): one call, and the run's states through memory
 * once each way, per run. */
#define AES_X86_WIDE_RUN(name, round, last_round)                             \
    AES_X86_WIDE_TARGET __attribute__((noinline))                             \
    void name(uint4 *s, AES_KEY_SPACE const uint *rk)                         \
    {                                                                         \
        aes_x86_wide w[AES_WIDE_REGISTERS];                                   \
        const aes_x86_wide first_key = AES_WIDE_BROADCAST(vload4(0, rk));     \
        AES_UNROLL                                                            \
        for (int j = 0; j < AES_WIDE_REGISTERS; ++j)                          \
            w[j] = AES_WIDE_PACK(s, j * AES_WIDE_LANES) ^ first_key;          \
        AES_UNROLL                                                            \
        for (int r = 1; r < AES_ROUNDS; ++r) {                                \
            const aes_x86_wide k = AES_WIDE_BROADCAST(vload4(r, rk));         \
            AES_UNROLL                                                        \
            for (int j = 0; j < AES_WIDE_REGISTERS; ++j)                      \
                w[j] = AES_WIDE_BUILTIN(round)(w[j], k);                      \
        }                                                                     \
        const aes_x86_wide last_key = AES_WIDE_BROADCAST(vload4(AES_ROUNDS, rk)); \
        AES_UNROLL                                                            \
        for (int j = 0; j < AES_WIDE_REGISTERS; ++j)                          \
            AES_WIDE_UNPACK(s, j * AES_WIDE_LANES,                            \
                            AES_WIDE_BUILTIN(last_round)(w[j], last_key));    \
    }

AES_X86_WIDE_RUN(aes_x86_wide_encrypt_run, aesenc, aesenclast)
AES_X86_WIDE_RUN(aes_x86_wide_decrypt_run, aesdec, aesdeclast)
#endif

AES_X86_INLINE void aes_encrypt_blocks(uint4 *s, AES_KEY_SPACE const uint *rk,
                                       AES_TABLE_SPACE const uint *te)
{
#if AES_WIDE_LANES > 1
    aes_x86_wide_encrypt_run(s, rk);
#else
    AES_X86_RUN(s, rk, aes_x86_encrypt_round, aes_x86_encrypt_last_round);
#endif
}

AES_X86_INLINE void aes_decrypt_blocks(uint4 *s, AES_KEY_SPACE const uint *rk,
                                       AES_TABLE_SPACE const uint *td,
                                       AES_TABLE_SPACE const uchar *inv_sbox)
{
#if AES_WIDE_LANES > 1
    aes_x86_wide_decrypt_run(s, rk);
#else
    AES_X86_RUN(s, rk, aes_x86_decrypt_round, aes_x86_decrypt_last_round);
#endif
}
#else
/* Table rounds have no long-latency instruction to hide: one block after another. */
inline void aes_encrypt_blocks(uint4 *s, AES_KEY_SPACE const uint *rk,
                               AES_TABLE_SPACE const uint *te)
{
    for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
        s[j] = aes_encrypt_block(s[j], rk, te);
}

inline void aes_decrypt_blocks(uint4 *s, AES_KEY_SPACE const uint *rk,
                               AES_TABLE_SPACE const uint *td,
                               AES_TABLE_SPACE const uchar *inv_sbox)
{
    for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
        s[j] = aes_decrypt_block(s[j], rk, td, inv_sbox);
}
#endif

#endif /* AES_CORE_CL */
