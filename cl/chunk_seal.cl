/* chunk_seal.cl: full chunks of the chunked format sealed and opened in one pass,
 * for CPU devices with the AES and carry-less multiply instructions.
 *
 * The portable route (chunk_layout.cl with aes_gcm.cl) stages the plaintext,
 * encrypts it in place, reads it all again for GHASH, then copies it into the
 * sealed layout: four trips through memory that a GPU hides behind its bandwidth
 * and a CPU does not. Here each 16-byte block is read once and written once: a
 * run of AES_BLOCKS_PER_ITEM blocks is encrypted and folded into GHASH while it
 * is still in registers.
 *
 * Layouts, in 16-byte blocks (as chunk_layout.cl; a chunk is 1024 blocks):
 *   slots:  chunk k at block 1024k (plaintext);
 *   sealed: chunk k at block 1025k: its 1024 blocks of ciphertext, then its tag.
 * chunks_open writes the plaintext slots, then the computed tags, then the
 * received ones (the layout of aescl.engines.opencl.ChunkCipher._checked): the host
 * compares them before any of the plaintext leaves the run.
 * J0 of chunk `first + k` is chunk_j0(base_j0, first + k); data block i of a chunk
 * is encrypted under inc32^(1+i)(J0), and the tag is E(J0) ^ GHASH.
 *
 * Mapping: one work-item per chunk, grid-stride over chunks; a chunk's 16 KiB
 * are read and written front to back. GHASH is Horner's rule over runs, one
 * reduction per run: sum = (sum ^ C_0)·H^W ^ C_1·H^(W-1) ^ ... ^ C_(W-1)·H.
 * h_tables are the nibble tables of H^1.. (aescl/gcm.py); entry 8 of H^k's table
 * is H^k itself, and the host builds at least W of them.
 *
 * -D options: those of aes_gcm.cl. The kernels exist only where the core runs on
 * AES-NI and GHASH is carry-less (AES_HARDWARE_ROUNDS=1, GHASH_CARRYLESS=1), and
 * AES_BLOCKS_PER_ITEM must divide 1024; the host falls back to the portable route
 * elsewhere.
 */
#include "aes_gcm.cl"
#include "chunk_layout.cl"

#if GHASH_CARRYLESS && AES_X86_AESNI
#if CHUNK_BLOCKS % AES_BLOCKS_PER_ITEM
#error "AES_BLOCKS_PER_ITEM must divide the 1024 blocks of a chunk"
#endif

/* GHASH state after one more run of ciphertext (blocks in memory order). */
AES_X86_INLINE ulong2 chunk_absorb_run(ulong2 sum, const uint4 *c, const ulong2 *powers)
{
    ulong4 product = ghash_clmul_wide(sum ^ ghash_load(c[0]), powers[AES_BLOCKS_PER_ITEM - 1]);
    AES_UNROLL
    for (int b = 1; b < AES_BLOCKS_PER_ITEM; ++b)
        product ^= ghash_clmul_wide(ghash_load(c[b]), powers[AES_BLOCKS_PER_ITEM - 1 - b]);
    return ghash_reduce(product);
}

#if AES_WIDE_LANES > 1
/* One full chunk from `in` to `out` on the wide instructions, and its GHASH sum as
 * chunk_crypt returns it. Each run of W blocks stays in wide registers from start
 * to end: counter blocks, AES, the XOR with the input, the output, and the run's
 * GHASH products, with one reduction. GHASH reads each block with its bytes
 * reversed, which puts (lo, hi) in a lane, so immediate 0x00 multiplies the low
 * halves and 0x11 the high ones; the powers are laid out once per chunk to match
 * (block b of a run meets H^(W-b)), and the round keys broadcast once. Never
 * inlined (aes_vendor.h): done a block at a time, the work around the AES and
 * GHASH instructions cost the Xeon's PoCL more than the instructions themselves. */
