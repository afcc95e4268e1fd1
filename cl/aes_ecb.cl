/* aes_ecb.cl: AES-ECB encryption and decryption (the inverse cipher).
 *
 * Buffers: input and output are arrays of 16-byte blocks in memory order; they
 * may be the same buffer (each block is read before it is written, by the same
 * work-item). key_material: see AES_KEY_SCHEDULE_DEVICE in aes_core.cl; for
 * decryption in host mode it holds keyschedule.decryption_round_keys.
 *
 * Mapping: runs of AES_BLOCKS_PER_ITEM blocks, spread over the work-items as
 * aes_core.cl's AES_CONTIGUOUS_RUNS says (grid-stride on GPUs, one contiguous
 * span per work-item on CPUs). Any global size works, and items past the end of
 * the data still reach the setup barrier.
 *
 * -D options: those of aes_core.cl (AES_ROUNDS, AES_KEY_SCHEDULE_DEVICE, ...).
 */
#include "aes_core.cl"

/* The run of blocks from `first`, zeros past the end: never read past the input. */
inline void aes_ecb_load_run(__global const uint4 *input, const ulong first,
                             const ulong block_count, uint4 *s)
{
    AES_UNROLL
    for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
        s[j] = first + j < block_count ? aes_load(input[first + j]) : AES_UINT4(0u, 0u, 0u, 0u);
}

inline void aes_ecb_store_run(__global uint4 *output, const ulong first,
                              const ulong block_count, const uint4 *s)
{
    AES_UNROLL
    for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
        if (first + j < block_count)
            output[first + j] = aes_store(s[j]);
}

AES_CPU_TARGET __kernel void aes_ecb_encrypt(__global const uint4 *input, __global uint4 *output,
                              const ulong block_count, AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    const ulong end = aes_runs_end(block_count);
    for (ulong first = aes_first_run(block_count); first < end; first += aes_run_step()) {
        uint4 s[AES_BLOCKS_PER_ITEM];
        aes_ecb_load_run(input, first, block_count, s);
        aes_encrypt_blocks(s, rk, te);
        aes_ecb_store_run(output, first, block_count, s);
    }
}

AES_CPU_TARGET __kernel void aes_ecb_decrypt(__global const uint4 *input, __global uint4 *output,
                              const ulong block_count, AES_KEY_ARGUMENT(key_material))
{
    AES_DECRYPT_SETUP(key_material);
    const ulong end = aes_runs_end(block_count);
    for (ulong first = aes_first_run(block_count); first < end; first += aes_run_step()) {
        uint4 s[AES_BLOCKS_PER_ITEM];
        aes_ecb_load_run(input, first, block_count, s);
        aes_decrypt_blocks(s, rk, td, inv_sbox);
        aes_ecb_store_run(output, first, block_count, s);
    }
}
