/* aes_gcm.cl: AES-GCM for many independent messages per launch (one key).
 *
 * Buffer layout: the messages lie one after another, each in a slot of
 * `message_blocks` 16-byte blocks in memory order; the last message may end
 * early (block_count need not fill its slot). A stride (in blocks) may set the
 * slots further apart than their length: then message m starts at block
 * m * stride. That is how the chunked format is sealed from its plaintext layout
 * straight into its sealed one (a tag after each chunk, stride message_blocks + 1)
 * and opened back, without copies through slots. message_bytes[m] is message m's
 * length within this launch: bytes past it are padding. j0s[m] is message m's
 * pre-counter block J0 (SP 800-38D), as 16 bytes in memory order.
 *
 * Kernels, enqueued in this order on one in-order queue:
 *   encrypt: gcm_ctr_xor, gcm_ghash, [gcm_tags]
 *   decrypt: gcm_ghash, [gcm_tags], gcm_ctr_xor  (GHASH reads the ciphertext)
 * and for one long message in segments: gcm_ghash, ghash_sums_as_blocks, gcm_ghash.
 * gcm_tags serves messages with empty AAD (the chunked format); the host folds
 * AAD and partial blocks itself for the streaming API (aescl/gcm.py).
 *
 * Indices are 32-bit: the host keeps each launch under 2^32 blocks.
 * -D options: those of aes_core.cl (AES_ROUNDS, AES_KEY_SCHEDULE_DEVICE, ...), and
 * GHASH_STRIDE_IN_LOCAL (below; default 1).
 */
#include "aes_core.cl"
#include "ghash.cl"
#include "chunk_j0.h"

/* Work-items per GHASH work-group at most (the host picks a power of two). */
#define GCM_MAX_GHASH_ITEMS 256
/* gcm_crypt_hash's last step, from the Horner sums S_t of a message's `items`
 * work-items to its GHASH: pairs of sums, level by level, each level a product by a
 * position table of H^(2^level) (0: ghash_pair_sums), or each S_t times its own
 * power of H at once, then a tree of XORs (1: ghash_sums_by_powers; the CUDA
 * engine's build for a lone message, where the pairing's eight levels of table reads
 * from global memory were most of a 4 KiB call's GPU time). The powers are
 * ghash_powers' (below), read from GHASH_POWERS_AT 16-byte entries into h_positions. */
#ifndef GCM_SUMS_BY_POWERS
#define GCM_SUMS_BY_POWERS 0
#endif
#define GHASH_POSITION_POWERS 9   /* position tables of H^1, H^2 .. H^GCM_MAX_GHASH_ITEMS */
#define GHASH_POWERS (GCM_MAX_GHASH_ITEMS + 1)   /* H^1 .. H^(items + 1) */
#define GHASH_POWERS_AT (GHASH_POSITION_POWERS * GHASH_POSITION_ENTRIES)
/* Where gcm_ghash's work-items read the position tables of their stride, H^T: a copy
 * in __local memory per work-group (1), or __global memory through the cache (0: the
 * CUDA engine, where it was as fast and takes no shared memory from the work-groups
 * an SM can hold; aescl/engines/cuda/workers.py). */
#ifndef GHASH_STRIDE_IN_LOCAL
#define GHASH_STRIDE_IN_LOCAL 1
#endif

/* inc32 applied `steps` times: only the last 32 bits (big-endian) count, and they
 * wrap without carrying into the nonce. `j0` is in the core's column layout. */
inline uint4 gcm_counter(uint4 j0, uint steps)
{
    j0.w = aes_bswap32(aes_bswap32(j0.w) + steps);
    return j0;
}

/* Of a column whose first byte is byte `start` of the block, keep the bytes below
 * byte `count` of the block (the column's low bytes come first in memory). Spelled
 * with min(): the compare-and-subtract form compiles to a saturating-subtract
 * intrinsic that Oclgrind 21.10 cannot run. */
inline uint gcm_keep_column(uint v, uint count, uint start)
{
    const uint kept = min(count - min(count, start), 4u);
    return kept < 4u ? v & ((1u << (8u * kept)) - 1u) : v;
}