AES_X86_WIDE_TARGET __attribute__((noinline))
ulong2 chunk_crypt_wide(__global const uint4 *in, __global uint4 *out, const uint4 j0,
                        const bool opening, const ulong2 *powers,
                        AES_KEY_SPACE const uint *rk, const uint blocks)
{
    aes_x86_wide keys[AES_ROUNDS + 1], lane_powers[AES_WIDE_REGISTERS];
    AES_UNROLL
    for (int r = 0; r <= AES_ROUNDS; ++r)
        keys[r] = AES_WIDE_BROADCAST(vload4(r, rk));
    ulong2 descending[AES_BLOCKS_PER_ITEM];
    AES_UNROLL
    for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b)
        descending[b] = powers[AES_BLOCKS_PER_ITEM - 1 - b].s10;
    AES_UNROLL
    for (int j = 0; j < AES_WIDE_REGISTERS; ++j)
        lane_powers[j] = AES_WIDE_PACK_AS(descending, j * AES_WIDE_LANES, as_uint4);
    const aes_x86_wide zero = AES_WIDE_BROADCAST((uint4)(0u));
    ulong2 sum = (ulong2)(0ul, 0ul);
    for (uint first = 0; first < blocks; first += AES_BLOCKS_PER_ITEM) {
        aes_x86_wide w[AES_WIDE_REGISTERS];
        const uint counter = aes_bswap32(j0.w) + 1u + first;
        AES_UNROLL
        for (int j = 0; j < AES_WIDE_REGISTERS; ++j)
            w[j] = AES_WIDE_FROM_UINTS(AES_WIDE_COUNTERS(j0, counter + (uint)(j * AES_WIDE_LANES)))
                 ^ keys[0];
        AES_UNROLL
        for (int r = 1; r < AES_ROUNDS; ++r) {
            AES_UNROLL
            for (int j = 0; j < AES_WIDE_REGISTERS; ++j)
                w[j] = AES_WIDE_BUILTIN(aesenc)(w[j], keys[r]);
        }
        aes_x86_wide low = zero, high = zero, middle = zero;
        AES_UNROLL
        for (int j = 0; j < AES_WIDE_REGISTERS; ++j) {
            const AES_WIDE_UINTS x = AES_WIDE_LOAD(in + first + j * AES_WIDE_LANES);
            const AES_WIDE_UINTS y =
                x ^ AES_WIDE_TO_UINTS(AES_WIDE_BUILTIN(aesenclast)(w[j], keys[AES_ROUNDS]));
            AES_WIDE_STORE(y, out + first + j * AES_WIDE_LANES);
            aes_x86_wide c = AES_WIDE_REVERSE_LANES(opening ? x : y);   /* the ciphertext */
            if (j == 0)
                c ^= AES_WIDE_LANE0(sum.s1, sum.s0);
            low ^= AES_WIDE_BUILTIN(pclmulqdq)(c, lane_powers[j], 0x00);
            high ^= AES_WIDE_BUILTIN(pclmulqdq)(c, lane_powers[j], 0x11);
            middle ^= AES_WIDE_BUILTIN(pclmulqdq)(c, lane_powers[j], 0x01)
                    ^ AES_WIDE_BUILTIN(pclmulqdq)(c, lane_powers[j], 0x10);
        }
        const ulong2 l = AES_WIDE_FOLD(low), h = AES_WIDE_FOLD(high);
        const ulong2 m = AES_WIDE_FOLD(middle);
        sum = ghash_reduce((ulong4)(h.s1, h.s0 ^ m.s1, l.s1 ^ m.s0, l.s0));
    }
    return sum;
}
#endif

/* The keystream of data blocks first .. first+W-1 of the chunk whose J0 is j0, in
 * memory order. */
AES_X86_INLINE void chunk_keystream_run(const uint4 j0, const uint first, uint4 *s,
                                        AES_KEY_SPACE const uint *rk,
                                        AES_TABLE_SPACE const uint *te)
{
    AES_UNROLL
    for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b)
        s[b] = gcm_counter(j0, 1u + first + b);
    aes_encrypt_blocks(s, rk, te);
    AES_UNROLL
    for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b)
        s[b] = aes_store(s[b]);
}

