// Registers, spills and shared memory of conv2d's implicit GEMM instantiations, compiled by nvcc outside the library
// (the same template text NVRTC gets), e.g. to compare a kernel variant's register allocation with another's:
//   nvcc -std=c++17 -arch=sm_90a --resource-usage -I templates -c bench/experiments/igemm_sass.cu -o /tmp/igemm.o
//   cuobjdump -sass /tmp/igemm.o   (the SASS)
// Parameters (igemm.cuh's conv2d_igemm): T, layout (0 NCHW, 1 NHWC, 2 NCHW repacked), C, K, R, S, strides,
// dilations, tile_m, tile_n, tile_k, warps_m, warps_n, min_blocks, mma, stages, split_k, bias, persist.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "conv2d/conv2d.cuh"
// N32 C64 -> K256 1x1 read as pixel runs: the plain 64 x 64 kernel and the persistent 64 x 128 one of the H100 record.
template __global__ void jitune::conv::conv2d_igemm<__half, 0, 64, 256, 1, 1, 1, 1, 1, 1, 64, 64, 64, 1, 1, 1, 1, 3,
                                                    1, 0, 0>(jitune::conv::Args<__half>, void*);
template __global__ void jitune::conv::conv2d_igemm<__half, 0, 64, 256, 1, 1, 1, 1, 1, 1, 64, 128, 64, 1, 2, 1, 1, 3,
                                                    1, 0, 1>(jitune::conv::Args<__half>, void*);
// C = K = 256 3x3 14x14: the channels-last 128 x 64 kernel and the repacking one of the same tiles.
template __global__ void jitune::conv::conv2d_igemm<__half, 1, 256, 256, 3, 3, 1, 1, 1, 1, 128, 64, 64, 2, 1, 1, 1, 4,
                                                    1, 0, 0>(jitune::conv::Args<__half>, void*);
template __global__ void jitune::conv::conv2d_igemm<__half, 2, 256, 256, 3, 3, 1, 1, 1, 1, 128, 64, 64, 2, 1, 1, 1, 4,
                                                    1, 0, 0>(jitune::conv::Args<__half>, void*);