/* Keep the first `count` bytes (0..16) of a block in column layout, zero the rest. */
inline uint4 gcm_keep_bytes(uint4 v, uint count)
{
    return AES_UINT4(gcm_keep_column(v.x, count, 0u), gcm_keep_column(v.y, count, 4u),
                     gcm_keep_column(v.z, count, 8u), gcm_keep_column(v.w, count, 12u));
}

/* CTR half: block j of message m is XORed with E(inc32^(first_step + j)(J0_m)).
 * first_step is 1 + the message's block offset for data (the first data block
 * uses J0 + 1); 0 yields E(J0) itself, which is how the host gets H = E(0^128) and
 * the tag mask. Bytes past the message end come out zero, so that GHASH over the
 * ciphertext sees the zero padding SP 800-38D prescribes. Runs of
 * AES_BLOCKS_PER_ITEM blocks, mapped as aes_core.cl's AES_CONTIGUOUS_RUNS says.
 * Reads the messages from `input` at `input_stride` and writes them to `output` at
 * `output_stride` (in place: the same buffer, both strides message_blocks). */
AES_CPU_TARGET __kernel void gcm_ctr_xor(__global const uint4 *input, __global uint4 *output,
                          const uint block_count, const uint message_blocks,
                          const uint input_stride, const uint output_stride,
                          const uint first_step,
                          __global const uint4 *j0s, __global const ulong *message_bytes,
                          AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    const uint end = (uint)aes_runs_end(block_count);
    for (uint first = (uint)aes_first_run(block_count); first < end;
         first += (uint)aes_run_step()) {
        uint4 s[AES_BLOCKS_PER_ITEM];
        AES_UNROLL
        for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b) {
            const uint i = min(first + b, block_count - 1u);   /* past the end: dropped */
            const uint m = i / message_blocks;
            s[b] = gcm_counter(aes_load(j0s[m]), first_step + (i - m * message_blocks));
        }
        aes_encrypt_blocks(s, rk, te);
        AES_UNROLL
        for (int b = 0; b < AES_BLOCKS_PER_ITEM; ++b) {
            const uint i = first + b;
            if (i >= block_count)
                break;
            const uint m = i / message_blocks;
            const uint j = i - m * message_blocks;
            const ulong offset = 16ul * j;
            uint4 block = aes_load(input[m * input_stride + j]) ^ s[b];
            if (message_bytes[m] < offset + 16ul)
                block = gcm_keep_bytes(block, message_bytes[m] > offset
                                                  ? (uint)(message_bytes[m] - offset) : 0u);
            output[m * output_stride + j] = aes_store(block);
        }
    }
}

/* GHASH half. Work-group g takes messages g, g + groups, ... and returns for each
 * the sum over its blocks X_0..X_{k-1} of X_i·H^(k-i), i.e. GHASH of the message
 * without the length block. Message m is read from block m * message_stride.
 *
 * With T work-items (a power of two), the message is aligned to the end of
 * ceil(k/T)·T virtual blocks (zero blocks in front change nothing), item t takes
 * virtual blocks t, t+T, t+2T, ... (coalesced reads) and runs Horner's rule with
 * the fixed multiplier H^T from __local memory; one multiplication by H^(T-t)
 * then puts its sum in place, and a tree of XORs in __local memory adds the T
 * sums. h_tables holds the nibble tables of H^1..H^T (table k-1 for H^k).
 * T <= GCM_MAX_GHASH_ITEMS. */
#if GHASH_CARRYLESS && AES_X86_AESNI
/* The carry-less form (ghash.cl): each work-item takes whole messages, and runs of
 * GCM_CARRYLESS_RUN blocks share one reduction, each block multiplied by its own
 * power of H (Horner's rule over runs): sum = (sum ^ X_i)·H^8 ^ X_(i+1)·H^7 ^ ...
 * ^ X_(i+7)·H. A lead of length mod 8 blocks goes one at a time first. The powers
 * come from the nibble tables: entry 8 of H^k's table is H^k itself. The host
 * builds at least GCM_CARRYLESS_RUN tables (aescl/gcm.py). */