/* The tag of a full chunk from its GHASH sum without the length block. */
AES_X86_INLINE uint4 chunk_tag(const ulong2 sum, const uint4 j0, const ulong2 h,
                               AES_KEY_SPACE const uint *rk, AES_TABLE_SPACE const uint *te)
{
    const ulong2 length_block = (ulong2)(0ul, 8ul * 16ul * CHUNK_BLOCKS);
    return ghash_store(ghash_multiply_carryless(sum ^ length_block, h))
         ^ aes_store(aes_encrypt_block(j0, rk, te));
}

/* `blocks` blocks (a multiple of AES_BLOCKS_PER_ITEM: a full chunk's 1024, or a
 * message's whole runs) from `in` to `out` (out = in ^ keystream), and their GHASH
 * sum over the ciphertext without the length block: the output when sealing, the
 * input when opening. The chunks' kernels call it with a constant `opening`, so each
 * keeps only its own branch. */
AES_X86_INLINE ulong2 chunk_crypt(__global const uint4 *in, __global uint4 *out,
                                  const uint4 j0, const bool opening, const ulong2 *powers,
                                  AES_KEY_SPACE const uint *rk, AES_TABLE_SPACE const uint *te,
                                  const uint blocks)
{
#if AES_WIDE_LANES > 1
    return chunk_crypt_wide(in, out, j0, opening, powers, rk, blocks);
#endif
    ulong2 sum = (ulong2)(0ul, 0ul);
    for (uint i = 0; i < blocks; i += AES_BLOCKS_PER_ITEM) {
        uint4 s[AES_BLOCKS_PER_ITEM];
        chunk_keystream_run(j0, i, s, rk, te);
        AES_UNROLL
        for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b) {
            const uint4 x = in[i + b];
            out[i + b] = s[b] ^ x;
            s[b] = opening ? x : s[b] ^ x;   /* the ciphertext, for GHASH */
        }
        sum = chunk_absorb_run(sum, s, powers);
    }
    return sum;
}

/* Declares `powers`: H^1 .. H^W from the nibble tables (entry 8 of table k-1). */
#define CHUNK_LOAD_POWERS(powers, h_tables)                 \
    ulong2 powers[AES_BLOCKS_PER_ITEM];                     \
    for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b)           \
        powers[b] = (h_tables)[16 * b + 8]

AES_CPU_TARGET __kernel void chunks_seal(__global const uint4 *slots, __global uint4 *sealed,
                                         const uint4 base_j0, const ulong first,
                                         const uint chunk_count,
                                         __global const ulong2 *h_tables,
                                         AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    CHUNK_LOAD_POWERS(powers, h_tables);
    for (uint k = get_global_id(0); k < chunk_count; k += get_global_size(0)) {
        const uint4 j0 = chunk_j0(base_j0, first + k);
        __global uint4 *out = sealed + (ulong)k * SEALED_CHUNK_BLOCKS;
        const ulong2 sum = chunk_crypt(slots + (ulong)k * CHUNK_BLOCKS, out, j0, false,
                                       powers, rk, te, CHUNK_BLOCKS);
        out[CHUNK_BLOCKS] = chunk_tag(sum, j0, powers[0], rk, te);
    }
}

AES_CPU_TARGET __kernel void chunks_open(__global const uint4 *sealed, __global uint4 *out,
                                         const uint4 base_j0, const ulong first,
                                         const uint chunk_count,
                                         __global const ulong2 *h_tables,
                                         AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    CHUNK_LOAD_POWERS(powers, h_tables);
    __global uint4 *computed_tags = out + (ulong)chunk_count * CHUNK_BLOCKS;
    __global uint4 *received_tags = computed_tags + chunk_count;
    for (uint k = get_global_id(0); k < chunk_count; k += get_global_size(0)) {
        const uint4 j0 = chunk_j0(base_j0, first + k);
        __global const uint4 *in = sealed + (ulong)k * SEALED_CHUNK_BLOCKS;
        const ulong2 sum = chunk_crypt(in, out + (ulong)k * CHUNK_BLOCKS, j0, true,
                                       powers, rk, te, CHUNK_BLOCKS);
        computed_tags[k] = chunk_tag(sum, j0, powers[0], rk, te);
        received_tags[k] = in[CHUNK_BLOCKS];
    }
}

