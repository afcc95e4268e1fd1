/* chunk_layout.cl: full chunks of the chunked format between its sealed layout and
 * the GCM kernels' slot layout, on the device, so that the host moves each byte
 * once (aescl/chunked.py); and the pieces of a batch that device arrays need.
 *
 * Layouts, in 16-byte blocks (a chunk is 1024 blocks, its tag one):
 *   sealed: chunk k at block 1025k: its 1024 blocks, then its tag;
 *   slots:  chunk k at block 1024k; the tags apart from them.
 * Only full chunks: the final, shorter chunk is assembled on the host.
 * Mapping: one work-item per output block, grid-stride loop. No -D options.
 */
#include "aes_vendor.h"
#include "chunk_j0.h"

#define CHUNK_BLOCKS 1024u
#define SEALED_CHUNK_BLOCKS (CHUNK_BLOCKS + 1u)

/* sealed[0 .. 1025 * chunk_count) from slots and tags (sealing). */
__kernel void chunks_pack(__global const uint4 *slots, __global const uint4 *tags,
                          __global uint4 *sealed, const uint chunk_count)
{
    const uint total = chunk_count * SEALED_CHUNK_BLOCKS;
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        const uint k = i / SEALED_CHUNK_BLOCKS;
        const uint j = i - k * SEALED_CHUNK_BLOCKS;
        sealed[i] = j < CHUNK_BLOCKS ? slots[k * CHUNK_BLOCKS + j] : tags[k];
    }
}

/* Opening, the inverse of chunks_pack into one buffer: the slots at block 0 and
 * tag k at block tags_block + k, so that the host downloads both at once. */
__kernel void chunks_unpack(__global const uint4 *sealed, __global uint4 *out,
                            const uint tags_block, const uint chunk_count)
{
    const uint total = chunk_count * SEALED_CHUNK_BLOCKS;
    for (uint i = get_global_id(0); i < total; i += get_global_size(0)) {
        const uint k = i / SEALED_CHUNK_BLOCKS;
        const uint j = i - k * SEALED_CHUNK_BLOCKS;
        out[j < CHUNK_BLOCKS ? k * CHUNK_BLOCKS + j : tags_block + k] = sealed[i];
    }
}

/* The tags of sealed full chunks side by side: tag k (block 1025k + 1024) to tags[k].
 * Opening compares them with the tags made from the chunks. */
__kernel void chunks_tags(__global const uint4 *sealed, __global uint4 *tags,
                          const uint chunk_count)
{
    for (uint k = get_global_id(0); k < chunk_count; k += get_global_size(0))
        tags[k] = sealed[k * SEALED_CHUNK_BLOCKS + CHUNK_BLOCKS];
}

/* The first of `count` chunks whose computed and received tags differ, into
 * *first_mismatch, which the host sets to `count` first (it stays so when all match).
 * Every tag is compared, with no early exit; only that index comes back to the host. */
__kernel void chunks_first_mismatch(__global const uint4 *computed,
                                    __global const uint4 *received, const uint count,
                                    __global uint *first_mismatch)
{
    for (uint k = get_global_id(0); k < count; k += get_global_size(0)) {
        const uint4 d = computed[k] ^ received[k];
        if (d.x | d.y | d.z | d.w)
            atomic_min(first_mismatch, k);
    }
}

/* The GCM batch arguments of chunks first .. first + count - 1: J0 (16 bytes in memory
 * order; chunk_j0.h) and length (full but the last, of last_length bytes), for the
 * kernels that take them from memory (the host-data pipeline's; gcm_crypt_hash makes
 * them itself for device arrays). Computing them here keeps the pipeline free of small
 * uploads, which would queue behind the bulk ones. */
__kernel void chunks_counters(const uint4 base_j0, const ulong first, const uint count,
                              const ulong last_length, __global uint4 *j0s,
                              __global ulong *lengths)
{
    for (uint i = get_global_id(0); i < count; i += get_global_size(0)) {
        j0s[i] = aes_store(chunk_j0(base_j0, first + i));
        lengths[i] = i + 1u < count ? 16ul * CHUNK_BLOCKS : last_length;
    }
}