#define GCM_CARRYLESS_RUN 8
AES_CPU_TARGET __kernel void gcm_ghash(__global const uint4 *data, const uint block_count,
                        const uint message_blocks, const uint message_stride,
                        const uint message_count, __global const ulong2 *h_tables,
                        __global const ulong2 *h_positions, __global ulong2 *partials)
{
    ulong2 powers[GCM_CARRYLESS_RUN];   /* powers[k] = H^(k+1) */
    for (int k = 0; k < GCM_CARRYLESS_RUN; ++k)
        powers[k] = h_tables[16 * k + 8];
    for (uint m = get_global_id(0); m < message_count; m += get_global_size(0)) {
        const uint first = m * message_blocks;
        const uint length = first < block_count ? min(message_blocks, block_count - first) : 0u;
        __global const uint4 *x = data + (ulong)m * message_stride;
        ulong2 sum = AES_ULONG2(0ul, 0ul);
        uint i = 0;
        for (; i < length % GCM_CARRYLESS_RUN; ++i)
            sum = ghash_multiply_carryless(sum ^ ghash_load(x[i]), powers[0]);
        for (; i < length; i += GCM_CARRYLESS_RUN) {
            ulong4 product = ghash_clmul_wide(sum ^ ghash_load(x[i]),
                                              powers[GCM_CARRYLESS_RUN - 1]);
            AES_UNROLL
            for (int b = 1; b < GCM_CARRYLESS_RUN; ++b)
                product ^= ghash_clmul_wide(ghash_load(x[i + b]),
                                            powers[GCM_CARRYLESS_RUN - 1 - b]);
            sum = ghash_reduce(product);
        }
        partials[m] = sum;
    }
}
#else
/* The stride's position tables (ghash.cl) of H^(2^level): a copy in __local memory
 * (GHASH_STRIDE_IN_LOCAL, made by the whole work-group) or __global memory through
 * the cache. Declares `name` at kernel scope, where OpenCL C wants __local arrays. */
#if GHASH_STRIDE_IN_LOCAL
#define GHASH_STRIDE_TABLES(name, positions, level)                            \
    AES_LOCAL_ARRAY ulong name[2 * GHASH_POSITION_ENTRIES];                     \
    for (uint n_ = get_local_id(0); n_ < 2u * GHASH_POSITION_ENTRIES;           \
         n_ += get_local_size(0))                                               \
        name[n_] = (positions)[2u * GHASH_POSITION_ENTRIES * (level) + n_];     \
    barrier(CLK_LOCAL_MEM_FENCE)
#define GHASH_STRIDE_MULTIPLY ghash_multiply_positions_local
#else
#define GHASH_STRIDE_TABLES(name, positions, level)                            \
    __global const ulong *name = (positions) + 2u * GHASH_POSITION_ENTRIES * (level)
#define GHASH_STRIDE_MULTIPLY ghash_multiply_positions_global
#endif

inline uint ghash_log2(uint items)   /* of a power of two */
{
    uint level = 0;
    while ((1u << level) < items)
        ++level;
    return level;
}

/* A message's partial sum from the Horner sums S_t of its `items` work-items (this
 * one is item t, and the message's item 0 is work-item `here` of the group), short of
 * one factor H: the sum over t of S_t·H^(items-1-t). Adjacent sums pair up level by
 * level, the earlier one times H^(2^level), until one sum is left. The caller puts it
 * in place by H, alone (gcm_ghash) or folded into the tag's products (gcm_crypt_hash).
 * Item 0 gets the result (the others zero). Every work-item of the group calls this
 * alike: it has barriers, and leaves `scratch` free for the next call. */
inline ulong2 ghash_pair_sums(ulong2 sum, __local ulong2 *scratch, const uint here,
                              const uint t, const uint items,
                              __global const ulong *positions)
{
    scratch[here + t] = sum;
    uint level = 0;
    for (uint width = items >> 1; width; width >>= 1, ++level) {
        barrier(CLK_LOCAL_MEM_FENCE);
        ulong2 paired = AES_ULONG2(0ul, 0ul);
        if (t < width)
            paired = ghash_multiply_positions_global(
                         scratch[here + 2u * t], positions + 2u * GHASH_POSITION_ENTRIES * level)
                     ^ scratch[here + 2u * t + 1u];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < width)
            scratch[here + t] = paired;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const ulong2 total = t == 0u ? scratch[here] : AES_ULONG2(0ul, 0ul);
    barrier(CLK_LOCAL_MEM_FENCE);   /* scratch is read before the next call writes */
    return total;
}

