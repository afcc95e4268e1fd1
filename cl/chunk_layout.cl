/* chunk_layout.cl: full chunks of the chunked format between its sealed layout and
 * the GCM kernels' slot layout, on the device, so that the host moves each byte
 * once (aescl/chunked.py).
 *
 * Layouts, in 16-byte blocks (a chunk is 1024 blocks, its tag one):
 *   sealed: chunk k at block 1025k: its 1024 blocks, then its tag;
 *   slots:  chunk k at block 1024k; the tags apart from them.
 * Only full chunks: the final, shorter chunk is assembled on the host.
 * Mapping: one work-item per output block, grid-stride loop. No -D options.
 */
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
