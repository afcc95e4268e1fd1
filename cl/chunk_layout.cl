/* chunk_layout.cl: the small steps of the chunked format's device program
 * (aescl/engines/programs/device_chunks.py) beside the GCM kernels, where the fused
 * kernel is not used: each chunk's J0 and length, the received tags gathered, and the
 * first tag that does not match.
 *
 * Layouts, in 16-byte blocks (a chunk is 1024 blocks, its tag one):
 *   sealed: chunk k at block 1025k: its 1024 blocks, then its tag;
 *   plaintext: chunk k at block 1024k.
 * Mapping: one work-item per output item, grid-stride loop. No -D options.
 */
#include "aes_vendor.h"
#include "chunk_j0.h"

#define CHUNK_BLOCKS 1024u
#define SEALED_CHUNK_BLOCKS (CHUNK_BLOCKS + 1u)

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
 * separate CTR and GHASH kernels, which take them from memory (gcm_crypt_hash makes them
 * itself). Computing them here keeps a call free of small uploads, which would queue
 * behind the bulk ones. */
__kernel void chunks_counters(const uint4 base_j0, const ulong first, const uint count,
                              const ulong last_length, __global uint4 *j0s,
                              __global ulong *lengths)
{
    for (uint i = get_global_id(0); i < count; i += get_global_size(0)) {
        j0s[i] = aes_store(chunk_j0(base_j0, first + i));
        lengths[i] = i + 1u < count ? 16ul * CHUNK_BLOCKS : last_length;
    }
}