/* ghash_pair_sums' sum times H^2, which gcm_crypt_hash's tag needs (GCM_SUMS_BY_POWERS):
 * each item's S_t times its own power H^(items + 1 - t) (powers[k - 1] = H^k), then
 * the products added by a tree of XORs in `scratch`: one product a work-item, all at
 * once, where the pairing makes log2(items) products one after another, each waiting
 * on table reads and a barrier. The product is bit by bit (ghash_multiply_bitwise: no
 * tables; its branches follow the bits of S_t, which is the hashed text's, not H's).
 * An item whose blocks all lie in the message's virtual lead (`hashed` false) adds
 * zero. Item 0 gets the result (the others zero); the same rules as ghash_pair_sums. */
inline ulong2 ghash_sums_by_powers(ulong2 sum, __local ulong2 *scratch, const uint here,
                                   const uint t, const uint items, const bool hashed,
                                   __global const ulong2 *powers)
{
    scratch[here + t] = hashed ? ghash_multiply_bitwise(sum, powers[items - t])
                               : AES_ULONG2(0ul, 0ul);
    for (uint width = items >> 1; width; width >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < width)
            scratch[here + t] ^= scratch[here + t + width];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const ulong2 total = t == 0u ? scratch[here] : AES_ULONG2(0ul, 0ul);
    barrier(CLK_LOCAL_MEM_FENCE);   /* scratch is read before the next call writes */
    return total;
}

AES_CPU_TARGET __kernel void gcm_ghash(__global const uint4 *data, const uint block_count,
                        const uint message_blocks, const uint message_stride,
                        const uint message_count, __global const ulong2 *h_tables,
                        __global const ulong2 *h_positions, __global ulong2 *partials)
{
    const uint t = get_local_id(0);
    const uint items = get_local_size(0);
    AES_LOCAL_ARRAY ulong2 scratch[GCM_MAX_GHASH_ITEMS];
    __global const ulong *positions = (__global const ulong *)h_positions;
    GHASH_STRIDE_TABLES(stride_positions, positions, ghash_log2(items));   /* of H^T */

    for (uint m = get_group_id(0); m < message_count; m += get_num_groups(0)) {
        const uint first = m * message_blocks;
        const uint length = first < block_count ? min(message_blocks, block_count - first) : 0u;
        const uint steps = (length + items - 1u) / items;
        const uint lead = steps * items - length;   /* virtual zero blocks in front */
        ulong2 sum = AES_ULONG2(0ul, 0ul);
        for (uint s = 0; s < steps; ++s) {
            const uint v = t + s * items;
            const ulong2 x = v >= lead ? ghash_load(data[m * message_stride + v - lead])
                                       : AES_ULONG2(0ul, 0ul);
            sum = (s ? GHASH_STRIDE_MULTIPLY(sum, stride_positions) : sum) ^ x;
        }
        const ulong2 total = ghash_pair_sums(sum, scratch, 0u, t, items, positions);
        if (t == 0u)
            partials[m] = ghash_multiply_positions_global(total, positions);   /* ·H */
    }
}