/* Many independent GCM messages of one length, each with its own J0, in one pass as
 * the chunks above (aescl/engines/programs/device_messages.py; gcm_crypt_hash's work on
 * other devices): message m's `message_blocks` whole blocks from block
 * input_first + m * input_stride of `input` to block output_first + m * output_stride
 * of `output`, GHASH over the ciphertext (the input when `opening`). Its tag,
 * E(J0) ^ GHASH, XORed with tag_masks[m * tag_mask_step] where tag_masks is not NULL
 * (the share of its associated data, made on the host), goes to block
 * tags_first + m * tag_stride of `tags` where that is not NULL; where `received` is
 * not NULL it is compared with block received_first + m * received_stride there,
 * and a mismatch lowers *verdict to verdict_first + m (every tag compared, with no
 * early exit). Offsets in blocks, as gcm_crypt_hash takes them: the host needs no
 * sub-buffers, whose origins must be aligned. J0 of message m is j0s[m] (16 bytes in
 * memory order), or `lone_j0` (by value, as chunks_seal's base_j0) where j0s is NULL.
 * Mapping: one work-item per message, grid-stride over messages, so that a launch
 * of many small messages is a few work-groups, not one a message. */
AES_CPU_TARGET __kernel void messages_crypt(__global const uint4 *input,
                                            __global uint4 *output,
                                            const uint message_blocks,
                                            const uint input_stride, const uint output_stride,
                                            const uint input_first, const uint output_first,
                                            const uint message_count, const uint opening,
                                            __global const uint4 *j0s, const uint4 lone_j0,
                                            __global uint4 *tags, const uint tags_first,
                                            const uint tag_stride,
                                            __global const uint4 *tag_masks,
                                            const uint tag_mask_step,
                                            __global const uint4 *received,
                                            const uint received_first,
                                            const uint received_stride,
                                            __global uint *verdict, const uint verdict_first,
                                            __global const ulong2 *h_tables,
                                            AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    CHUNK_LOAD_POWERS(powers, h_tables);
    const uint whole_runs = message_blocks - message_blocks % AES_BLOCKS_PER_ITEM;
    const ulong2 length_block = (ulong2)(0ul, 128ul * message_blocks);
    for (uint m = get_global_id(0); m < message_count; m += get_global_size(0)) {
        const uint4 j0 = j0s ? aes_load(j0s[m]) : lone_j0;
        __global const uint4 *in = input + input_first + (ulong)m * input_stride;
        __global uint4 *out = output + output_first + (ulong)m * output_stride;
        ulong2 sum = chunk_crypt(in, out, j0, opening != 0u, powers, rk, te, whole_runs);
        for (uint i = whole_runs; i < message_blocks; ++i) {   /* past the last whole run */
            const uint4 x = in[i];
            const uint4 y = x ^ aes_store(aes_encrypt_block(gcm_counter(j0, 1u + i), rk, te));
            out[i] = y;
            sum = ghash_multiply_carryless(sum ^ ghash_load(opening ? x : y), powers[0]);
        }
        uint4 tag = ghash_store(ghash_multiply_carryless(sum ^ length_block, powers[0]))
                  ^ aes_store(aes_encrypt_block(j0, rk, te));
        if (tag_masks)
            tag ^= tag_masks[(ulong)m * tag_mask_step];
        if (tags)
            tags[tags_first + (ulong)m * tag_stride] = tag;
        if (received) {
            const uint4 d = tag ^ received[received_first + (ulong)m * received_stride];
            if (d.x | d.y | d.z | d.w)
                atomic_min(verdict, verdict_first + m);
        }
    }
}
#endif
