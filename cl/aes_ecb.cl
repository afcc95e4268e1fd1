/* aes_ecb.cl: AES-ECB encryption and decryption (the inverse cipher).
 *
 * Buffers: input and output are arrays of 16-byte blocks in memory order; they
 * may be the same buffer (each block is read before it is written, by the same
 * work-item). key_material: see AES_KEY_SCHEDULE_DEVICE in aes_core.cl; for
 * decryption in host mode it holds keyschedule.decryption_round_keys.
 *
 * Mapping: a grid-stride loop, so work-item g handles blocks g, g + G, g + 2G, ...
 * (G = global size). Any global size works, and items past the end of the data
 * still reach the setup barrier.
 *
 * -D options: those of aes_core.cl (AES_ROUNDS, AES_KEY_SCHEDULE_DEVICE, ...).
 */
#include "aes_core.cl"

__kernel void aes_ecb_encrypt(__global const uint4 *input, __global uint4 *output,
                              const ulong block_count, __constant const uint *key_material)
{
    AES_ENCRYPT_SETUP(key_material);
    for (ulong i = get_global_id(0); i < block_count; i += get_global_size(0))
        output[i] = aes_store(aes_encrypt_block(aes_load(input[i]), rk, te));
}

__kernel void aes_ecb_decrypt(__global const uint4 *input, __global uint4 *output,
                              const ulong block_count, __constant const uint *key_material)
{
    AES_DECRYPT_SETUP(key_material);
    for (ulong i = get_global_id(0); i < block_count; i += get_global_size(0))
        output[i] = aes_store(aes_decrypt_block(aes_load(input[i]), rk, td, inv_sbox));
}