/* CTR, GHASH and the tags in one pass: the chunked format's batches (all messages
 * from block 0 of their own counter, first_step 1, and with empty AAD): the text
 * is read and written once, and one launch does the work of gcm_ctr_xor, gcm_ghash
 * and gcm_tags.
 *
 * A work-group of L work-items takes L / `items` messages at a time (L a multiple of
 * `items`, a power of two up to GCM_MAX_GHASH_ITEMS); each message goes to `items`
 * work-items as in gcm_ghash: aligned to the end of its virtual blocks, item t takes
 * virtual blocks t, t + items, ..., encrypts each block's counter, writes the block
 * out and adds the ciphertext (the output when sealing, `hash_output` = 1; the input
 * when opening) into its Horner sum by H^items. The sums pair up as in gcm_ghash, and
 * the first item of each message writes its tag, E(J0) ^ ((sum·H) ^ L)·H, to
 * tags[tags_first + m * tag_stride]. Bytes past a message's end are written as zeros
 * and hashed as zeros (SP 800-38D's padding), on both sides. Message m is read from
 * block input_first + m * input_stride and written from output_first + m *
 * output_stride: offsets in the buffers, so that the host needs no sub-buffers, whose
 * release waits in NVIDIA's OpenCL for all the work on the device.
 *
 * Where j0s is not NULL, message m's J0 is j0s[m] and every message is message_blocks
 * whole blocks (many independent messages of one length: no lengths to upload); where
 * it is NULL, the messages are chunks first_chunk, first_chunk + 1, ... of the chunked
 * format (J0 from base_j0, chunk_j0.h), all message_blocks long but the last, of
 * last_bytes. Opening a device
 * array this way launches nothing before this kernel: each command before it is host
 * time in which the device idles, since an opening waits for its verdict.
 *
 * Where `verdict` is not NULL (opening), each message's tag is compared in full with
 * its received one, at block received_first + m * received_stride of `received`, and
 * a mismatch lowers *verdict to verdict_first + m (atomic_min: the host sets it to
 * 0xffffffff before). Where `tags` is NULL no tag is written.
 *
 * Where `tag_masks` is not NULL, each tag is XORed (as its bytes) with
 * tag_masks[m * tag_mask_step] before it is written or compared: the share of a
 * message's associated data in its tag, which this kernel does not hash (GHASH is
 * linear: the AAD's blocks times the powers of H past the text's, and its length in
 * the length block), made on the host (aescl/engines/programs/device_messages.py).
 *
 * -D GCM_CRYPT_HASH_MAX_GROUP: the largest L the host launches (default 256; the
 * sums' scratch is L 16-byte elements of __local memory). */
