/* aes_ctr.cl: AES-CTR keystream XOR; the same kernel encrypts and decrypts.
 *
 * Buffers: input and output are arrays of 16-byte blocks in memory order; they
 * may be the same buffer. Only whole blocks are processed: the host keeps the
 * unused keystream of a partial final block for the next call.
 *
 * Counter: block i of the launch is encrypted under the 128-bit big-endian
 * counter block
 *     (counter & ~field_mask) | ((counter + i) & field_mask),
 * given as (hi, lo) 64-bit halves. field_mask covers the counter field (the bytes
 * after the nonce), so the counter wraps within its own field exactly as
 * pycryptodome and OpenSSL do, while the nonce bytes never change. The host
 * guarantees that no launch passes the point where a counter would repeat.
 *
 * Mapping: runs of AES_BLOCKS_PER_ITEM blocks, as in aes_ecb.cl.
 * -D options: those of aes_core.cl (AES_ROUNDS, AES_KEY_SCHEDULE_DEVICE, ...).
 */
#include "aes_core.cl"

/* Counter block `i` of the launch in the core's column layout. */
inline uint4 aes_ctr_counter_block(const ulong counter_hi, const ulong counter_lo,
                                   const ulong field_mask_hi, const ulong field_mask_lo,
                                   const ulong i)
{
    /* 128-bit add with carry; bits outside the field are restored below. */
    const ulong sum_lo = counter_lo + i;
    const ulong sum_hi = counter_hi + (sum_lo < counter_lo ? 1ul : 0ul);
    const ulong lo = (counter_lo & ~field_mask_lo) | (sum_lo & field_mask_lo);
    const ulong hi = (counter_hi & ~field_mask_hi) | (sum_hi & field_mask_hi);
    /* Big-endian counter bytes to columns with row 0 in the low byte. */
    return AES_UINT4(aes_bswap32((uint)(hi >> 32)), aes_bswap32((uint)hi),
                     aes_bswap32((uint)(lo >> 32)), aes_bswap32((uint)lo));
}

/* Counter blocks first .. first + AES_BLOCKS_PER_ITEM - 1 of the launch into s.
 * Within a run usually only the last 32-bit word changes: then one full counter
 * block and a 32-bit add per block replace the 128-bit rule, which costs more
 * than the AES rounds themselves on a CPU. The full rule serves a run that
 * carries out of the last word or a counter field narrower than 32 bits. */
inline void aes_ctr_counter_run(uint4 *s, const ulong counter_hi, const ulong counter_lo,
                                const ulong field_mask_hi, const ulong field_mask_lo,
                                const ulong first)
{
    const uint low = (uint)(counter_lo + first);
    /* One block per run (GPUs) has nothing to share: the full rule, nothing more. */
    if (AES_BLOCKS_PER_ITEM > 1 && (uint)field_mask_lo == 0xffffffffu
        && low <= 0xffffffffu - (AES_BLOCKS_PER_ITEM - 1)) {
        const uint4 base = aes_ctr_counter_block(counter_hi, counter_lo, field_mask_hi,
                                                 field_mask_lo, first);
        AES_UNROLL
        for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
            s[j] = AES_UINT4(base.x, base.y, base.z, aes_bswap32(low + (uint)j));
    } else {
        AES_UNROLL
        for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
            s[j] = aes_ctr_counter_block(counter_hi, counter_lo, field_mask_hi, field_mask_lo,
                                         first + j);
    }
}

AES_CPU_TARGET __kernel void aes_ctr_xor(__global const uint4 *input, __global uint4 *output,
                          const ulong block_count,
                          const ulong counter_hi, const ulong counter_lo,
                          const ulong field_mask_hi, const ulong field_mask_lo,
                          AES_KEY_ARGUMENT(key_material))
{
    AES_ENCRYPT_SETUP(key_material);
    const ulong end = aes_runs_end(block_count);
    for (ulong first = aes_first_run(block_count); first < end; first += aes_run_step()) {
        /* Keystream past block_count is computed and dropped: cheaper than a
         * shorter run's branches, and never leaves the work-item. */
        uint4 s[AES_BLOCKS_PER_ITEM];
        aes_ctr_counter_run(s, counter_hi, counter_lo, field_mask_hi, field_mask_lo, first);
        aes_encrypt_blocks(s, rk, te);
        AES_UNROLL
        for (int j = 0; j < AES_BLOCKS_PER_ITEM; ++j)
            if (first + j < block_count)
                output[first + j] = input[first + j] ^ aes_store(s[j]);
    }
}
