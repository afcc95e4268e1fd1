/* aes_vendor_cuda.h: OpenCL C, as aescl's kernels use it, in CUDA C++ (NVRTC).
 *
 * Included by aes_vendor.h when __CUDACC__ is defined (NVRTC defines it). It maps
 * the OpenCL qualifiers, scalar and vector types, work-item functions and
 * built-ins that the kernels use; nothing else of OpenCL C is promised. Only the
 * first dimension exists: aescl launches one-dimensional grids. Pointers carry no
 * address space in CUDA, so __global, __local and __constant vanish from them;
 * arrays declared in __local memory and tables in __constant memory are spelled
 * AES_LOCAL_ARRAY and AES_CONSTANT_TABLE by the sources for this reason.
 *
 * Reads: nothing. Kernels keep OpenCL's names (extern "C", so a module's
 * function is found by the name the OpenCL program has).
 */
#ifndef AES_VENDOR_CUDA_H
#define AES_VENDOR_CUDA_H

#define __kernel extern "C" __global__
#define __global
#define __local
#define __constant
#define AES_LOCAL_ARRAY __shared__
#define AES_CONSTANT_TABLE __constant__ const
/* Every helper is a device function (the sources mark each one inline). */
#define inline __device__ __forceinline__

/* The device is little-endian, as OpenCL would report with __ENDIAN_LITTLE__. */
#ifndef __ENDIAN_LITTLE__
#define __ENDIAN_LITTLE__ 1
#endif

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long long ulong;
typedef unsigned long long size_t_aes;

/* The key argument by value (aes_vendor.h), in the kernel's parameter space
 * (__grid_constant__: read where it is, never copied): its reads are operands from
 * the constant bank. A pointer to global memory cost one load per round key word
 * per block, each through the L1 that the table lookups saturate (44 loads beside
 * 160 lookups for AES-128, cuobjdump on sm_90). */
struct aes_key_argument {
    unsigned int words[60];
};
#define AES_KEY_ARGUMENT(name) const __grid_constant__ aes_key_argument name
#define AES_KEY_POINTER(name) ((name).words)
#define AES_KEY_ARGUMENT_SPACE

#define AES_UINT4(a, b, c, d) make_uint4((a), (b), (c), (d))
/* CUDA's own ulong2 (two unsigned longs, 64 bits each on the platforms NVRTC serves). */
#define AES_ULONG2(a, b) make_ulong2((a), (b))

__device__ __forceinline__ uint4 operator^(uint4 a, uint4 b)
{
    return make_uint4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w);
}
__device__ __forceinline__ uint4 &operator^=(uint4 &a, uint4 b)
{
    a = a ^ b;
    return a;
}
__device__ __forceinline__ ulong2 operator^(ulong2 a, ulong2 b)
{
    return make_ulong2(a.x ^ b.x, a.y ^ b.y);
}
__device__ __forceinline__ ulong2 &operator^=(ulong2 &a, ulong2 b)
{
    a = a ^ b;
    return a;
}

/* Work-item functions, dimension 0 only. */
__device__ __forceinline__ size_t_aes get_local_id(int) { return threadIdx.x; }
__device__ __forceinline__ size_t_aes get_local_size(int) { return blockDim.x; }
__device__ __forceinline__ size_t_aes get_group_id(int) { return blockIdx.x; }
__device__ __forceinline__ size_t_aes get_num_groups(int) { return gridDim.x; }
__device__ __forceinline__ size_t_aes get_global_id(int)
{
    return (size_t_aes)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t_aes get_global_size(int)
{
    return (size_t_aes)gridDim.x * blockDim.x;
}

#define CLK_LOCAL_MEM_FENCE 1
#define barrier(flags) __syncthreads()

/* OpenCL's 32-bit atomics on __global memory. */
__device__ __forceinline__ uint atomic_min(uint *p, uint v) { return atomicMin(p, v); }

/* OpenCL's rotate: left by n bits (n below the width). */
__device__ __forceinline__ uint rotate(uint x, uint n) { return __funnelshift_l(x, x, n); }
__device__ __forceinline__ ulong rotate(ulong x, ulong n)
{
    return n ? (x << n) | (x >> (64u - n)) : x;
}
/* (the members of CUDA's ulong2 are unsigned long, of the same 64 bits) */
__device__ __forceinline__ ulong rotate(unsigned long x, unsigned long n)
{
    return rotate((ulong)x, (ulong)n);
}

__device__ __forceinline__ uint aes_bswap32(uint x) { return __byte_perm(x, 0u, 0x0123u); }

#endif /* AES_VENDOR_CUDA_H */