#ifndef GCM_CRYPT_HASH_MAX_GROUP
#define GCM_CRYPT_HASH_MAX_GROUP 256
#endif
AES_CPU_TARGET __kernel void gcm_crypt_hash(__global const uint4 *input, __global uint4 *output,
                             const uint block_count, const uint message_blocks,
                             const uint input_stride, const uint output_stride,
                             const uint input_first, const uint output_first,
                             const uint message_count, const uint items,
                             const uint hash_output,
                             __global const uint4 *j0s,
                             const uint4 base_j0, const ulong first_chunk,
                             const ulong last_bytes,
                             __global const ulong2 *h_positions, __global uint4 *tags,
                             const uint tags_first, const uint tag_stride,
                             __global const uint4 *tag_masks, const uint tag_mask_step,
                             __global const uint4 *received, const uint received_first,
                             const uint received_stride, __global uint *verdict,
                             const uint verdict_first,
                             AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    const uint t = get_local_id(0) % items;
    const uint here = get_local_id(0) - t;   /* the message's first work-item */
    const uint together = get_local_size(0) / items;   /* messages at a time */
    AES_LOCAL_ARRAY ulong2 scratch[GCM_CRYPT_HASH_MAX_GROUP];
    __global const ulong *positions = (__global const ulong *)h_positions;
    GHASH_STRIDE_TABLES(stride_positions, positions, ghash_log2(items));   /* of H^items */

    for (uint first_message = get_group_id(0) * together; first_message < message_count;
         first_message += get_num_groups(0) * together) {
        /* (every work-item goes round the loop alike: the pairing has barriers) */
        const uint m = first_message + get_local_id(0) / items;
        const uint first = m * message_blocks;
        const uint length = m < message_count && first < block_count
                                ? min(message_blocks, block_count - first) : 0u;
        const uint steps = (length + items - 1u) / items;
        const uint lead = steps * items - length;   /* virtual zero blocks in front */
        uint4 j0 = AES_UINT4(0u, 0u, 0u, 0u);
        ulong bytes = 0ul;
        if (m < message_count && j0s) {
            j0 = aes_load(j0s[m]);
            bytes = 16ul * message_blocks;
        } else if (m < message_count) {
            j0 = chunk_j0(base_j0, first_chunk + m);
            bytes = m + 1u < message_count ? 16ul * message_blocks : last_bytes;
        }
        ulong2 sum = AES_ULONG2(0ul, 0ul);
        for (uint s = 0; s < steps; ++s) {
            const uint v = t + s * items;
            ulong2 x = AES_ULONG2(0ul, 0ul);
            if (v >= lead) {
                const uint j = v - lead;
                const ulong offset = 16ul * j;
                uint4 text = aes_load(input[input_first + m * input_stride + j]);
                uint4 block = text ^ aes_encrypt_block(gcm_counter(j0, 1u + j), rk, te);
                if (bytes < offset + 16ul) {
                    const uint kept = bytes > offset ? (uint)(bytes - offset) : 0u;
                    text = gcm_keep_bytes(text, kept);
                    block = gcm_keep_bytes(block, kept);
                }
                output[output_first + m * output_stride + j] = aes_store(block);
                x = ghash_load(aes_store(hash_output ? block : text));
            }
            sum = (s ? GHASH_STRIDE_MULTIPLY(sum, stride_positions) : sum) ^ x;
        }
#if GCM_SUMS_BY_POWERS
        /* (the item's last virtual block, t + (steps - 1)·items, past the lead) */
        const ulong2 partial_h2 = ghash_sums_by_powers(
            sum, scratch, here, t, items, steps && t + (steps - 1u) * items >= lead,
            h_positions + GHASH_POWERS_AT);
#else
        const ulong2 partial = ghash_pair_sums(sum, scratch, here, t, items, positions);
#endif
        if (t == 0u && m < message_count) {
            /* GHASH = (partial·H ^ L)·H = partial·H^2 ^ L·H: two products side by side,
             * beside E(J0), not one after the other (the table of H^2 is level 1's).
             * A lone message's launch is bound by such chains, not by its AES. */
#if GCM_SUMS_BY_POWERS
            const ulong2 hash = partial_h2
                ^ ghash_multiply_positions_global(AES_ULONG2(0ul, 8ul * bytes), positions);
#else
            const ulong2 hash =
                ghash_multiply_positions_global(partial, positions + 2u * GHASH_POSITION_ENTRIES)
                ^ ghash_multiply_positions_global(AES_ULONG2(0ul, 8ul * bytes), positions);
#endif
            uint4 tag = ghash_store(hash) ^ aes_store(aes_encrypt_block(j0, rk, te));
            if (tag_masks)
                tag = tag ^ tag_masks[m * tag_mask_step];
            if (tags)
                tags[tags_first + m * tag_stride] = tag;
            if (verdict) {
                const uint4 d = tag ^ received[received_first + m * received_stride];
                if (d.x | d.y | d.z | d.w)
                    atomic_min(verdict, verdict_first + m);
            }
        }
    }
}

#endif

/* The position tables (ghash.cl) of B^(2^j) for j = 0 .. GHASH_POSITION_POWERS - 1,
 * B = (base_hi, base_lo): gcm_ghash multiplies by B^T with T work-items in its stride
 * and by B^(2^level) in its pairing; gcm_crypt_hash by H^1 .. H^256. Entry k·16 + n of
 * table j is nibble entry n of B^(2^j) (aescl/ghash.py's nibble_table) times
 * x^(4(31-k)); each table is its entries' high words, then their low words. Item
 * (j, n) squares B j times and writes its entry of all 32 positions: one launch per
 * key, with no nibble tables of 256 powers to build first (a chunked call opening a
 * new message waits for these before its first batch). */
#define GHASH_POSITION_ITEMS (GHASH_POSITION_POWERS * 16)
AES_CPU_TARGET __kernel void ghash_position_tables(const ulong base_hi, const ulong base_lo,
                                                   __global ulong2 *positions)
{
    for (uint i = get_global_id(0); i < GHASH_POSITION_ITEMS; i += get_global_size(0)) {
        const uint j = i / 16u, n = i % 16u;
        ulong2 power = AES_ULONG2(base_hi, base_lo);
        for (uint s = 0; s < j; ++s)
            power = ghash_multiply_bitwise(power, power);
        ulong2 entry = AES_ULONG2(0ul, 0ul);   /* nibble n: power times x^0 .. x^3 */
        for (uint bit = 8u; bit; bit >>= 1) {
            if (n & bit)
                entry ^= power;
            power = ghash_times_x(power);
        }
        __global ulong *table = (__global ulong *)positions + 2u * GHASH_POSITION_ENTRIES * j;
        for (int k = 31; k >= 0; --k) {   /* times x^(4(31-k)) */
            table[16u * k + n] = entry.x;
            table[GHASH_POSITION_ENTRIES + 16u * k + n] = entry.y;
            entry = ghash_times_x4(entry);
        }
    }
}

