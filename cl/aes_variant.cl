/* aes_variant.cl: which rounds aes_core.cl compiled to with a set of options, so
 * that aescl can report it and its tests can check that a request took effect.
 *   0: T-table rounds (portable)
 *   1: x86 AES-NI instructions (AES_HARDWARE_ROUNDS on an x86 CPU with AES)
 *   2, 3: the same on 256- or 512-bit registers (VAES, AES_WIDE_ROUNDS)
 *   4: the 128-bit instructions as inline assembly (AES_X86_ASM; aes_vendor.h)
 * -D options: those of aes_core.cl.
 */
#include "aes_core.cl"

AES_CPU_TARGET __kernel void aes_core_variant(__global uint *variant)
{
    variant[0] = AES_CORE_VARIANT;
}