/* H^1 .. H^GHASH_POWERS into powers[0 ..] (entry k - 1 for H^k), H = (h_hi, h_lo):
 * what gcm_crypt_hash's sums by powers (GCM_SUMS_BY_POWERS) multiply by, kept after
 * H's position tables (at GHASH_POWERS_AT). Item k - 1 raises H to k by
 * square-and-multiply (ghash_power_bitwise); launched apart from the position
 * tables, and only for the build that reads them, so that a chunked call's new key
 * waits for no more than it did. */
AES_CPU_TARGET __kernel void ghash_powers(const ulong h_hi, const ulong h_lo,
                                          __global ulong2 *powers)
{
    for (uint k = get_global_id(0); k < GHASH_POWERS; k += get_global_size(0))
        powers[k] = ghash_power_bitwise(AES_ULONG2(h_hi, h_lo), k + 1u);
}

/* The nibble tables of H^1..H^count (table k-1 for H^k, 16 entries each, entry n
 * as aescl/ghash.py:nibble_table defines it), H = (h_hi, h_lo). Item k raises H
 * to k + 1 by square-and-multiply: a few dozen bitwise products, in parallel,
 * instead of a chain of count products on the host for every key. */
AES_CPU_TARGET __kernel void ghash_power_tables(const ulong h_hi, const ulong h_lo, const uint count,
                                 __global ulong2 *tables)
{
    for (uint k = get_global_id(0); k < count; k += get_global_size(0)) {
        const ulong2 power = ghash_power_bitwise(AES_ULONG2(h_hi, h_lo), k + 1u);
        ulong2 single[4];   /* power times x^0 .. x^3 */
        single[0] = power;
        for (int j = 1; j < 4; ++j)
            single[j] = ghash_times_x(single[j - 1]);
        for (uint n = 0; n < 16u; ++n) {
            ulong2 entry = AES_ULONG2(0ul, 0ul);
            for (int j = 0; j < 4; ++j)
                if (n & (8u >> j))
                    entry ^= single[j];
            tables[16u * k + n] = entry;
        }
    }
}

/* Tags of messages with empty AAD: tag_m = E(J0_m) ^ (partial_m ^ L_m)·H, where
 * L_m is the length block (0 bits of AAD, 8·message_bytes[m] bits of text) and
 * h_tables starts with the table of H. One work-item per message; tag m goes to
 * tags[m * tag_stride] (1: side by side; the sealed layout's stride: after each chunk). */
AES_CPU_TARGET __kernel void gcm_tags(__global const ulong2 *partials, const uint message_count,
                       __global const uint4 *j0s, __global const ulong *message_bytes,
                       __global const ulong2 *h_tables, __global uint4 *tags,
                       const uint tag_stride, AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    for (uint m = get_global_id(0); m < message_count; m += get_global_size(0)) {
        const ulong2 length_block = AES_ULONG2(0ul, 8ul * message_bytes[m]);
#if GHASH_CARRYLESS && AES_X86_AESNI
        const ulong2 hash = ghash_multiply_carryless(partials[m] ^ length_block, h_tables[8]);
#else
        const ulong2 hash = ghash_multiply_global(partials[m] ^ length_block, h_tables);
#endif
        tags[m * tag_stride] = ghash_store(hash) ^ aes_store(aes_encrypt_block(aes_load(j0s[m]), rk, te));
    }
}

/* The partial sums of gcm_ghash rewritten in place as blocks in memory order, so that
 * gcm_ghash can take them as data and fold them by powers of H^segment (one long
 * message split into segments: aescl/ghash.py, fold_on_device). */
AES_CPU_TARGET __kernel void ghash_sums_as_blocks(__global ulong2 *sums, const uint count)
{
    for (uint i = get_global_id(0); i < count; i += get_global_size(0))
        ((__global uint4 *)sums)[i] = ghash_store(sums[i]);
}
